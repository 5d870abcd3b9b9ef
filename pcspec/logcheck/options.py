"""Rules that changed between server builds, as options, and their resolution for one server run.

Option (``--option KEY=VALUE``)   values (default first)      what changed
``sweep``                         auto, when-full, always, none
    The too-close sweep of create_checkpoint (#25472, 2026-07-12) first ran on every creation;
    the October and November 2026 code (server-context.cpp:2297 at 0c1e570, and at e152332) runs it
    only while ``size() + 1 >= n_ctx_checkpoints``.
    Before #25472 there is no sweep.
``invalidation``                  auto, n-prefix, pos-max, either
    At prompt start the August and October 2026 code erases checkpoints with
    ``pos_max > pos_next``; the November 2026 code also erases those with ``n_tokens > n_prefix``.
    ``either`` accepts both, and once a prompt start of the run only one of them explains, holds
    the rest of the run to that one (one binary follows one rule).
``supersede``                     auto, on, off
    October and November 2026: create_checkpoint first erases a checkpoint with the same
    ``n_tokens`` (server-context.cpp:2320-2331 at 0c1e570).
``positions``                     text, mtmd
    ``text``: one position per token, so ``n_tokens == pos_max + 1`` for a created checkpoint;
    ``mtmd``: media chunks may take fewer positions than tokens, only ``n_tokens >= pos_max + 1``.
``restored-owner``                creator, restorer
    ``creator``: a restored checkpoint keeps its creator's ``id_task`` and can be swept by the
    task that restored it (the snapshot; #30683 proposes ``restorer``). ``restorer``: the task
    that restored it owns it: the too-close sweep and the cap's erasures leave it (pcspec's
    ``fixed`` build, patches/fixed/0013; the model's ``keep_restored``).
``pos-min``                       memory, payload
    ``memory``: a created checkpoint records the memory's ``pos_min`` (server-context.cpp:2342 at
    0c1e570); ``payload``: an SWA checkpoint records where its data starts, ``max(pos_min,
    pos_max - n_swa + 1)`` (pcspec's ``fixed`` build, patches/fixed/0005; the model's
    ``record_payload_pos_min``). Never ``auto``: no log line tells the two apart.
``accounting``                    per-holder, unique
    ``per-holder``: the cache's size is the sum of its entries' sizes, a checkpoint shared by
    several entries counted in each (server-task.cpp:1691-1699 at 0c1e570); ``unique``: each
    checkpoint once (pcspec's ``fixed`` build, patches/fixed/0003; the model's
    ``Accounting.UNIQUE``), for the cache's total, its limit and both eviction loops. An entry's
    own size (the listing and eviction lines) is the same under both.

``auto`` decides from what the run shows of its build (``pcspec.logcheck.builds``): older message
formats give an older era; for the current formats, the build line or a message only some builds
print names the rule set (``pcspec.model.variants.RULE_SETS``: october, b11434, b11549,
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
from dataclasses import asdict, dataclass, replace

from pcspec.core.errors import PcspecError
from pcspec.logcheck import events as ev
from pcspec.logcheck.scan import RunSummary
from pcspec.model.design import Design, defined_by, runs
from pcspec.model.designs import RULE_SET_MODELS, Fixed
from pcspec.model.rulesets import get_rule_set

CHOICES: dict[str, tuple[str, ...]] = {
    "sweep": ("auto", "when-full", "always", "none"),
    "invalidation": ("auto", "n-prefix", "pos-max", "either"),
    "supersede": ("auto", "on", "off"),
    "positions": ("text", "mtmd"),
    "restored-owner": ("creator", "restorer"),
    "pos-min": ("memory", "payload"),
    "accounting": ("per-holder", "unique"),
}


@dataclass(frozen=True, slots=True)
class Options:
    """Requested rule variants (``auto`` = decide from the log), and the design the log's server
    runs (``design``: its own decision points judge the log, ``options_for``)."""

    design: Design | None = None
    sweep: str = "auto"
    invalidation: str = "auto"
    rules: str = "auto"  # a rule set's name (--rules), or auto: from the build line and messages
    supersede: str = "auto"
    positions: str = "text"
    restored_owner: str = "creator"
    pos_min: str = "memory"
    accounting: str = "per-holder"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """The rule variants in force for one server run (in the order of the report's JSON)."""

    # A design of one's own: the checker applies its decision points (``decide``) and does not
    # judge the rules that hang on an effect point it overrides (``skipped``: rule -> the point).
    design: Design | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    era: str
    era_evidence: str
    build: str = "unknown"  # the rule set (RULE_SETS), or unknown when more than one remains
    build_evidence: str = ""
    build_warning: str = ""  # one line for the user (a build newer than every known one, ...)
    sweep: str  # when-full | always | none
    invalidation: str  # n-prefix | pos-max | either
    invalidation_evidence: str = ""  # the line that settled an "either" rule
    supersede: bool
    positions: str  # text | mtmd
    restored_owner: str  # creator | restorer
    pos_min: str = "memory"  # memory | payload
    accounting: str = "per-holder"  # per-holder | unique
    # the log's verbosity threshold for this run (pcspec.logcheck.levels) and how it shows it
    verbosity: int = 2**31 - 1
    verbosity_evidence: str = ""

    def invalidation_rules(self) -> tuple[str, ...]:
        """The invalidation rules a prompt start may follow."""
        return ("n-prefix", "pos-max") if self.invalidation == "either" else (self.invalidation,)

    @property
    def legacy_restore(self) -> bool:
        """Builds that may predate #24110 / #24411 (see the module docstring)."""
        return self.era in ("pre-25078", "pre-20287")

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {k: v for k, v in asdict(self).items() if k not in ("design", "skipped")}
        if self.design is not None:
            out["design"] = self.design.name
            out["not_judged"] = {rule: point for rule, point in self.skipped}
        return out

    def own(self, point: str) -> Design | None:
        """The design, where it runs its own code at ``point`` (not pcspec's): the checker then
        applies that code to the log's numbers."""
        d = self.design
        return d if d is not None and not defined_by(d, point).__module__.startswith("pcspec.") else None


def parse_options(items: Sequence[str] | None) -> Options:
    """``["sweep=always", ...]`` -> Options; raises PcspecError on a bad key or value."""
    values: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        value = value.strip()
        if not sep or key not in CHOICES:
            known = ", ".join(sorted(CHOICES))
            raise PcspecError(
                f"unknown option {item!r} (expected KEY=VALUE with KEY in {known})"
            )
        if value not in CHOICES[key]:
            raise PcspecError(
                f"option {key} must be one of {', '.join(CHOICES[key])}, not {value!r}"
            )
        values[key.replace("-", "_")] = value
    return replace(Options(), **values)  # type: ignore[arg-type]  # (every key is a str field: CHOICES)


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
    """The log checker's configuration for a server that runs ``design``: the rule set when it
    is a rule set's model, and the rules its points change where they are pcspec's own
    (``fixed``'s: patches 0003 unique accounting, 0005 an SWA checkpoint's data start, 0012 the
    November invalidation on any tree, 0013 the restored checkpoint kept); a point of the user's
    own is applied as code (``Rules.own``) or, for an effect, leaves its rules unjudged."""
    opts = base or Options()
    if design is None:
        return opts
    name = design.name
    n_prefix = runs(design, "invalidated", Fixed) or (runs(design, "invalidated", Design)
                                                       and design.rules.invalidate_n_prefix)
    return replace(
        opts,
        design=design,
        rules=name if name in RULE_SET_MODELS else opts.rules,
        pos_min="payload" if runs(design, "checkpoint_pos_min", Fixed) else opts.pos_min,
        accounting="unique" if runs(design, "entry_sizes", Fixed) else opts.accounting,
        invalidation="n-prefix" if name not in RULE_SET_MODELS and n_prefix else opts.invalidation,
        restored_owner="restorer" if runs(design, "kept_checkpoint", Fixed) else opts.restored_owner,
    )


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


def resolve(options: Options, run: RunSummary) -> Rules:
    """Fix every ``auto`` option for one server run from what the run shows."""
    era, evidence = run.era.era, run.era.evidence
    current = era == "current"
    if options.rules != "auto":
        candidates: tuple[str, ...] = (options.rules,)
        build_evidence, warning = f"--rules {options.rules}", ""
    else:
        choice = run.build.choice()
        candidates, build_evidence, warning = choice.candidates, choice.evidence, choice.warning
    rule_set = candidates[0] if len(candidates) == 1 else None
    if options.sweep != "auto":
        sweep = options.sweep
    elif current:
        sweep = "when-full"
    elif era == "pre-26271":
        sweep = "always" if ev.CheckpointErasedTooClose in run.kinds else "none"
    else:
        sweep = "none"
    if options.invalidation != "auto":
        invalidation = options.invalidation
    elif not current and options.rules == "auto":
        invalidation = "pos-max"
    else:
        invalidation = _invalidation(candidates)
    supersede = options.supersede == "on" or (options.supersede == "auto" and current)
    return Rules(
        design=options.design,
        skipped=_skipped(options.design),
        era=era,
        era_evidence=evidence,
        sweep=sweep,
        invalidation=invalidation,
        supersede=supersede,
        positions=options.positions,
        restored_owner=options.restored_owner,
        pos_min=options.pos_min,
        accounting=options.accounting,
        build=rule_set or "unknown",
        build_evidence=build_evidence,
        build_warning=warning if current or options.rules != "auto" else "",
        verbosity=run.verbosity()[0],
        verbosity_evidence=run.verbosity()[1],
    )
