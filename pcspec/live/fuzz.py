"""Fuzzed live workloads: seeded, online (guided by what the server's log showed so far).

Literal prompt tokens are bytes 128..255; requests ban those ids (and 256..271) from generation
(``logit_bias``), so a generated token (an ASCII byte) never equals a literal one and a common
prefix means the same on the server and in the model (whose generated tokens are >= 1000).

Prompt shapes: new, exact resend, chat-like extension (previous prompt + its reply + a new
message), a prefix cut (at random, or at a checkpoint the log showed, +-1), a divergence (a
prefix then new text). Some requests are pinned (``id_slot``), some skip the cache, some run
concurrently (a burst, or a long request followed by one pinned to its busy slot); slot files
are saved, restored, erased and corrupted.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pcspec.live.ops import LiveOp, Segment

LIT_MIN, LIT_MAX = 128, 255  # literal ids; generation is banned from them


@dataclass
class Feedback:
    """What the run has shown: checkpoint n_tokens per request (from the log)."""

    checkpoints: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class Shape:
    """Per-request lengths the generator tracks (exact: replies have n_predict tokens)."""

    n_prompt: int
    n_predict: int

    @property
    def n_full(self) -> int:
        return self.n_prompt + self.n_predict


class Fuzzer:
    def __init__(self, seed: int, n_slots: int, n_ctx_slot: int, *, files: bool = True,
                 concurrency: bool = True, max_prompt: int = 700) -> None:
        self.rng = random.Random(seed)
        self.n_slots = n_slots
        self.limit = min(n_ctx_slot - 40, max_prompt)
        self.files = files
        self.concurrency = concurrency
        self.shapes: dict[int, Shape] = {}
        self.next_id = 0
        self.saved: list[str] = []
        self.running: set[int] = set()  # requests of the concurrent group being built

    # -- prompts ---------------------------------------------------------------------------

    def _lit(self, lo: int, hi: int) -> Segment:
        n = self.rng.randint(lo, hi)
        return ("lit", tuple(self.rng.randint(LIT_MIN, LIT_MAX) for _ in range(n)))

    def _pick(self) -> int | None:
        # a request of the running group has no reply yet: never a source
        ids = sorted(i for i in self.shapes if i not in self.running)
        if not ids:
            return None
        # recent requests more often
        return ids[-1 - min(len(ids) - 1, int(self.rng.expovariate(0.5)))]

    def _cut_near(self, rid: int, fb: Feedback, n_full: int) -> int:
        cks = [c for c in fb.checkpoints.get(rid, []) if 2 < c < n_full]
        if cks and self.rng.random() < 0.7:
            return min(n_full, max(1, self.rng.choice(cks) + self.rng.choice((-1, -1, 0, 1))))
        return self.rng.randint(1, max(1, n_full - 1))

    def _prompt(self, fb: Feedback) -> tuple[tuple[Segment, ...], int | None, int]:
        """(segments, cut, length)."""
        src = self._pick()
        roll = self.rng.random()
        if src is None or roll < 0.2:
            seg = self._lit(20, 300)
            return (seg,), None, len(seg[1])
        sh = self.shapes[src]
        full: tuple[Segment, ...] = (("prompt", src), ("reply", src))
        if roll < 0.5:  # chat-like extension
            seg = self._lit(5, 120)
            return (*full, seg), None, sh.n_full + len(seg[1])
        if roll < 0.6:  # exact resend
            return (("prompt", src),), None, sh.n_prompt
        if roll < 0.85:  # prefix cut
            cut = self._cut_near(src, fb, sh.n_full)
            return full, cut, cut
        cut = self._cut_near(src, fb, sh.n_full)  # divergence after a prefix
        seg = self._lit(1, 80)
        return (("head", (src, cut)), seg), None, cut + len(seg[1])

    def _request(self, fb: Feedback, *, n_predict: int | None = None, id_slot: int | None = None,
                 is_async: bool = False, delay_ms: int = 0) -> LiveOp | None:
        segs, cut, n = self._prompt(fb)
        if n_predict is None:
            n_predict = self.rng.choice((1, 2, 3, 4, 8))
        if n < 1 or n + n_predict > self.limit:
            return None
        rid = self.next_id
        self.next_id += 1
        self.shapes[rid] = Shape(n, n_predict)
        if is_async:
            self.running.add(rid)
        if id_slot is None:
            id_slot = self.rng.randrange(self.n_slots) if self.rng.random() < 0.25 else -1
        cache_prompt = self.rng.random() > 0.05
        return LiveOp("request", id=rid, segments=segs, cut=cut, n_predict=n_predict, id_slot=id_slot,
                      cache_prompt=cache_prompt, is_async=is_async, delay_ms=delay_ms)

    # -- the next operations -------------------------------------------------------------------

    def next_ops(self, fb: Feedback) -> list[LiveOp]:
        """One step of the workload: one operation, or a concurrent group ending in ``wait``."""
        roll = self.rng.random()
        if self.files and roll < 0.08:
            return self._file_op()
        if self.concurrency and roll < 0.18 and self.shapes:
            return self._concurrent(fb)
        for _ in range(10):
            op = self._request(fb)
            if op is not None:
                return [op]
        return []

    def _file_op(self) -> list[LiveOp]:
        slot = self.rng.randrange(self.n_slots)
        roll = self.rng.random()
        if not self.saved or roll < 0.4:
            name = f"f{len(self.saved)}.bin"
            self.saved.append(name)
            return [LiveOp("slot_save", id_slot=slot, filename=name)]
        name = self.rng.choice(self.saved)
        if roll < 0.75:
            return [LiveOp("slot_restore", id_slot=slot, filename=name)]
        if roll < 0.85:
            return [LiveOp("slot_erase", id_slot=slot)]
        # a corrupted file, then a restore of it
        if self.rng.random() < 0.5:
            bad = LiveOp("corrupt_file", filename=name, truncate=self.rng.randint(0, 64))
        else:
            bad = LiveOp("corrupt_file", filename=name, offset=self.rng.randint(0, 16),
                         data=tuple(self.rng.randint(0, 255) for _ in range(4)))
        self.saved.remove(name)
        return [bad, LiveOp("slot_restore", id_slot=slot, filename=name)]

    def _concurrent(self, fb: Feedback) -> list[LiveOp]:
        try:
            return self._group(fb)
        finally:
            self.running.clear()

    def _group(self, fb: Feedback) -> list[LiveOp]:
        ops: list[LiveOp] = []
        if self.rng.random() < 0.5:
            # a long request, then one pinned to its (busy) slot
            slot = self.rng.randrange(self.n_slots)
            first = self._request(fb, id_slot=slot, is_async=True, n_predict=self.rng.choice((8, 16, 32)))
            second = self._request(fb, id_slot=slot, is_async=True, delay_ms=self.rng.choice((5, 20, 60, 150)))
            ops = [o for o in (first, second) if o is not None]
        else:
            for i in range(self.rng.randint(2, 1 + self.n_slots)):
                op = self._request(fb, is_async=True, delay_ms=0 if i == 0 else self.rng.choice((5, 30)))
                if op is not None:
                    ops.append(op)
        return [*ops, LiveOp("wait")] if ops else []
