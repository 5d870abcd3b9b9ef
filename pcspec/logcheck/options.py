"""The log checker's configuration, and its resolution for one server run.

The configuration is the model's: the design the log's server runs (``Options.design``, a
``pcspec.model.design.Design``: its decision points judge the log) and the rule set of its build
(``Options.rules``, a ``pcspec.model.rulesets.RuleSet`` by name, or ``auto``: from what the log
shows). ``resolve`` turns them into the ``Rules`` of one run: the design (``Rules.design``), the
rule set (``Rules.rule_set``), and what each rule the checker replays follows.

The facts of builds no rule set of the model covers (the eras before it, ``pcspec.logcheck.builds``)
and of the input, as options:

Option (``--option KEY=VALUE``)   values (default first)      what changed
``sweep``                         auto, when-full, always, none
    The too-close sweep of create_checkpoint (#25472, 2026-07-12) first ran on every creation;
    the October and November 2026 code (server-context.cpp:2297 at 0c1e570, and at e152332) runs it
    only while ``size() + 1 >= n_ctx_checkpoints``.
    Before #25472 there is no sweep.
``invalidation``                  auto, n-prefix, pos-max, either
    The rule set's ``invalidate_n_prefix`` (off: pos-max, on: n-prefix). At prompt start the
    August and October 2026 code erases checkpoints with ``pos_max > pos_next``; the November
    2026 code also erases those with ``n_tokens > n_prefix``.
    ``either`` accepts both, and once a prompt start of the run only one of them explains, holds
    the rest of the run to that one (one binary follows one rule).
``supersede``                     auto, on, off
    October and November 2026: create_checkpoint first erases a checkpoint with the same
    ``n_tokens`` (server-context.cpp:2320-2331 at 0c1e570).
``positions``                     text, mtmd
    ``text``: one position per token, so ``n_tokens == pos_max + 1`` for a created checkpoint;
    ``mtmd``: media chunks may take fewer positions than tokens, only ``n_tokens >= pos_max + 1``.

The design's points (``--option POINT=DESIGN``, the model's names, ``pcspec.model.design``): the
log is judged by what DESIGN (a built-in: baseline, pr30137, pr27451, fixed) runs at POINT, on the
design ``--design`` names (the upstream code of the log's build when none). The checker follows
three points whose code it replays from a log's numbers:

``entry_sizes``                   baseline: each entry counts every checkpoint it holds, a
    checkpoint shared by several entries in each (server-task.cpp:1691-1699 at 0c1e570); fixed:
    each checkpoint once (patches/fixed/0003), for the cache's total, its limit and both eviction
    loops (``candidate_size`` with it). An entry's own size (the listing and eviction lines) is
    the same under both.
``kept_checkpoint``               baseline: none; a restored checkpoint keeps its creator's
    ``id_task`` and can be swept by the task that restored it (#30683 proposes otherwise);
    fixed: the task that restored it keeps it, the too-close sweep and the cap's erasures leave
    it (patches/fixed/0013).
``checkpoint_pos_min``            baseline: a created checkpoint records the memory's ``pos_min``
    (server-context.cpp:2342 at 0c1e570); fixed: an SWA checkpoint records where its data
    starts, ``max(pos_min, pos_max - n_swa + 1)`` (patches/fixed/0005). No log line tells the two
    apart: never decided from the log.

The spellings of before, each one point's value, are still read (``ALIASES``):
``accounting=per-holder|unique``, ``restored-owner=creator|restorer`` and
``pos-min=memory|payload`` are ``entry_sizes``, ``kept_checkpoint`` and ``checkpoint_pos_min`` of
baseline or fixed; the report names the rules by them still (``Rules.accounting``, ...).

``auto`` decides from what the run shows of its build (``pcspec.logcheck.builds``): older message
formats give an older era; for the current formats, the build line or a message only some builds
print names the rule set (``pcspec.model.rulesets.RULE_SETS``: october, b11434, b11549,
november), and ``--rules NAME`` (``Options.rules``) names it whatever the log shows. The rules
then follow the rule set's seams; where more than one rule set remains, each rule is what any of
them allows. Resolution under ``auto``:

* ``current``: sweep when-full, supersede on (every rule set: server-context.cpp:2293-2310 and
  2320-2331 at 0c1e570, the same code in b11434, b11549 and e152332); invalidation pos-max
  (october, b11434, b11549: ``invalidate_n_prefix`` off), n-prefix (november) or either (rule
  sets of both kinds remain);
* ``pre-26271``: invalidation pos-max, supersede off, and the sweep is ``always`` when the log
  shows any too-close erasure (the era straddles #25472, so a build of it may have no sweep at
  all), ``none`` otherwise;
* older eras: no sweep, pos-max, no supersede, and the restore rules of before #24110/#24411 are
  accepted too (the threshold without the ``has_new_tokens`` term, the choice without the
  ``pos_max <= pos_next`` condition), since those eras straddle both PRs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from pcspec.core.errors import PcspecError
from pcspec.logcheck import events as ev
from pcspec.logcheck.scan import RunSummary
from pcspec.model.design import Design, defined_by, implementation, runs
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS, Baseline, Fixed
from pcspec.model.rulesets import RuleSet, get_rule_set

CHOICES: dict[str, tuple[str, ...]] = {
    "sweep": ("auto", "when-full", "always", "none"),
    "invalidation": ("auto", "n-prefix", "pos-max", "either"),
    "supersede": ("auto", "on", "off"),
    "positions": ("text", "mtmd"),
}
# The design points the checker replays from a log's numbers (``--option POINT=DESIGN``), each
# with the points that go with it: the new entry's size is counted as the entries' are.
POINTS: dict[str, tuple[str, ...]] = {
    "entry_sizes": ("entry_sizes", "candidate_size"),
    "kept_checkpoint": ("kept_checkpoint",),
    "checkpoint_pos_min": ("checkpoint_pos_min",),
}
# The spellings of before (``--option KEY=VALUE``): KEY -> (the point, VALUE -> the design).
ALIASES: dict[str, tuple[str, dict[str, str]]] = {
    "accounting": ("entry_sizes", {"per-holder": "baseline", "unique": "fixed"}),
    "restored-owner": ("kept_checkpoint", {"creator": "baseline", "restorer": "fixed"}),
    "pos-min": ("checkpoint_pos_min", {"memory": "baseline", "payload": "fixed"}),
}


@dataclass(frozen=True, slots=True)
class Options:
    """The design the log's server runs (None: the upstream code of its build), the rule set of
    its build (a name, or ``auto``: from the build line and messages), the built-in design whose
    code runs at a point (``points``: POINT -> DESIGN, over ``design``), and the facts of older
    builds (``auto`` = decide from the log)."""

    design: Design | None = None
    rules: str = "auto"
    points: tuple[tuple[str, str], ...] = ()
    sweep: str = "auto"
    invalidation: str = "auto"
    supersede: str = "auto"
    positions: str = "text"

    def judged_by(self) -> Design | None:
        """The design whose points judge the log: ``design`` with the code of each ``points``
        design at its points (a class made here, named ``DESIGN+POINT=OTHER``); None when the
        options name neither."""
        base = self.design
        if not self.points:
            return base
        body: dict[str, object] = {
            p: implementation(DESIGNS[d], p) for point, d in self.points for p in POINTS[point]
        }
        name = (base.name if base is not None else Baseline.name) + "".join(f"+{p}={d}" for p, d in self.points)
        cls = type(base) if base is not None else Baseline
        made = cast(type[Design], type(cls.__name__, (cls,), {**body, "name": name, "__module__": __name__}))
        return made(base.rules if base is not None else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """The configuration of one server run: the design and the rule set, and the rules the
    checker replays (the report's JSON: ``as_dict``)."""

    # The design that judges the log (``Options.judged_by``), None for the build's upstream code.
    # Where its code at a decision point is not the upstream code, the checker applies it
    # (``own``); the rules that hang on an effect point where a user's own code runs are not
    # judged (``skipped``: rule -> the point).
    design: Design | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    era: str
    era_evidence: str
    rule_set: RuleSet | None = None  # the build's rule set, None when more than one remains
    build_evidence: str = ""
    build_warning: str = ""  # one line for the user (a build newer than every known one, ...)
    sweep: str  # when-full | always | none
    invalidation: str  # n-prefix | pos-max | either
    invalidation_evidence: str = ""  # the line that settled an "either" rule
    supersede: bool
    positions: str  # text | mtmd
    # the log's verbosity threshold for this run (pcspec.logcheck.levels) and how it shows it
    verbosity: int = 2**31 - 1
    verbosity_evidence: str = ""

    def runs(self, point: str, cls: type[Design]) -> bool:
        """Whether the run's design runs ``cls``'s code at ``point`` (no design: the upstream
        code, ``Baseline``'s)."""
        return runs(self.design if self.design is not None else Baseline, point, cls)

    @property
    def build(self) -> str:
        """The rule set's name, ``unknown`` when more than one remains."""
        return self.rule_set.name if self.rule_set is not None else "unknown"

    @property
    def accounting(self) -> str:
        """``entry_sizes`` in the report's words: per-holder (baseline's) or unique (fixed's)."""
        return "unique" if self.runs("entry_sizes", Fixed) else "per-holder"

    @property
    def restored_owner(self) -> str:
        """``kept_checkpoint``: creator (baseline's: none kept) or restorer (fixed's)."""
        return "restorer" if self.runs("kept_checkpoint", Fixed) else "creator"

    @property
    def pos_min(self) -> str:
        """``checkpoint_pos_min``: memory (baseline's) or payload (fixed's)."""
        return "payload" if self.runs("checkpoint_pos_min", Fixed) else "memory"

    def invalidation_rules(self) -> tuple[str, ...]:
        """The invalidation rules a prompt start may follow."""
        return ("n-prefix", "pos-max") if self.invalidation == "either" else (self.invalidation,)

    @property
    def legacy_restore(self) -> bool:
        """Builds that may predate #24110 / #24411 (see the module docstring)."""
        return self.era in ("pre-25078", "pre-20287")

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "era": self.era, "era_evidence": self.era_evidence, "build": self.build,
            "build_evidence": self.build_evidence, "build_warning": self.build_warning, "sweep": self.sweep,
            "invalidation": self.invalidation, "invalidation_evidence": self.invalidation_evidence,
            "supersede": self.supersede, "positions": self.positions, "restored_owner": self.restored_owner,
            "pos_min": self.pos_min, "accounting": self.accounting, "verbosity": self.verbosity,
            "verbosity_evidence": self.verbosity_evidence,
        }
        if self.design is not None:
            out["design"] = self.design.name
            out["not_judged"] = {rule: point for rule, point in self.skipped}
        return out

    def own(self, point: str) -> Design | None:
        """The design, where its code at the decision point ``point`` is not the upstream code
        (``Baseline``'s, which the checker replays with the era's variations): the checker then
        applies the design's code to the log's numbers (``Fixed.restore_choice``, a user's own)."""
        d = self.design
        return d if d is not None and not runs(d, point, Baseline) else None


def _point(key: str, value: str) -> tuple[str, str]:
    if key in ALIASES:
        point, values = ALIASES[key]
        if value not in values:
            raise PcspecError(f"option {key} must be one of {', '.join(values)}, not {value!r}")
        return point, values[value]
    if value not in DESIGNS:
        raise PcspecError(f"option {key} names the design whose code runs there: one of {', '.join(DESIGNS)}, "
                          f"not {value!r}")
    return key, value


def parse_options(items: Sequence[str] | None) -> Options:
    """``["sweep=always", "entry_sizes=fixed", ...]`` -> Options; raises PcspecError on a bad key
    or value."""
    values: dict[str, str] = {}
    points: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        value = value.strip()
        if sep and (key in POINTS or key in ALIASES):
            point, design = _point(key, value)
            points[point] = design
            continue
        if not sep or key not in CHOICES:
            known = ", ".join(sorted([*CHOICES, *POINTS, *ALIASES]))
            raise PcspecError(
                f"unknown option {item!r} (expected KEY=VALUE with KEY in {known})"
            )
        if value not in CHOICES[key]:
            raise PcspecError(
                f"option {key} must be one of {', '.join(CHOICES[key])}, not {value!r}"
            )
        values[key] = value
    return Options(points=tuple(points.items()), **values)  # type: ignore[arg-type]  # (each key a str field: CHOICES)


# The log rules that hang on an effect point (a design's own code there is not something the
# checker can replay from a log's numbers): those rules are not judged for such a design.
EFFECT_RULES: dict[str, tuple[str, ...]] = {
    "resume": ("restore-threshold", "restore-choice", "restore-position", "restore-scan"),
    "restore_failed": ("restore-choice",),
    "entry_sizes": ("cache-make-room", "cache-evict", "cache-limit", "cache-summary", "cache-oversize"),
    "candidate_size": ("cache-make-room", "cache-oversize"),
    "kept_checkpoint": ("ckpt-sweep", "ckpt-cap-evict", "ckpt-count"),
    "checkpoint_pos_min": ("restore-scan", "restore-choice"),
    "prompt_save": ("cache-make-room", "cache-limit", "cache-summary", "cache-contain"),
    "load_entry": ("load-choice", "load-scan"),
    "seq_rm_refused": ("n-past",),
    "copy_checkpoints": ("cache-summary",),
    "release_evicted": ("cache-summary",),
    "on_contained": ("cache-make-room", "cache-evict", "cache-summary"),
}


def options_for(design: Design | None, base: Options | None = None) -> Options:
    """The log checker's configuration for a server that runs ``design`` (``base``'s options
    kept; its ``points`` then apply over ``design``)."""
    opts = base or Options()
    return opts if design is None else replace(opts, design=design)


def _skipped(design: Design | None) -> tuple[tuple[str, str], ...]:
    if design is None:
        return ()
    out: dict[str, str] = {}
    for point, rules in EFFECT_RULES.items():
        if not defined_by(design, point).__module__.startswith("pcspec."):
            for rule in rules:
                out.setdefault(rule, point)
    return tuple(sorted(out.items()))


def with_rules(options: Options, name: str | None) -> Options:
    """``options`` with ``--rules NAME`` (None: as they are); PcspecError for an unknown name."""
    if name is None:
        return options
    get_rule_set(name)  # one line naming the known rule sets
    return replace(options, rules=name)


def _invalidation(rule_sets: Sequence[str]) -> str:
    kinds = {"n-prefix" if get_rule_set(r).invalidate_n_prefix else "pos-max" for r in rule_sets}
    return kinds.pop() if len(kinds) == 1 else "either"


def _design_rules(options: Options) -> tuple[str, str]:
    """The rule set's name and the invalidation the design itself fixes (``auto`` where it does
    not): a rule set's model (``--design november``) is that rule set; a design that runs the
    November invalidation (``Fixed.invalidated``, or the upstream one under a rule set with
    ``invalidate_n_prefix``) erases by ``n_prefix`` whatever the log's build."""
    design = options.design
    if design is None or design.name in RULE_SET_MODELS:
        return (design.name if design is not None and options.rules == "auto" else options.rules,
                options.invalidation)
    n_prefix = runs(design, "invalidated", Fixed) or (runs(design, "invalidated", Design)
                                                      and design.rules.invalidate_n_prefix)
    return options.rules, "n-prefix" if n_prefix and options.invalidation == "auto" else options.invalidation


def resolve(options: Options, run: RunSummary) -> Rules:
    """Fix every ``auto`` option for one server run from what the run shows."""
    era, evidence = run.era.era, run.era.evidence
    current = era == "current"
    rules_name, invalidation_option = _design_rules(options)
    if rules_name != "auto":
        candidates: tuple[str, ...] = (rules_name,)
        build_evidence, warning = f"--rules {rules_name}", ""
    else:
        choice = run.build.choice()
        candidates, build_evidence, warning = choice.candidates, choice.evidence, choice.warning
    rule_set = get_rule_set(candidates[0]) if len(candidates) == 1 else None
    if options.sweep != "auto":
        sweep = options.sweep
    elif current:
        sweep = "when-full"
    elif era == "pre-26271":
        sweep = "always" if ev.CheckpointErasedTooClose in run.kinds else "none"
    else:
        sweep = "none"
    if invalidation_option != "auto":
        invalidation = invalidation_option
    elif not current and rules_name == "auto":
        invalidation = "pos-max"
    else:
        invalidation = _invalidation(candidates)
    supersede = options.supersede == "on" or (options.supersede == "auto" and current)
    design = options.judged_by()
    return Rules(
        design=design,
        skipped=_skipped(design),
        era=era,
        era_evidence=evidence,
        sweep=sweep,
        invalidation=invalidation,
        supersede=supersede,
        positions=options.positions,
        rule_set=rule_set,
        build_evidence=build_evidence,
        build_warning=warning if current or rules_name != "auto" else "",
        verbosity=run.verbosity()[0],
        verbosity_evidence=run.verbosity()[1],
    )
