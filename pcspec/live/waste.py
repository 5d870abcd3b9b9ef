"""Observations of work the server threw away (behaviour, not wrong output).

From the replies and the log records alone (no model), the tokens and checkpoints each slot
holds are followed through the synchronous operations; a request that re-processes its whole
prompt (``forcing full prompt re-processing``) is an observation when

* ``waste:restore-extend``: the slot's tokens came from a slot-file restore that brought no
  checkpoint back, and share a prefix with the prompt (F3 in docs/FINDINGS.md: a file without
  the checkpoint appendix, as 0c1e570 and b11434 write, drops the checkpoints). From b11549 on
  the file carries them (``save_slot_checkpoints``, server-context.cpp:2623-2655 of b11549) and
  the restore puts back the newest ``--ctx-checkpoints`` of them (2658-2713): the slot then holds
  those, and a full re-processing is waste only as below;
* ``waste:unused-checkpoint``: the slot held a checkpoint of at most the common prefix's length
  (F4 in docs/FINDINGS.md: a recurrent prompt ending exactly on a checkpoint).

What cannot be followed (a concurrent group, a cache load into the slot) makes the slot unknown
until a request or a clear makes it known again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pcspec.live.driver import Observation
from pcspec.live.slotfiles import FileView
from pcspec.logcheck import read_events
from pcspec.logcheck.events import SlotFileCheckpoints
from pcspec.model.cache import lcp
from pcspec.model.logged import CacheLoaded, CkptCreated, CkptErased, FullReprocess, Logged, PromptCleared


@dataclass
class SlotView:
    tokens: tuple[int, ...] | None = ()
    ckpts: list[int] | None = field(default_factory=list)
    restored: bool = False


def _served_slot(obs: Observation) -> int | None:
    if obs.reply is None or not obs.reply.ok:
        return None
    v = obs.reply.data.get("id_slot")
    return int(v) if isinstance(v, int) else None


def _restored_checkpoints(log: bytes) -> list[int]:
    """How many checkpoints each restore in ``log`` put back: load_slot_checkpoints' last line
    (server-context.cpp:2711 of b11549), or 0 for an appendix it ignored (which leaves the
    restored slot with none, as no line does)."""
    return [e.count for e in read_events(log.decode("utf-8", errors="replace"))
            if isinstance(e, SlotFileCheckpoints)]


class WasteWatch:
    def __init__(self, n_slots: int) -> None:
        self.slots = [SlotView() for _ in range(n_slots)]
        # per file: the tokens saved, and the appendix's n_tokens (None: no appendix)
        self.files: dict[str, tuple[tuple[int, ...] | None, tuple[int, ...] | None]] = {}

    def _forget_all(self) -> None:
        for s in self.slots:
            s.tokens, s.ckpts, s.restored = None, None, False

    def observe(self, obs_list: list[Observation], recs: list[Logged], log: bytes = b"") -> list[tuple[int, str, str]]:
        """(op index, class, detail) of the observations in one segment; updates the views.
        ``log``: the server's whole log (a restore's lines say how many checkpoints it put back)."""
        if len(obs_list) > 1:
            self._forget_all()
            return []
        obs = obs_list[0]
        op = obs.op
        out: list[tuple[int, str, str]] = []
        if op.op == "request":
            s = _served_slot(obs)
            if s is None or s >= len(self.slots):
                self._forget_all()
                return []
            view = self.slots[s]
            loaded = any(isinstance(x, CacheLoaded) for x in recs)
            full = any(isinstance(x, FullReprocess) for x in recs)
            if full and not loaded and view.tokens is not None:
                n = lcp(view.tokens, tuple(obs.tokens))
                if view.restored and not view.ckpts and n > 0:
                    out.append((obs.index, "waste:restore-extend",
                                f"request {op.id} re-processed all {len(obs.tokens)} tokens although slot {s} held "
                                f"{n} of them, restored from a slot file"))
                elif view.ckpts and any(c <= n for c in view.ckpts):
                    best = max(c for c in view.ckpts if c <= n)
                    out.append((obs.index, "waste:unused-checkpoint",
                                f"request {op.id} ({len(obs.tokens)} tokens) re-processed all although slot {s} "
                                f"held a checkpoint at n_tokens = {best} <= the common prefix {n}"))
            gen = [int(t) for t in obs.reply.data.get("tokens", [])] if obs.reply else []
            view.tokens = tuple(obs.tokens) + tuple(gen[:-1]) if gen else tuple(obs.tokens)
            view.restored = False
            if loaded:
                view.ckpts = None
            if view.ckpts is None and not loaded and full:
                view.ckpts = []
            self._apply_ckpts(recs)
        elif op.op == "slot_save":
            if obs.reply is not None and obs.reply.ok and op.id_slot < len(self.slots):
                records = obs.file.checkpoints if isinstance(obs.file, FileView) else None
                self.files[op.filename] = (self.slots[op.id_slot].tokens,
                                           None if records is None else tuple(c[0] for c in records))
        elif op.op == "slot_restore" and op.id_slot < len(self.slots):
            view = self.slots[op.id_slot]
            if obs.reply is not None and obs.reply.ok and op.filename in self.files:
                tokens, saved = self.files[op.filename]
                view.tokens, view.ckpts, view.restored = tokens, [], True
                restored = _restored_checkpoints(log[obs.log_start:obs.log_end])
                if saved is not None and restored:  # the newest N of the file's (pop_front)
                    n_back = restored[-1]
                    view.ckpts = list(saved[len(saved) - n_back:]) if n_back else []
            else:
                view.tokens, view.ckpts, view.restored = (), [], False
        elif op.op == "slot_erase" and op.id_slot < len(self.slots):
            self.slots[op.id_slot] = SlotView()
        elif op.op == "corrupt_file":
            self.files.pop(op.filename, None)
        # idle-slot caching (cleared with a unified KV) empties the other slots
        served = _served_slot(obs) if op.op == "request" else op.id_slot
        for x in recs:
            if isinstance(x, PromptCleared) and x.slot is not None and x.slot != served and x.slot < len(self.slots):
                self.slots[x.slot] = SlotView()
        return out

    def _apply_ckpts(self, recs: list[Logged]) -> None:
        for x in recs:
            if not isinstance(x, CkptCreated | CkptErased) or x.slot is None or x.n_tokens is None:
                continue
            if x.slot >= len(self.slots):
                continue
            ck = self.slots[x.slot].ckpts
            if ck is None:
                continue
            if isinstance(x, CkptCreated):
                ck.append(x.n_tokens)
            elif x.n_tokens in ck:
                ck.remove(x.n_tokens)
