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
        if config.getoption("--pcspec-engine") == "walker":
            walked = self._walk(variant, targets, profile)
            if walked is not None:
                raise VariantFailed(self._report(walked))
            return
        machine = machine_for(variant, targets=targets)
        chosen = PROFILES[profile]
        budget = settings(chosen, derandomize=True) if profile == "ci" else chosen
        try:
            run_state_machine_as_test(machine, settings=budget)  # type: ignore[no-untyped-call,unused-ignore]
        except AssertionError:
            if machine.record.last is None:
                raise
            violation, ops, cfg = machine.record.last
            found = [{"property": violation.rule, "op": violation.at, "message": violation.message}]
            trace = shrink_trace(Trace(variant, cfg, list(ops), None, found), violation.rule)
            raise VariantFailed(self._report(trace)) from None

    @staticmethod
    def _walk(variant: Design, targets: list[str], profile: str) -> Trace | None:
        """The first target (in catalogue order) the survey saw broken, hunted for its shortest
        trace (the hunt shrinks it; the survey's own trace, shrunk, if the hunt's budget finds
        none); None when the survey saw none."""
        from pcspec.engines.search import hunt, survey
        from pcspec.properties.judge import shrink_trace
        from pcspec.tools.verdicts import PROFILES as BUDGETS

        survey_examples, hunt_examples = BUDGETS[profile]
        _, hits = survey(variant, seed=0, examples=survey_examples, properties=targets)
        first = next((pid for pid in targets if pid in hits), None)
        if first is None:
            return None
        _, hit = hunt(variant, first, seed=0, examples=hunt_examples)
        return hit.trace if hit is not None else shrink_trace(hits[first].trace, first)

    def _report(self, trace: Trace) -> str:
        """The failure's text; writes the (already shrunk) trace and its pytest file."""
        from pcspec.properties.judge import write_counterexample

        variant = trace.variant
        rule = str(trace.expect[0]["property"])
        out = Path(self.config.getoption("--pcspec-out"))
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{variant.name.replace(':', '-')}__{rule}"
        path = write_counterexample(trace, out, stem, self.spec)
        v = trace.expect[0]
        steps = "\n".join(f"  [{i}] {json.dumps(op, sort_keys=True)}" for i, op in enumerate(trace.ops))
        return (
            f"{variant.name} violates {v['property']} at model operation {v['op']}: {v['message']}\n"
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
