"""The sliding-window half of an iSWA memory, cell by cell: where each position is stored.

The SWA cache (``kv_swa``, llama-kv-cache-iswa.cpp:73-104) is a ``llama_kv_cache`` of
``size_swa`` cells per stream: one stream per sequence, or one shared by every sequence with
``--kv-unified`` (llama-kv-cache.cpp:85, 142-155). A cell holds one position of one sequence.
``find_slot`` reuses a cell that the window no longer sees, and ``apply_ubatch`` then purges
everything older of that sequence, so the positions a sequence keeps (its ``pos_min``, which a
checkpoint records) depend on the ubatch sizes and on the history of the ring: the cells the
other sequences of the stream hold, where earlier writes and restores put theirs.

This module keeps only that layout: position and sequence of every cell, and each stream's
head. What the cells hold (the state of which tokens) is ``memory.SeqMemory``'s; the context
(``context.Context``) runs both in step and reads ``pos_min`` from here. The positions of a
sequence are always one run ``[pos_min, pos_max]`` (the purge of apply_ubatch keeps it so,
llama-kv-cache.cpp:1160-1163).

Each method is the C++ function of the same name, for the single-sequence cells the server
makes: no cell holds two sequences (the one copy of a sequence, a shared-prefix child's
``seq_cp``, is modelled across streams only, where it copies the stream: ``seq_cp``). The split
of a batch into ubatches is ``llama_batch_allocr``'s (src/llama-batch.cpp of the October tree, in the sdist's
vendor/llama.cpp/; docs/SOURCES.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

Cell = tuple[int, int]  # (seq_id, pos) of an occupied cell
Token = tuple[int, int]  # (seq_id, pos) of a token of a batch


@dataclass
class Stream:
    """``v_cells[s]`` and ``v_heads[s]`` of one stream: None for an empty cell."""

    cells: list[Cell | None]
    head: int = 0

    def used(self) -> int:
        """``llama_kv_cells::get_used``."""
        return sum(c is not None for c in self.cells)

    def pos_max_by_seq(self) -> dict[int, int]:
        """``seq_pos_max`` of every sequence the stream holds."""
        out: dict[int, int] = {}
        for c in self.cells:
            if c is not None and c[1] > out.get(c[0], -1):
                out[c[0]] = c[1]
        return out


@dataclass
class SwaCache:
    """The SWA ``llama_kv_cache`` of one context: its streams, the window, and the ubatch size
    its batches are split by."""

    n_swa: int
    size: int  # cells per stream (size_swa)
    unified: bool
    n_ubatch: int
    streams: list[Stream] = field(default_factory=list)

    @classmethod
    def create(cls, n_swa: int, size: int, n_seq: int, unified: bool, n_ubatch: int) -> SwaCache:
        """llama-kv-cache.cpp:85 (``n_stream = unified ? 1 : n_seq_max``), 142-145 (each
        stream ``kv_size`` cells), 119-122 (heads at 0)."""
        n_stream = 1 if unified else n_seq
        return cls(n_swa, size, unified, n_ubatch, [Stream([None] * size) for _ in range(n_stream)])

    def stream(self, seq: int) -> Stream:
        """``v_cells[seq_to_stream[seq]]``: sequence ``s`` has stream ``s``, or all share stream
        0 (llama-kv-cache.cpp:147-155)."""
        return self.streams[0 if self.unified else seq]

    # -- positions (llama_kv_cells::seq_pos_min / seq_pos_max) ------------------------------

    def seq_pos_min(self, seq: int) -> int:
        """llama-kv-cache.cpp:659-670; -1 when the sequence has no cell."""
        ps = [c[1] for c in self.stream(seq).cells if c is not None and c[0] == seq]
        return min(ps) if ps else -1

    def seq_pos_max(self, seq: int) -> int:
        """llama-kv-cache.cpp:672-683; -1 when the sequence has no cell."""
        ps = [c[1] for c in self.stream(seq).cells if c is not None and c[0] == seq]
        return max(ps) if ps else -1

    def is_masked_swa(self, p0: int, p1: int) -> bool:
        """``llama_hparams::is_masked_swa`` (llama-hparams.h:475-487), the standard window of
        gemma2 (LLAMA_SWA_TYPE_STANDARD): a query at ``p1`` no longer sees the key at ``p0``."""
        return p1 - p0 >= self.n_swa

    # -- placing a ubatch (llama-kv-cache.cpp:898-1186) ---------------------------------------

    def find_slot(self, strm: Stream, n_tokens: int) -> list[int]:
        """llama-kv-cache.cpp:898-1095, with ``cont = false`` (as ``prepare`` calls it, 769,
        and ``state_read_meta``, 2432): the cells for ``n_tokens`` tokens of one stream, tested
        one by one from the head (1018-1031), wrapping at the end (1021-1025). The head restarts
        at 0 when it is more than ``2 * n_tokens`` past the count of used cells (1005-1007). A
        cell can be used when it is empty or holds a position its sequence's next token no
        longer sees (``is_masked_swa(pos_cell, seq_pos_max + 1)``, 1042-1064; the cells do not
        change while the search runs, so every test reads the positions from before the
        ubatch)."""
        size = len(strm.cells)
        head = strm.head
        if head > strm.used() + 2 * n_tokens:
            head = 0
        pos_max = strm.pos_max_by_seq()
        idxs: list[int] = []
        n_tested = 0
        while True:
            if head + 1 > size:  # 1021-1025
                n_tested += size - head
                head = 0
                continue
            idx = head
            head += 1
            n_tested += 1
            c = strm.cells[idx]
            if c is None or self.is_masked_swa(c[1], pos_max[c[0]] + 1):
                idxs.append(idx)
            if len(idxs) == n_tokens:
                return idxs
            if n_tested >= size:
                # 1080-1083. Never reached: Config.swa_size keeps at least the cells the window
                # of every sequence of the stream and one ubatch need (iswa.cpp:73).
                raise AssertionError(f"find_slot: no {n_tokens} free cells of {size}")

    def apply_ubatch(self, strm: Stream, idxs: Sequence[int], ubatch: Sequence[Token]) -> None:
        """llama-kv-cache.cpp:1097-1186: each token takes its cell; a sequence whose cell was
        overwritten loses every position up to the largest one overwritten (1160-1178: "we
        want to preserve the invariant that all positions between [pos_min, pos_max] for each
        sequence will be present in the cache"); the head moves past the last cell used."""
        seq_pos_max_rm: dict[int, int] = {}
        for idx, (seq, pos) in zip(idxs, ubatch, strict=True):
            old = strm.cells[idx]
            if old is not None:  # 1119-1128
                seq_pos_max_rm[old[0]] = max(seq_pos_max_rm.get(old[0], -1), old[1])
            strm.cells[idx] = (seq, pos)  # 1131, 1154-1156
        for s in sorted(seq_pos_max_rm):  # 1163-1178, in sequence order
            lo = self.seq_pos_min(s)
            if lo <= seq_pos_max_rm[s]:
                self.seq_rm(s, lo, seq_pos_max_rm[s] + 1)
        strm.head = idxs[-1] + 1  # 1181-1185

    def decode(self, batch: Sequence[Token]) -> None:
        """The SWA cache's part of ``llama_decode`` of one batch (the tokens in batch order):
        ``llama_kv_cache_iswa::init_batch`` (llama-kv-cache-iswa.cpp:159-243) splits it, with
        ``--kv-unified`` simply (``split_simple``, 162-201), else into equal per-sequence
        shares of consecutive sequences (``split_equal(n_ubatch, sequential = !unified)``,
        203-237); ``prepare`` (llama-kv-cache.cpp:751-815) then places the ubatches in order,
        ``find_slot`` and ``apply_ubatch`` each (it undoes them and the decode applies the same
        slots again, ubatch by ubatch: the same cells). A unified stream places a ubatch in one
        search; separate streams place each sequence's share in its own (find_slot 966-1001)."""
        used = [False] * len(batch)
        while not all(used):
            if self.unified:
                ubatch = split_simple(batch, used, self.n_ubatch)
                strm = self.streams[0]
                self.apply_ubatch(strm, self.find_slot(strm, len(ubatch)), ubatch)
                continue
            ubatch = split_equal(batch, used, self.n_ubatch, sequential=True)
            for seq in dict.fromkeys(s for s, _ in ubatch):
                share = [t for t in ubatch if t[0] == seq]
                strm = self.stream(seq)
                self.apply_ubatch(strm, self.find_slot(strm, len(share)), share)

    # -- sequence operations --------------------------------------------------------------------

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        """llama-kv-cache.cpp:382-449: free the sequence's cells with ``p0 <= pos < p1`` (``p1``
        < 0: no end); the head moves back to the first freed cell if that is before it."""
        strm = self.stream(seq)
        p0 = max(p0, 0)
        size = len(strm.cells)
        new_head = size
        for i, c in enumerate(strm.cells):
            if c is not None and c[0] == seq and p0 <= c[1] and (p1 < 0 or c[1] < p1):
                strm.cells[i] = None
                if new_head == size:
                    new_head = i
        if new_head != size and new_head < strm.head:
            strm.head = new_head

    def seq_add(self, seq: int, p0: int, p1: int, shift: int) -> None:
        """llama-kv-cache.cpp:570-618: move the sequence's positions in ``[p0, p1)`` by
        ``shift``; a position that becomes negative frees its cell. The head goes to the first
        freed cell, or to 0."""
        if shift == 0:
            return
        p0 = max(p0, 0)
        if p0 == p1:
            return
        strm = self.stream(seq)
        size = len(strm.cells)
        new_head = size
        for i, c in enumerate(strm.cells):
            if c is not None and c[0] == seq and p0 <= c[1] and (p1 < 0 or c[1] < p1):
                pos = c[1] + shift
                strm.cells[i] = (seq, pos) if pos >= 0 else None
                if pos < 0 and new_head == size:
                    new_head = i
        strm.head = new_head if new_head != size else 0

    def seq_cp(self, src: int, dst: int) -> None:
        """``seq_cp(src, dst, -1, -1)`` across streams (src/llama-kv-cache.cpp:512-555 of b11549,
        one stream per sequence): ``dst``'s stream is reset and takes ``src``'s cells at the same
        indices, relabelled, and its head; the data follows at the next update (``update``,
        845-870, "copying KV buffer: stream %d to stream %d"). Within one stream (``--kv-unified``,
        481-510) the cells would gain ``dst`` beside ``src``, which these single-sequence cells
        cannot hold: the context refuses that before (``Context.seq_cp``)."""
        assert not self.unified
        a, b = self.stream(src), self.stream(dst)
        b.cells = [(dst, c[1]) if c is not None and c[0] == src else None for c in a.cells]
        b.head = a.head

    # -- state (llama-kv-cache.cpp:2065-2209, 2343-2470) --------------------------------------

    def state_write(self, seq: int) -> tuple[int, ...]:
        """The positions ``state_write`` writes for a sequence, in cell order (2082-2110): its
        cells that its last position still sees (``!is_masked_swa(pos, seq_pos_max)``), so at
        most the last ``n_swa``."""
        hi = self.seq_pos_max(seq)
        return tuple(
            c[1] for c in self.stream(seq).cells if c is not None and c[0] == seq and not self.is_masked_swa(c[1], hi)
        )

    def state_read(self, seq: int, positions: Sequence[int]) -> None:
        """``state_read_meta`` into one sequence (2343-2470): nothing for a stream written with
        no cell (2179-2185, state_read_sinfo); otherwise the sequence's cells are freed, and the positions, in the
        order they were written, are placed as one ubatch of that sequence (``find_slot``, then
        ``apply_ubatch``, which may purge another sequence of a unified stream)."""
        if not positions:
            return
        self.seq_rm(seq, -1, -1)
        strm = self.stream(seq)
        ubatch = [(seq, p) for p in positions]
        self.apply_ubatch(strm, self.find_slot(strm, len(ubatch)), ubatch)


# -- the batch split (llama_batch_allocr, src/llama-batch.cpp) ------------------------------------


def split_simple(batch: Sequence[Token], used: list[bool], n_ubatch: int) -> list[Token]:
    """llama-batch.cpp:508-540: the next ``n_ubatch`` unused tokens in batch order."""
    out: list[Token] = []
    for i, t in enumerate(batch):
        if not used[i]:
            used[i] = True
            out.append(t)
            if len(out) >= n_ubatch:
                break
    return out


def split_equal(batch: Sequence[Token], used: list[bool], n_ubatch: int, sequential: bool) -> list[Token]:
    """llama-batch.cpp:542-711 (``n_keep_tail = 0``): the sequences taking part are those of
    the unused tokens in batch order, distinct, and with ``sequential`` only consecutive ids
    after the first (553-584); each then gives one token a round until one of them has none
    left or another round would pass ``n_ubatch`` (605-635). The ubatch is the shares one
    after the other."""
    seqs: list[int] = []
    for i, (seq, _) in enumerate(batch):
        if used[i] or seq in seqs:
            continue
        if sequential and seqs and seq != seqs[-1] + 1:
            continue
        seqs.append(seq)
        if len(seqs) > n_ubatch:
            break
    left = {s: [i for i, t in enumerate(batch) if t[0] == s and not used[i]] for s in seqs}
    shares: dict[int, list[int]] = {s: [] for s in seqs}
    while all(left[s] for s in seqs):
        for s in seqs:
            i = left[s].pop(0)
            used[i] = True
            shares[s].append(i)
        if (len(shares[seqs[0]]) + 1) * len(seqs) > n_ubatch:
            break
    return [batch[i] for s in seqs for i in shares[s]]
