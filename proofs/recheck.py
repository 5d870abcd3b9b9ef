"""Re-checking exported queries with a second solver: cvc5 (``pip install cvc5``).

Each file of an export (``pcspec.proofs.suite.export``) is parsed and run by cvc5's own
SMT-LIB parser (the files say ``(set-logic ALL)``) with ``OPTIONS`` and a per-query time
limit. Its verdict must equal the one Z3 gave, recorded in the manifest; an ``unknown`` on
either side is a disagreement.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pcspec.core.errors import PcspecError

# Extended arrays (Z3 writes constant arrays), incremental mode (a lemma query's blocks sit
# in push/pop), and the SAT solver's own decision heuristic: with the default
# (justification) cvc5 timed out at 15 s on two linear LIMIT-1 queries it then proves in 2.
OPTIONS: tuple[tuple[str, str], ...] = (("arrays-exp", "true"), ("incremental", "true"), ("decision", "internal"))


@dataclass
class Recheck:
    file: str
    z3: str
    cvc5: str
    seconds: float

    @property
    def agrees(self) -> bool:
        return self.z3 == self.cvc5 and self.z3 in ("sat", "unsat")


def available() -> bool:
    try:
        import cvc5  # noqa: F401
    except ImportError:
        return False
    return True


def run_cvc5(text: str, tlimit_ms: int = 10_000) -> str:
    """cvc5's verdict on one query file: ``unsat`` when every ``check-sat`` says so, ``sat``
    at the first that does, ``unknown`` otherwise."""
    import cvc5

    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    for k, v in (*OPTIONS, ("tlimit-per", str(tlimit_ms))):
        solver.setOption(k, v)
    symbols = cvc5.SymbolManager(tm)
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "query")
    answers: list[str] = []
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        out: Any = cmd.invoke(solver, symbols)
        word = out.split()[0] if out and out.strip() else ""
        if word in ("sat", "unsat", "unknown"):
            answers.append(word)
            if answers[-1] != "unsat":
                break
    if not answers:
        return "unknown"
    return "unsat" if all(a == "unsat" for a in answers) else answers[-1]


def require_cvc5() -> None:
    if not available():
        raise PcspecError("cvc5 is not installed (pip install cvc5, or pip install 'pcspec[dev]')", "--recheck")


def recheck(directory: Path, tlimit_ms: int = 10_000) -> list[Recheck]:
    require_cvc5()
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise PcspecError(f"no readable manifest.json: {exc}", str(directory)) from None
    out: list[Recheck] = []
    for entry in manifest["queries"]:
        text = (directory / entry["file"]).read_text(encoding="utf-8")
        t0 = time.perf_counter()
        verdict = run_cvc5(text, tlimit_ms)
        out.append(Recheck(entry["file"], entry["z3"], verdict, time.perf_counter() - t0))
    return out
