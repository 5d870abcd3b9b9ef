"""Known causes: a finding that matches one is explained (a server bug in docs/FINDINGS.md, or a
model change asked for in docs/LIVE.md); anything else is unexplained and fails the campaign.

Each explainer looks at the finding and at the log of the run that shows it (the shrunk one
when there is one) and returns the name of the cause, or None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pcspec.core.ops import Request
from pcspec.core.results import Finding
from pcspec.live.analyze import is_observation, segments
from pcspec.live.session import Outcome
from pcspec.logcheck import events as ev
from pcspec.logcheck import read_events
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import replay

Explainer = Callable[[Finding, Outcome], str | None]


def _events(log: bytes) -> list[ev.Event]:
    return read_events(log.decode("utf-8", "replace"))


def _op_log(f: Finding, out: Outcome) -> list[ev.Event]:
    """The events of the log lines of the finding's operation."""
    obs = [o for o in out.run.observations if o.index == f.op]
    if not obs:
        return []
    return _events(out.log[obs[0].log_start:obs[0].log_end])


def pinned_busy(f: Finding, out: Outcome) -> str | None:
    """FINDINGS F1: a task pinned to a busy slot runs the cache update on it before it is
    deferred (server-context.cpp:1534-1631, deferral at 2417). Explains a finding of the
    concurrent group where that happened (or a request without an answer then)."""
    obs = out.run.observations
    group = [obs[i] for i in next((g for g in segments(out.run) if f.op in g), [])]
    if not any(o.op.is_async for o in group):
        return None
    if _pinned_busy_update(_events(out.log[group[0].log_start:max(o.log_end for o in group)])):
        return "F1 (server): a pinned task runs the cache update on its busy slot before deferring"
    return None


def _pinned_busy_update(events: Sequence[ev.Event]) -> bool:
    """Three lines in a row: "selected slot by id (N)", then that slot skipped as busy (the scan
    looks at the pinned slot only, so its id is the one printed), then the cache update (on
    it)."""
    for pick, skip, update in zip(events, events[1:], events[2:], strict=False):
        if isinstance(pick, ev.SlotSelected) and pick.how == "id" \
                and isinstance(skip, ev.SlotSkipped) and not skip.empty and skip.slot == pick.slot \
                and isinstance(update, ev.CacheUpdateStart) and update.line == skip.line + 1 == pick.line + 2:
            return True
    return False


def swa_off_by_one(f: Finding, out: Outcome) -> str | None:
    """FINDINGS F2: a restored SWA checkpoint one cell short when the prompt ends one before it."""
    if out.target.kind != "swa" or f.rule != "transparency":
        return None
    kinds = {type(e) for e in _op_log(f, out)}
    if ev.CheckpointRestored in kinds and ev.NeedEvaluate in kinds:
        return "F2 (server): SWA window one cell short after a restore (server-context.cpp:3278, 3355, 3384)"
    return None


def _load_then_idle_clear(events: Sequence[ev.Event]) -> bool:
    """A prompt loaded from the cache into one slot, then the idle other slot saved, then a
    prompt cleared, each on a later line than the one before."""
    wanted: list[type[ev.Event]] = [ev.LoadFound, ev.IdleSlotSave, ev.PromptCleared]
    for e in events:
        if isinstance(e, wanted[0]):
            wanted.pop(0)
            if not wanted:
                return True
    return False


def hybrid_unified_resume(f: Finding, out: Outcome) -> str | None:
    """FINDINGS F5: on the hybrid model with one KV stream for all slots (``--kv-unified``), a
    prompt resumed from a cache entry loaded into one slot while the other slot's prompt was
    saved and cleared in the same request answers 0.039 away from the uncached answer (ten times
    the float noise of another batch split), on 0c1e570, b11434 and b11549 alike."""
    if out.target.kind != "hybrid" or f.rule != "transparency" or not out.target.flags.kv_unified:
        return None
    if _load_then_idle_clear(_op_log(f, out)):
        return "F5 (server, cause not located): hybrid, unified KV: a cache-loaded prompt resumed after the " \
               "other slot was cleared answers differently"
    return None


def observation(f: Finding, out: Outcome) -> str | None:
    if f.rule == "waste:restore-extend":
        return ("F3 (behaviour): the restored slot holds no checkpoint (its file carried none); "
                "the extension re-processes all")
    if f.rule == "waste:unused-checkpoint":
        return "F4 (behaviour): full re-processing although a checkpoint is a prefix of the prompt"
    return None


def silent_restore(f: Finding, out: Outcome) -> str | None:
    """L1 (log checker): a successful slot-file restore can leave no line in the log (an empty
    file, a recurrent memory: state_read_meta prints only for a non-empty attention cache). The
    checker now learns it from the slot's next count ("- skipping, slot is empty", a base
    f_keep, a save's length, an LCP pick's f_keep); this explains what is left: a finding after
    a restore that printed nothing when no such line came before the slot's next prompt (an
    LRU pick with the prompt cache off)."""
    if not f.rule.startswith("logcheck:"):
        return None
    for o in out.run.observations:
        if o.index >= f.op:
            break
        if o.op.op == "slot_restore" and o.reply is not None and o.reply.ok \
                and not any(isinstance(e, ev.StateRead) for e in _events(out.log[o.log_start:o.log_end])):
            return "L1 (log checker): a slot restore it cannot see in the log (no state_read_meta line)"
    return None


def model_predicts(f: Finding, out: Outcome) -> str | None:
    """A wrong answer the model of the build predicts: the model, run on the same operations
    under the build's rules, violates STATE-1 (the memory holds another state than the tokens
    bookkept) at the request whose answer differs. Then the binary's answer is the bug the model
    knows (F11 is one: a checkpoint of the first unshared position restored under another token),
    not a divergence from it."""
    p = out.analysis.predictor
    if f.rule != "transparency" or p is None:
        return None
    # the model ops of the request (a request op, then its steps up to the next request)
    nth = sum(1 for o in out.run.observations if o.op.op == "request" and o.index <= f.op)
    starts = [i for i, op in enumerate(p.model_ops) if isinstance(op, Request)]
    if not 0 < nth <= len(starts):
        return None
    lo, hi = starts[nth - 1], starts[nth] if nth < len(starts) else len(p.model_ops)
    for v in replay(p.trace(hi), [get_property("STATE-1")]).violations:
        if lo <= v.at < hi:
            return f"predicted by the model of the build ({p.srv.design.name}): STATE-1: {v.message}"
    return None


EXPLAINERS: tuple[Explainer, ...] = (
    observation, pinned_busy, swa_off_by_one, hybrid_unified_resume, silent_restore, model_predicts,
)


def _direct(f: Finding, out: Outcome) -> str | None:
    for ex in EXPLAINERS:
        why = ex(f, out)
        if why is not None:
            return why
    return None


def _judged(f: Finding) -> bool:
    return not is_observation(f) and not f.rule.startswith("logcheck:")


def explain(f: Finding, out: Outcome) -> str | None:
    """The cause of ``f``: a known one, or an explained divergence earlier in the same run
    (from there on the server's and the model's states differ, so later differences follow)."""
    why = _direct(f, out)
    if why is not None or not _judged(f):
        return why
    for g in out.analysis.findings:
        if g is not f and g.op <= f.op and _judged(g):
            cause = _direct(g, out)
            if cause is not None:
                return f"after {g.rule} at operation {g.op} ({cause.split(':')[0]}): the states differ from there"
    return None
