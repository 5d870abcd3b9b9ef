"""Generate docs/PROPERTIES.md from the catalogue and the oracle (the part of the spec a C++
port or a reviewer reads). ``python -m pcspec.tools.docgen > docs/PROPERTIES.md``; a test keeps
the file in step with the code."""

from __future__ import annotations

import argparse
import sys

from pcspec.model.designs import DESIGNS, named
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.mutants import MUTANTS
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE, REASONS
from pcspec.properties.routes import routes


def _routes(design: str, pid: str) -> list[str]:
    """The cell's routes (properties/routes.py), the name verify prints beside a counterexample,
    and what in a trace tells each apart."""
    rs = routes(design, pid)
    out = []
    for r in rs:
        if r.policy:
            ways = "a rule of the design: no fault or file needed"
        else:
            ways = " or ".join(" + ".join(f"`{i}`" for i in sorted(w)) or "no fault, no file" for w in r.ways)
        text = "the reason above" if r.why is None else r.why
        out.append(f"  - route `{r.name}` ({ways}): {text}")
    return out


def render() -> str:
    designs = list(ORACLE)  # the model's designs, then the upstream build b11549
    lines = [
        "# Properties of the prompt cache and context checkpoints",
        "",
        "Generated from `properties/catalogue.py` and `properties/oracle.py` by",
        "`python -m pcspec.tools.docgen`; do not edit by hand.",
        "",
        "Verdicts: `x` the design is expected to violate the property (pcspec verify must find",
        "a counterexample), `.` expected to hold (no violation may be found), `?` no expectation",
        "(the extended catalogue: `fixed` must hold it; elsewhere the verdict is recorded).",
        "",
        "Under each design's reason, its *routes* (`properties/routes.py`): the ways its",
        "counterexamples have been seen to come about. Each gives the name `pcspec verify` prints",
        "beside a counterexample, the ingredients a trace of it holds (fault sites injected, slot-file",
        "fields corrupted, a slot restore; one of the listed sets), and why it violates the property.",
        "",
        "C++ lines such as `server-context.cpp:3278` are of the October tree 0c1e570 (`tools/server/`",
        "unless a path is given); #30137's merged diff, the #30137 review, #27451 and the other pull",
        "requests cited are described, with how to get each, in `docs/SOURCES.md`; F1 to F4 are the",
        "behaviours measured on a real server in `docs/FINDINGS.md`.",
        "",
        "| ID | family | statement | " + " | ".join(designs) + " |",
        "|---|---|---|" + "---|" * len(designs),
    ]
    for p in CATALOGUE:
        cells = " | ".join(ORACLE[d][p.id] for d in designs)
        flag = " (advisory)" if p.advisory else ""
        lines.append(f"| {p.id} | {p.family} | {p.statement}{flag} | {cells} |")
    lines += ["", "## Each property", ""]
    for p in CATALOGUE:
        lines += [f"### {p.id}", "", p.statement, "", f"- family: {p.family}", f"- C++: {p.cpp}"]
        for d in designs:
            reason = REASONS.get(d, {}).get(p.id)
            routes_of = _routes(d, p.id)
            if not reason and (routes_of or ORACLE[d][p.id] == "x"):
                # (an upstream build's cell without a reason of its own: baseline's code at the
                # lines its rule set maps; without this line its routes read as the previous
                # design's)
                reason = (
                    "baseline's reason, the same code at the lines docs/RULESETS.md maps"
                    " (a route with a reason of its own says so)"
                )
            if reason:
                lines.append(f"- violated by `{d}`: {reason}")
            lines += routes_of
        caught = [m for m, t in MUTANT_TARGETS.items() if p.id in t]
        if caught:
            lines.append("- catches " + ", ".join(f"`{m}` ({MUTANTS[m].summary})" for m in caught))
        lines.append("")
    lines += ["## Designs", ""]
    for v in DESIGNS.values():
        lines.append(f"- `{v.name}`: {v.summary}")
    for name in ORACLE:
        if name not in DESIGNS:
            lines.append(f"- `{name}` (an upstream build, its rule set: docs/RULESETS.md): {named()[name].summary}")
    lines += ["", "## Mutants", ""]
    lines += [
        "Each mutant plants one rule change in a design, its base (named after `of`). It is caught by one",
        "of its target properties that it violates where its base does not, on the same trace: a mutant",
        "of `fixed`, which violates nothing, by any violation of a target.",
        "",
    ]
    for m in MUTANTS.values():
        targets = ", ".join(MUTANT_TARGETS[m.name])
        lines.append(f"- `{m.name}` (of `{m.base}`): {m.summary}; must be caught by {targets}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pcspec.tools.docgen",
        description="Print docs/PROPERTIES.md, generated from the catalogue and the oracle"
        " (python -m pcspec.tools.docgen > docs/PROPERTIES.md).",
    )
    ap.parse_args(argv)
    print(render(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
