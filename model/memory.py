"""Sequence memory of a context, by memory kind, with content identity.

The state of a sequence is a pure function of the tokens it processed (a deterministic model
at temperature 0), so memory is represented by *which token prefix* its cells derive from:

* ``attn``: the tokens whose attention cells are present, positions ``[0, len(attn))``
  (plain KV, the full-attention half of iSWA, the attention half of hybrid);
* ``part``: the tokens the non-rollbackable part derives from: the sliding-window cells
  ``[part_lo, len(part))`` of iSWA, or the recurrent state after ``len(part)`` tokens. Which
  positions the SWA cache keeps is decided by where its cells lie (``swa_ring``): the context
  (``context.Context``) sets ``part_lo`` from there after every operation;
* ``garbage``: the memory holds bytes that are no token state (loaded from an uninitialized
  buffer, or computed over a missing window).

"Memory agrees with bookkeeping" is then a comparison of tuples. Every operation
mirrors a llama.cpp memory call and cites it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pcspec.model.config import STATE_HEADER, MemoryKind

Tokens = tuple[int, ...]

FULL = 0  # LLAMA_STATE_SEQ_FLAGS_NONE
PARTIAL_ONLY = 1  # LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY (alias SWA_ONLY)


@dataclass(frozen=True)
class StateImage:
    """What a state blob holds: the identity a ``state_seq_get_data`` wrote.

    ``attn`` is None for a partial image (the attention part is not in it) or a memory kind
    without attention; ``part`` is None for kinds without a non-rollbackable part.
    ``swa_order`` is the order the SWA cells were written in (their cell order,
    llama-kv-cache.cpp:2082-2110), which decides where a read puts them (``swa_ring``); empty:
    ascending. It is layout, not content: two images of one state are equal.
    """

    kind: MemoryKind
    scope: int
    attn: Tokens | None
    part: Tokens | None
    part_lo: int
    swa_order: tuple[int, ...] = field(default=(), compare=False)

    def describes(self) -> Tokens:
        """The token prefix this image is the state of."""
        if self.part is not None:
            return self.part
        return self.attn or ()


@dataclass
class SeqMemory:
    """One sequence's memory in one context (llama_memory_i for one ``seq_id``)."""

    kind: MemoryKind
    n_swa: int
    n_rs: int
    cell_bytes: int
    rs_bytes: int
    # the constant bytes a real image has beyond the model's count (Config.state_overhead,
    # Config.ckpt_overhead; a draft context's are 0)
    state_overhead: int = 0
    ckpt_overhead: int = 0
    attn: Tokens = ()
    part: Tokens = ()
    part_lo: int = 0
    garbage: bool = False
    # The other sequences whose recurrent state is this one's tail cell (a ``seq_cp`` adds the
    # destination to the source's cell, src/llama-memory-recurrent.cpp:265-300 of b11549; the
    # context keeps the relation symmetric, ``Context.seq_cp``): empty unless a shared-prefix copy
    # made it, and for the kinds without a recurrent part
    tail_with: frozenset[int] = frozenset()

    # What the kind has, fixed at construction (read on every decode and every judgement):
    has_attn: bool = field(init=False, repr=False, compare=False)  # attention cells
    has_part: bool = field(init=False, repr=False, compare=False)  # a non-rollbackable part

    def __post_init__(self) -> None:
        self.has_attn = self.kind in (MemoryKind.KV, MemoryKind.SWA, MemoryKind.HYBRID)
        self.has_part = self.kind in (MemoryKind.SWA, MemoryKind.RECURRENT, MemoryKind.HYBRID)

    @property
    def n_tokens(self) -> int:
        return len(self.attn) if self.has_attn else len(self.part)

    # -- positions (llama_memory_seq_pos_min / _max) --------------------------------------

    def pos_range(self) -> tuple[int, int]:
        """``(pos_min, pos_max)``; ``(-1, -1)`` for an empty sequence.

        * iSWA reports the SWA cache alone (llama-kv-cache-iswa.cpp:142-149): an empty
          window is ``(-1, -1)`` even while the base cache holds cells;
        * hybrid takes the larger ``pos_min`` and the smaller ``pos_max`` of its two parts
          (llama-memory-hybrid.cpp:172-180)."""
        if self.kind == MemoryKind.KV:
            n = len(self.attn)
            return (0, n - 1) if n else (-1, -1)
        if self.kind == MemoryKind.RECURRENT:
            n = len(self.part)
            return (n - 1, n - 1) if n else (-1, -1)
        n_part = len(self.part)
        if self.kind == MemoryKind.SWA:
            return (self.part_lo, n_part - 1) if n_part > self.part_lo else (-1, -1)
        n_attn = len(self.attn)
        attn = (0, n_attn - 1) if n_attn else (-1, -1)
        recr = (n_part - 1, n_part - 1) if n_part else (-1, -1)
        return (max(attn[0], recr[0]), min(attn[1], recr[1]))

    def payload_pos_min(self) -> int:
        """The first position a PARTIAL_ONLY state write of this memory holds: for iSWA the
        last ``n_swa`` cells only, so ``pos_max - window + 1`` (the recorded ``pos_min`` of the
        C++ is the SWA cache's, which can be older: server-context.cpp:2337-2341,
        [TAG_CHECKPOINTS_FIX_POS_MIN]); for the other kinds what ``pos_range`` says."""
        pos_min, pos_max = self.pos_range()
        if self.kind != MemoryKind.SWA or pos_min < 0:
            return pos_min
        return max(pos_min, pos_max - self.window_cells() + 1)

    def window_cells(self) -> int:
        """SWA cells a state write stores: only the last ``n_swa`` (the real logs show a
        restored checkpoint bringing back exactly ``n_swa`` cells)."""
        return min(self.n_swa, max(0, len(self.part) - self.part_lo))

    # -- consistency ---------------------------------------------------------------------

    def can_continue(self) -> bool:
        """Whether decoding the next token computes a correct state."""
        if self.garbage:
            return False
        if self.kind == MemoryKind.SWA:
            n = len(self.attn)
            return self.part == self.attn and self.part_lo <= max(0, n - self.n_swa + 1)
        if self.kind == MemoryKind.HYBRID:
            return self.part == self.attn
        return True

    def is_state_of(self, tokens: Tokens) -> bool:
        """The memory is exactly the state of ``tokens`` (an empty one: no cell at all)."""
        if not tokens:
            return self.n_tokens == 0 and not self.part and not self.attn
        if self.garbage:
            return False
        if self.has_attn and self.attn != tokens:
            return False
        if self.has_part and self.part != tokens:
            return False
        if self.kind == MemoryKind.SWA:
            return self.part_lo <= max(0, len(tokens) - self.n_swa + 1)
        return True

    # -- operations ----------------------------------------------------------------------

    def decode(self, new: Tokens) -> None:
        """``llama_decode`` of ``new`` appended at the end of the sequence. (Which SWA cells the
        decode overwrites, and so ``part_lo``, is the context's: ``Context.decode``.)"""
        if not new:
            return
        ok = self.n_tokens == 0 or self.can_continue()
        if self.has_attn:
            self.attn = self.attn + new
        if self.has_part:
            self.part = self.part + new
        if not ok:
            self.garbage = True

    def clear(self) -> None:
        self.attn = ()
        self.part = ()
        self.part_lo = 0
        self.garbage = False

    def seq_rm(self, p0: int) -> bool:
        """``llama_memory_seq_rm(mem, seq, p0, -1)``: remove positions ``[p0, end)``.

        Returns False when the memory refuses: a recurrent state can only be dropped whole,
        or rolled back within ``n_rs`` tokens (llama-memory-recurrent.cpp: seq_rm), and never
        while its tail cell is shared with another sequence ("a cell shared by several sequences
        cannot move back for only one of them", src/llama-memory-recurrent.cpp:202-205 of b11549).
        (A whole removal leaves the shared cell: the context's ``seq_rm`` takes it out of the
        others' ``tail_with``.)
        """
        if p0 <= 0:
            self.clear()
            return True
        if self.kind in (MemoryKind.RECURRENT, MemoryKind.HYBRID):
            n = len(self.part)
            if p0 < n:
                if self.tail_with:
                    return False
                if n - p0 > self.n_rs:
                    return False
                self.part = self.part[:p0]
        if self.has_attn:
            self.attn = self.attn[:p0]
        if self.kind == MemoryKind.SWA:
            self.part = self.part[:p0]
            if len(self.part) <= self.part_lo:
                self.part, self.part_lo = (), 0
        return True

    def shift_out(self, n_keep: int, n_discard: int) -> None:
        """``seq_rm(seq, n_keep, n_keep + n_discard)`` then ``seq_add(seq, n_keep + n_discard,
        end, -n_discard)`` (a context shift). The attention cells of the discarded tokens go
        and the later cells move down, keeping their values (computed while the discarded
        tokens were in context). A recurrent state has no cells to remove: the removal of a
        middle range leaves it as it is (llama-memory-recurrent.cpp:161-210), still
        computed over every token. Context shift is lossy by design in every case; the
        spec takes the shifted memory as the state of the kept tokens (the bookkeeping is judged against the
        bookkeeping, which the server keeps exactly), so both parts are relabelled with the
        kept tokens. What this choice cannot show: that a cache entry saved after a shift is
        not the state an uncached run of the same tokens would compute. The SWA cells left
        are those below ``n_keep`` and the moved ones, so the window starts at ``part_lo`` if
        that is below ``n_keep``, else ``n_discard`` lower but not below ``n_keep``."""
        if self.n_tokens == 0:
            return
        if self.has_attn:
            self.attn = self.attn[:n_keep] + self.attn[n_keep + n_discard :]
        if self.has_part:
            self.part = self.part[:n_keep] + self.part[n_keep + n_discard :]
            if self.kind == MemoryKind.SWA and self.part_lo >= n_keep:
                self.part_lo = max(n_keep, self.part_lo - n_discard)

    # -- state blobs (llama_state_seq_get_size_ext / get_data_ext / set_data_ext) -------

    def state_size(self, scope: int) -> int:
        """``llama_state_seq_get_size_ext`` (llama-context.cpp:3191-3202): what the prompt
        cache (server-context.cpp:263-264) and a checkpoint (common.cpp:2296, 2314) allocate.
        ``STATE_HEADER`` + the cells' bytes (+ the recurrent state), + the image's constant
        part the model otherwise leaves out (``state_overhead``, or ``ckpt_overhead`` for a
        partial image: the io magic and sequence id this function writes first, 3194-3195,
        and each cache's headers, e.g. one cell count per stream, llama-kv-cache.cpp:
        2074-2122). An empty state is the header alone (nothing caches one)."""
        return self._size(scope, self.n_tokens, len(self.attn) if self.has_attn else 0, self.window_cells())

    def image_size(self, img: StateImage) -> int:
        """The size ``get_data_ext`` gave ``img`` when a sequence of this memory's kind and sizes
        wrote it: what the payload of a slot file's checkpoint record holds in a real file (the
        model's file carries a compact encoding of the image instead, ``slot_files.encode_content``,
        so a checkpoint read back from a file takes its size from here)."""
        part = img.part or ()
        n_attn = len(img.attn) if img.attn is not None and self.has_attn else 0
        n_tokens = n_attn if img.attn is not None and self.has_attn else len(part)
        window = min(self.n_swa, max(0, len(part) - img.part_lo))
        return self._size(img.scope, n_tokens, n_attn, window)

    def _size(self, scope: int, n_tokens: int, n_attn: int, window: int) -> int:
        if n_tokens == 0:
            return STATE_HEADER
        rs = self.rs_bytes if self.kind in (MemoryKind.RECURRENT, MemoryKind.HYBRID) else 0
        swa = window * self.cell_bytes
        if scope == PARTIAL_ONLY and self.kind != MemoryKind.KV:
            return STATE_HEADER + swa + rs + self.ckpt_overhead
        # (a plain KV cache ignores the flag and writes its full image, llama-kv-cache.cpp:2070)
        return STATE_HEADER + n_attn * self.cell_bytes + swa + rs + self.state_overhead

    def image(self, scope: int) -> StateImage:
        """The identity ``get_data_ext`` writes. A partial image of a plain KV cache is the
        full one (the flag is ignored there)."""
        partial = scope == PARTIAL_ONLY and self.kind != MemoryKind.KV
        attn = None if partial or not self.has_attn else self.attn
        if self.has_part:
            lo = len(self.part) - self.window_cells() if self.kind == MemoryKind.SWA else 0
            return StateImage(self.kind, scope, attn, self.part, lo)
        return StateImage(self.kind, scope, attn, None, 0)

    def load_image(self, img: StateImage) -> None:
        """A successful ``set_data_ext``: a full image replaces the sequence; a partial one
        replaces only the non-rollbackable part (the attention cells stay)."""
        self.garbage = False
        if img.attn is not None or not self.has_attn:
            self.attn = img.attn or ()
        if img.part is not None:
            self.part = img.part
            self.part_lo = img.part_lo
        elif img.attn is not None and self.kind == MemoryKind.KV:
            self.part = ()
