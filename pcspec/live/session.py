"""One live run: start a server, run a workload (fuzzed or given), stop it, judge it.

``execute`` is the one path for fuzzing, shrinking and replaying a saved workload: a fresh
server (so its state at the start is known), the operations, then ``analyse``. The server is
stopped in a ``finally`` whatever happens, by its own PID.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from pcspec.live import calibrate
from pcspec.live.analyze import Analysis, analyse
from pcspec.live.driver import Driver, Run
from pcspec.live.fuzz import Feedback, Fuzzer
from pcspec.live.ops import LiveOp
from pcspec.live.predict import Predictor
from pcspec.live.process import Flags, ServerProcess
from pcspec.live.schedule import read_facts
from pcspec.live.transparency import Reference
from pcspec.logcheck import parse_bytes
from pcspec.logcheck.logged import logged
from pcspec.model.logged import CkptCreated


@dataclass(frozen=True)
class Target:
    """What to run against: the binary, one model file and its kind, the flags."""

    binary: Path
    model: Path
    kind: str
    flags: Flags


@dataclass
class Outcome:
    target: Target
    ops: list[LiveOp]
    run: Run
    analysis: Analysis
    log: bytes
    workdir: Path
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def n_requests(self) -> int:
        return self.run.n_requests


def _feedback(fb: Feedback, run: Run, server: ServerProcess, upto: int) -> None:
    """Checkpoint positions of the synchronous requests since ``upto`` (log-guided cuts)."""
    for obs in run.observations[upto:]:
        if obs.op.op != "request" or obs.op.is_async or obs.log_end <= obs.log_start:
            continue
        recs = logged(parse_bytes(server.log_bytes(obs.log_start, obs.log_end)).events)
        fb.checkpoints[obs.op.id] = [r.n_tokens for r in recs if isinstance(r, CkptCreated) and r.n_tokens]


def execute(target: Target, workdir: Path, reference: Reference | None, *,
            ops: list[LiveOp] | None = None, fuzzer: Fuzzer | None = None, max_requests: int = 50,
            seconds: float = 120.0, timeout: float = 20.0, variant: str = calibrate.DEFAULT_VARIANT,
            compare_model: bool = True, logcheck: bool = True) -> Outcome:
    """Run ``ops`` (or what ``fuzzer`` generates, up to ``max_requests`` requests and
    ``seconds``) on a fresh server, then judge the run."""
    t0 = time.monotonic()
    server = ServerProcess(target.binary, target.model, target.flags, workdir)
    done: list[LiveOp] = []
    try:
        server.start()
        driver = Driver(server, timeout)
        run = Run()
        deadline = t0 + seconds
        if ops is not None:
            for op in ops:
                if time.monotonic() > deadline:
                    break
                done.append(op)
                if not driver.execute(run, [op]):
                    break
        elif fuzzer is not None:
            fb = Feedback()
            while run.n_requests < max_requests and time.monotonic() < deadline:
                group = fuzzer.next_ops(fb)
                if not group:
                    continue
                seen = len(run.observations)
                done.extend(group)
                if not driver.execute(run, group):
                    break
                _feedback(fb, run, server, seen)
        driver.finish(run)
    finally:
        server.stop()
    log = server.log_bytes()
    notes: list[str] = []
    predictor: Predictor | None = None
    if compare_model:
        facts = read_facts(log.decode("utf-8", "replace"))
        if facts is None:
            notes.append("no 'initializing, n_slots' line: the model was not run")
        else:
            rules = calibrate.variant(variant)
            cfg = calibrate.model_config(target.kind, target.flags, facts,
                                         state_seq_version=rules.rules.state_seq_version)
            predictor = Predictor(cfg, rules)
    analysis = analyse(run, log, predictor, reference, n_slots=target.flags.n_slots, logcheck=logcheck)
    return Outcome(target, done, run, analysis, log, workdir, time.monotonic() - t0, notes)
