"""What each deviation rule needs to see, and what a log at a given verbosity lets it judge.

A rule reads three sets of line kinds (``Need``): ``lines``, the lines it judges (it can only
fire on one of them); ``state``, the lines that build what it judges them against (a slot's
checkpoint list, the cache's entries, the configuration); ``extra``, lines that sharpen the
judgement but that it can do without, to the extent ``partial`` says. The level of each kind is
in ``pcspec.logcheck.levels`` (from the C++ call sites). At a verbosity where:

* none of ``lines`` is printed: the rule is **skipped** (nothing to judge);
* some of ``state`` is not printed: **skipped** (its state cannot be built, and a judgement
  against a guess would be a false deviation);
* some of ``extra`` is not printed: **weakened** to ``partial``;
* everything is printed: judged.

A skipped rule never deviates (``Context.deviate`` counts it as not judged); the report names
every skipped and weakened rule once, with the reason (``verdicts``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.logcheck import events as ev
from pcspec.logcheck.levels import LEVELS, NAMES, shown


@dataclass(frozen=True, slots=True)
class Need:
    lines: tuple[type[ev.Event], ...]
    state: tuple[type[ev.Event], ...] = ()
    extra: tuple[type[ev.Event], ...] = ()
    partial: str = ""  # how the rule is judged when some ``extra`` lines are hidden


# the lines that build a slot's checkpoint list (server-context.cpp: create_checkpoint,
# update_slots' prompt start) and the slot-file restore that replaces it (October: seen only in
# libllama's DEBUG state_read_meta line, llama-kv-cache.cpp:2452; b11549: the INFO "restored N
# context checkpoint(s)" line, server-context.cpp:2712)
_LIST = (ev.CheckpointCreated, ev.CheckpointErasedOld, ev.CheckpointErasedTooClose,
         ev.CheckpointSuperseded, ev.CheckpointInvalidated)
_RESTORE = (ev.StateRead,)
_LIST_PARTIAL = ("a slot-file restore of the October code shows only in the DEBUG state_read_meta "
                 "line: it is seen from its effect (the slot's next token count or f_keep, a prompt "
                 "start that finds no checkpoint)")
# the lines that build the cache's entries and limits (server_prompt_cache::alloc / update)
_CACHE = (ev.PromptSave, ev.CacheConfig, ev.CacheSummary, ev.CacheObsoleteRemoved)

NEEDS: dict[str, Need] = {
    "ckpt-cap": Need((ev.CheckpointCreated,), (*_LIST, ev.CheckpointConfig), _RESTORE, _LIST_PARTIAL),
    "ckpt-count": Need((ev.CheckpointCreated,), (*_LIST, ev.CheckpointConfig), _RESTORE, _LIST_PARTIAL),
    "ckpt-position": Need((ev.CheckpointCreated,), (), (ev.DoCheckpoint,),
                          "the memory range of main/do_checkpoint (DEBUG) is not shown: only "
                          "n_tokens = pos_max + 1 and the batch start are judged"),
    "ckpt-sweep": Need((ev.CheckpointErasedTooClose, ev.CheckpointCreated), (*_LIST, ev.CheckpointConfig),
                       _RESTORE, _LIST_PARTIAL),
    "ckpt-cap-evict": Need((ev.CheckpointErasedOld,), _LIST, _RESTORE, _LIST_PARTIAL),
    "ckpt-supersede": Need((ev.CheckpointSuperseded, ev.CheckpointCreated), _LIST, _RESTORE, _LIST_PARTIAL),
    "restore-scan": Need((ev.CheckpointChecked, ev.CheckpointRestored, ev.FullReprocess), _LIST,
                         _RESTORE, _LIST_PARTIAL),
    "restore-threshold": Need((ev.CheckpointChecked,), (ev.NewPrompt,)),
    "restore-choice": Need((ev.CheckpointRestored, ev.FullReprocess), (*_LIST, ev.CheckpointChecked),
                           _RESTORE, _LIST_PARTIAL),
    "restore-position": Need((ev.CheckpointRestored,), (ev.NewPrompt,)),
    "invalidate": Need((ev.CheckpointInvalidated, ev.NewPrompt), _LIST, _RESTORE, _LIST_PARTIAL),
    "n-past": Need((ev.CachedTokens,), (ev.NewPrompt, ev.CheckpointRestored)),
    "load-scan": Need((ev.LoadCandidate,), _CACHE),
    "load-choice": Need((ev.LoadCandidate, ev.LoadFound)),
    "cache-contain": Need((ev.CacheAlreadyCached,), _CACHE),
    "cache-oversize": Need((ev.CacheOversize, ev.PromptSave), _CACHE),
    "cache-obsolete": Need((ev.CacheObsoleteRemoved,), _CACHE),
    "cache-make-room": Need((ev.CacheMakeRoom,), _CACHE),
    "cache-evict": Need((ev.CacheLimitEvict, ev.CacheTokenEvict), _CACHE),
    "cache-limit": Need((ev.CacheLimitReduced, ev.CacheSummary, ev.PromptSave), _CACHE),
    "cache-summary": Need((ev.CacheSummary, ev.CacheSummaryEntry), _CACHE),
}


def _names(kinds: tuple[type[ev.Event], ...]) -> str:
    return ", ".join(f"{k.kind} ({NAMES[LEVELS[k]]})" for k in kinds)


@dataclass(frozen=True, slots=True)
class Verdict:
    rule: str
    status: str  # "skipped" | "weakened"
    why: str

    def line(self) -> str:
        return f"{self.rule}: {self.status}, {self.why}"


def verdict(rule: str, verbosity: int) -> Verdict | None:
    """What ``rule`` can judge at ``verbosity``: None when everything it reads is printed."""
    need = NEEDS[rule]
    if not any(shown(k, verbosity) for k in need.lines):
        return Verdict(rule, "skipped", f"its lines are not printed: {_names(need.lines)}")
    hidden = tuple(k for k in need.state if not shown(k, verbosity))
    if hidden:
        return Verdict(rule, "skipped", f"what it is judged against is built from lines not "
                       f"printed: {_names(hidden)}")
    hidden = tuple(k for k in need.extra if not shown(k, verbosity))
    if hidden:
        return Verdict(rule, "weakened", f"{need.partial} (not printed: {_names(hidden)})")
    return None


def verdicts(verbosity: int) -> dict[str, Verdict]:
    """The rules not fully judged at ``verbosity``, by rule id."""
    out: dict[str, Verdict] = {}
    for rule in NEEDS:
        v = verdict(rule, verbosity)
        if v is not None:
            out[rule] = v
    return out
