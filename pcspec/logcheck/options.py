"""Rules that changed between server builds, as options, and the build era a log shows.

Option (``--option KEY=VALUE``)   values (default first)      what changed
``sweep``                         auto, when-full, always, none
    The too-close sweep of create_checkpoint (#25472, 2026-07-12) first ran on every creation;
    the November 2026 code (seed 001) runs it only while ``size() + 1 >= n_ctx_checkpoints``.
    Before #25472 there is no sweep.
``invalidation``                  auto, n-prefix, pos-max
    At prompt start the August 2026 snapshot erases checkpoints with ``pos_max > pos_next``;
    the November 2026 code also erases those with ``n_tokens > n_prefix``.
``supersede``                     auto, on, off
    November 2026: create_checkpoint first erases a checkpoint with the same ``n_tokens``.
``positions``                     text, mtmd
    ``text``: one position per token, so ``n_tokens == pos_max + 1`` for a created checkpoint;
    ``mtmd``: media chunks may take fewer positions than tokens, only ``n_tokens >= pos_max + 1``.
``restored-owner``                creator, restorer
    ``creator``: a restored checkpoint keeps its creator's ``id_task`` and can be swept by the
    task that restored it (the snapshot; #30683 proposes ``restorer``).

``auto`` means the November 2026 behaviour unless the log's own message formats show an older
build (llama-server-behavior.md 5.2-5.5). Markers, oldest first:

* ``pre-20287`` (before 2026-03): "created context checkpoint" without ``n_tokens``;
* ``pre-25078`` (before 2026-06-28): ``Checking checkpoint``, or the restore / forcing /
  invalidation / creation lines at WARN level;
* ``pre-26271`` (before 2026-07-29): ``sim =`` instead of ``f_sim =`` in load lines;
* otherwise ``current``.

Resolution under ``auto``: ``current`` -> sweep when-full, invalidation n-prefix, supersede on.
``pre-26271`` -> invalidation pos-max, supersede off, and the sweep is ``always`` when the log
shows any too-close erasure (the era straddles #25472, so a build of it may have no sweep at
all), ``none`` otherwise. Older eras -> no sweep, pos-max, no supersede, and the restore rules
of before #24110/#24411 are accepted too (the threshold without the ``has_new_tokens`` term, the
choice without the ``pos_max <= pos_next`` condition), since those eras straddle both PRs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pcspec.errors import PcspecError
from pcspec.logcheck import events as ev

CHOICES: dict[str, tuple[str, ...]] = {
    "sweep": ("auto", "when-full", "always", "none"),
    "invalidation": ("auto", "n-prefix", "pos-max"),
    "supersede": ("auto", "on", "off"),
    "positions": ("text", "mtmd"),
    "restored-owner": ("creator", "restorer"),
}

ERAS = ("current", "pre-26271", "pre-25078", "pre-20287")  # newest first


@dataclass(frozen=True, slots=True)
class Options:
    """Requested rule variants (``auto`` = decide from the log)."""

    sweep: str = "auto"
    invalidation: str = "auto"
    supersede: str = "auto"
    positions: str = "text"
    restored_owner: str = "creator"


@dataclass(frozen=True, slots=True)
class Rules:
    """The rule variants in force for one server run."""

    era: str
    era_evidence: str
    sweep: str  # when-full | always | none
    invalidation: str  # n-prefix | pos-max
    supersede: bool
    positions: str  # text | mtmd
    restored_owner: str  # creator | restorer

    @property
    def legacy_restore(self) -> bool:
        """Builds that may predate #24110 / #24411 (see the module docstring)."""
        return self.era in ("pre-25078", "pre-20287")

    def as_dict(self) -> dict[str, str | bool]:
        return {
            "era": self.era,
            "era_evidence": self.era_evidence,
            "sweep": self.sweep,
            "invalidation": self.invalidation,
            "supersede": self.supersede,
            "positions": self.positions,
            "restored_owner": self.restored_owner,
        }


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
    return Options(**values)


def detect_era(events: Iterable[ev.Event]) -> tuple[str, str]:
    """The oldest build era whose markers appear, and the line that shows it."""
    rank = {era: i for i, era in enumerate(ERAS)}
    best, evidence = "current", "no older message format seen"
    for e in events:
        era: str | None = None
        why = ""
        if isinstance(e, ev.CheckpointCreated):
            if e.n_tokens is None:
                era, why = "pre-20287", "'created context checkpoint' without n_tokens"
            elif e.level == "W":
                era, why = "pre-25078", "'created context checkpoint' at WARN level"
        elif isinstance(e, ev.CheckpointChecked) and e.legacy:
            era, why = "pre-25078", "'Checking checkpoint' spelling"
        elif isinstance(e, ev.CheckpointRestored | ev.FullReprocess | ev.CheckpointInvalidated):
            if e.level == "W":
                era, why = "pre-25078", f"'{e.kind}' line at WARN level"
        elif isinstance(e, ev.LoadLookup) and e.legacy:
            era, why = "pre-26271", "'sim =' instead of 'f_sim =' in load lines"
        if era is not None and rank[era] > rank[best]:
            best, evidence = era, f"line {e.line}: {why}"
    return best, evidence


def resolve(options: Options, events: Sequence[ev.Event]) -> Rules:
    """Fix every ``auto`` option for one server run from the markers in its events."""
    era, evidence = detect_era(events)
    current = era == "current"
    if options.sweep != "auto":
        sweep = options.sweep
    elif current:
        sweep = "when-full"
    elif era == "pre-26271":
        any_sweep = any(isinstance(e, ev.CheckpointErasedTooClose) for e in events)
        sweep = "always" if any_sweep else "none"
    else:
        sweep = "none"
    invalidation = options.invalidation if options.invalidation != "auto" else "n-prefix" if current else "pos-max"
    supersede = options.supersede == "on" or (options.supersede == "auto" and current)
    return Rules(
        era=era,
        era_evidence=evidence,
        sweep=sweep,
        invalidation=invalidation,
        supersede=supersede,
        positions=options.positions,
        restored_owner=options.restored_owner,
    )
