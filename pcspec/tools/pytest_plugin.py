"""pcspec in a user's own pytest run: ``pytest --pcspec-variant pkg.mod:NAME``.

Installed with pcspec as a ``pytest11`` entry point; inert unless ``--pcspec-variant`` is given
(it then adds one test per variant named). Each test runs the catalogue's stateful fuzzing of
the variant, every property a target except those the user declares (``--pcspec-expect``, or
``PCSPEC_EXPECT`` in the variant's module: ``pcspec.tools.user_variant``), with the ``ci``
budget unless ``--pcspec-profile`` asks for a longer one.

Two engines run the same rules (``pcspec.properties.rules``). The default is pcspec's seeded
walker (``pcspec.engines.search``: a survey, then a hunt of the first property it saw broken),
because a gate in CI must give the same answer on every machine: the walker draws from its own
PRNG, so the result depends on the variant and the budget alone, whatever Hypothesis version the
user's environment holds. ``--pcspec-engine hypothesis`` runs the Hypothesis state machine
(``pcspec.engines.hypothesis``) instead, derandomized under ``ci``; a derandomized Hypothesis
run is one fixed seed whose luck changes with the Hypothesis version and with the constants
Hypothesis reads from the user's own source files (seen: the same variant failed on one machine
and passed on another).

A failure is reported as pcspec reports everything: the shrunk steps, numbered as the trace
file numbers them (``pcspec replay`` and the generated pytest file use the same numbers), and
the trace file itself, written to ``--pcspec-out`` (default ``pcspec-out``), with the
reproduction file beside it. pcspec's shrinker (``pcspec.properties.judge.shrink_trace``)
shrinks the trace by replay, as it shrinks every counterexample it writes (after Hypothesis's
own shrinking, under that engine).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pcspec.core.trace import Trace
    from pcspec.model.design import Design

OPTION = "--pcspec-variant"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pcspec", "pcspec: fuzz a prompt-cache design of your own")
    group.addoption(
        OPTION,
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="fuzz this Design of yours (the object NAME in MODULE) with the catalogue; repeatable",
    )
    group.addoption(
        "--pcspec-profile",
        default="ci",
        choices=("ci", "dev", "campaign"),
        help="budget: ci (the default: 600 walker survey examples, or 60 derandomized Hypothesis ones), dev, campaign",
    )
    group.addoption(
        "--pcspec-engine",
        default="walker",
        choices=("walker", "hypothesis"),
        help="walker (pcspec's seeded PRNG: the same result everywhere; the default) or hypothesis",
    )
    group.addoption(
        "--pcspec-expect",
        action="append",
        default=[],
        metavar="PROPERTY",
        help="a violation your variant is meant to show (repeatable): not a failure",
    )
    group.addoption("--pcspec-out", default="pcspec-out", metavar="DIR", help="where failing traces go")


# What each pcspec item ran (its engine, budget and how much it judged), printed at the end of
# the run beside pytest's "passed": a pass is only as strong as what ran.
RAN: pytest.StashKey[list[str]] = pytest.StashKey()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RAN] = []


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    ran = config.stash.get(RAN, [])
    if ran:
        terminalreporter.write_sep("-", "pcspec: what ran")
        for line in ran:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for spec in config.getoption(OPTION):
        items.append(VariantItem.from_parent(session, name=f"pcspec[{spec}]", spec=spec))


class VariantFailed(Exception):
    """A property of the catalogue broken by the user's variant (the report is the message)."""


class VariantItem(pytest.Item):
    def __init__(self, *, spec: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.spec = spec

    def runtest(self) -> None:
        # (imported here: the plugin is loaded by every pytest run beside pcspec, and costs
        # nothing until it is asked to fuzz)
        from hypothesis import settings
        from hypothesis.stateful import run_state_machine_as_test

        from pcspec.core.errors import PcspecError
        from pcspec.core.trace import Trace
        from pcspec.engines.hypothesis import PROFILES, machine_for
        from pcspec.properties.catalogue import CATALOGUE, get_property
        from pcspec.properties.judge import shrink_trace
        from pcspec.tools.user_variant import declared, load_variant

        config = self.config
        try:
            variant = load_variant(self.spec)
            expect = {get_property(p).id for p in config.getoption("--pcspec-expect")} | declared(self.spec)
        except PcspecError as exc:
            raise VariantFailed(f"pcspec: {exc}") from None
        targets = [p.id for p in CATALOGUE if p.id not in expect]
        profile = config.getoption("--pcspec-profile")
        ran = config.stash.get(RAN, [])
        if config.getoption("--pcspec-engine") == "walker":
            walked, said = self._walk(variant, targets, profile)
            ran.append(f"{self.spec}: {said}")
            if walked is not None:
                raise VariantFailed(self._report(walked))
            return
        machine = machine_for(variant, targets=targets, out=None)
        chosen = PROFILES[profile]
        budget = settings(chosen, derandomize=True) if profile == "ci" else chosen
        how = (f"hypothesis, {profile} ({chosen.max_examples} examples of up to {chosen.stateful_step_count} steps"
               f"{', derandomized' if profile == 'ci' else ''})")
        try:
            run_state_machine_as_test(machine, settings=budget)  # type: ignore[no-untyped-call,unused-ignore]
        except AssertionError:
            if machine.record.last is None:
                raise
            ran.append(f"{self.spec}: {how}: {machine.record.steps} model operations judged, a target violated")
            violation, ops, cfg = machine.record.last
            found = [{"property": violation.rule, "op": violation.at, "message": violation.message}]
            trace = shrink_trace(Trace(variant, cfg, list(ops), None, found), violation.rule)
            raise VariantFailed(self._report(trace)) from None
        ran.append(f"{self.spec}: {how}: {machine.record.steps} model operations judged, no target violated"
                   " (a derandomized Hypothesis run is one seed's luck: not shown to hold; the walker, the"
                   " default engine, gives the same answer everywhere)")

    @staticmethod
    def _walk(variant: Design, targets: list[str], profile: str) -> tuple[Trace | None, str]:
        """The first target (in catalogue order) the survey saw broken, hunted for its shortest
        trace (the hunt shrinks it; the survey's own trace, shrunk, if the hunt's budget finds
        none); None when the survey saw none. And what ran, in one line."""
        from pcspec.engines.search import hunt, survey
        from pcspec.properties.judge import shrink_trace
        from pcspec.tools.verdicts import PROFILES as BUDGETS

        survey_examples, hunt_examples = BUDGETS[profile]
        run, hits = survey(variant, seed=0, examples=survey_examples, properties=targets)
        said = (f"walker, {profile}, seed 0: a survey of {survey_examples} examples ({run.steps} model operations "
                f"judged)")
        first = next((pid for pid in targets if pid in hits), None)
        if first is None:
            return None, said + ", no target violated"
        hrun, hit = hunt(variant, first, seed=0, examples=hunt_examples)
        said += f", then a hunt of {first} ({hrun.steps} operations)"
        return (hit.trace if hit is not None else shrink_trace(hits[first].trace, first)), said

    def _report(self, trace: Trace) -> str:
        """The failure's text; writes the (already shrunk) trace and its pytest file."""
        from pcspec.properties.catalogue import get_property
        from pcspec.properties.judge import replay, write_counterexample

        variant = trace.variant
        rule = str(trace.expect[0]["property"])
        out = Path(self.config.getoption("--pcspec-out"))
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{variant.name.replace(':', '-')}__{rule}"
        path = write_counterexample(trace, out, stem, self.spec)
        v = trace.expect[0]
        steps = "\n".join(f"  [{i}] {json.dumps(op.to_json(), sort_keys=True)}" for i, op in enumerate(trace.ops))
        where = f"model operation {v['op']}"
        for step in replay(trace, [get_property(rule)]).steps:
            if step.first_op <= v["op"] <= step.last_op:
                where = step.where(v["op"])
        return (
            f"{variant.name} violates {v['property']} at {where}: {v['message']}\n"
            f"shrunk to {len(trace.ops)} step(s) (numbered as the trace's operations):\n{steps}\n"
            f"trace: {path}   (pcspec replay {path} --variant-module {self.spec})\n"
            f"pytest file: {path.parent / ('repro_' + stem.replace('-', '_') + '.py')}"
        )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, VariantFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"pcspec fuzzing of {self.spec}"
