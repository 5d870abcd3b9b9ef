"""A llama context (``ctx_tgt`` or ``ctx_dft``): per-sequence memory and the state API.

Mirrors ``llama_state_seq_get_size_ext``, ``llama_state_seq_get_data_ext`` and
``llama_state_seq_set_data_ext`` (src/llama-context.cpp:3191-3261 of the October tree) over
symbolic buffers, including the failure behaviour the server depends on:

* ``get_data`` into a too-small buffer, or failing, returns 0 after writing a prefix;
* ``set_data`` of a 0-byte buffer returns 0 (the magic read throws) and changes nothing,
  which callers comparing ``n != size`` take for success;
* ``set_data`` that fails inside ``state_read`` first removes the destination sequence, so
  after a failed load the sequence is empty, not unchanged (src/llama-kv-cache.cpp:2199-2203,
  src/llama-memory-recurrent.cpp:868-871); a wrong magic (an all-zero
  buffer) fails before that and leaves the sequence as it was;
* ``set_data`` of a buffer with unwritten bytes "succeeds" with garbage: the worst case the
  security note of the #30137 review warns of (uninitialized heap bytes pushed into model
  state).

The memory operations the server calls (``llama_decode`` of a batch, ``llama_memory_seq_rm``,
the two calls of a context shift, a state write and read) are methods here, not of one
sequence: in an iSWA memory they place and free cells of the SWA cache (``swa_ring``), which
decides each sequence's ``pos_min``, and with ``--kv-unified`` one sequence's decode can move
another's. ``SeqMemory`` keeps what the cells hold; ``_sync`` copies ``pos_min`` over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.errors import PcspecError
from pcspec.model.heap import Buffer, Heap
from pcspec.model.memory import SeqMemory, StateImage, Tokens
from pcspec.model.swa_ring import SwaCache


@dataclass
class Context:
    name: str  # "tgt" | "dft"
    kind: MemoryKind
    seqs: list[SeqMemory]
    swa: SwaCache | None = None  # the cells of the SWA cache (iSWA only)

    @classmethod
    def target(cls, cfg: Config) -> Context:
        return cls._create("tgt", cfg, cfg.memory, cfg.cell_bytes, cfg.rs_bytes,
                           (cfg.state_overhead, cfg.ckpt_overhead))

    @classmethod
    def draft(cls, cfg: Config) -> Context:
        return cls._create("dft", cfg, cfg.draft_memory, cfg.draft_cell_bytes, cfg.draft_rs_bytes)

    @classmethod
    def _create(cls, name: str, cfg: Config, kind: MemoryKind, cell_bytes: int, rs_bytes: int,
                overhead: tuple[int, int] = (0, 0)) -> Context:
        n_swa = cfg.n_swa if kind == MemoryKind.SWA else 0
        seqs = [SeqMemory(kind, n_swa, cfg.n_rs_seq, cell_bytes, rs_bytes, *overhead) for _ in range(cfg.n_slots)]
        swa = None
        if kind == MemoryKind.SWA:
            swa = SwaCache.create(n_swa, cfg.swa_size, cfg.n_slots, cfg.kv_unified, cfg.n_ubatch)
        return cls(name, kind, seqs, swa)

    # -- memory operations --------------------------------------------------------------------

    def decode(self, batch: Sequence[tuple[int, Tokens]], starts: Sequence[int] | None = None) -> None:
        """``llama_decode`` of one batch: each sequence's new tokens, in batch order (the server
        puts the sampled tokens of generating slots first, then the prompt tokens slot by slot:
        server-context.cpp:3077-3080, 3092-3616). Each sequence's memory takes its tokens; the
        SWA cache places them ubatch by ubatch (``SwaCache.decode``)."""
        if self.swa is None:
            for seq, new in batch:
                self._own_tail(seq, new)
                self.seqs[seq].decode(new)
            return
        # The positions are the batch's (``starts``: the slot's, as the server fills the batch,
        # server-context.cpp:3077-3080, 3456), which are the memory's own next positions unless
        # the memory already disagrees with the slot (a draft left behind by a restore): the
        # cells then go where the server puts them, not where the model's tokens would.
        if starts is None:
            starts = [self.seqs[seq].n_tokens for seq, _ in batch]
        tokens = [(seq, p0 + i) for (seq, new), p0 in zip(batch, starts, strict=True) for i in range(len(new))]
        for seq, new in batch:
            self._own_tail(seq, new)
            self.seqs[seq].decode(new)
        if tokens:
            self.swa.decode(tokens)
            self._sync()

    def refused_start(self, batch: Sequence[tuple[int, Tokens]], starts: Sequence[int]) -> tuple[int, int, int] | None:
        """``llama_batch_allocr::init``'s position check (src/llama-batch.cpp:322-346 of the
        October tree; ``llama_context::decode`` then returns -1, src/llama-context.cpp:
        1768-1771): a sequence whose memory holds a position must go on right after its last
        one, ``llama_memory_seq_pos_max`` (``SeqMemory.pos_range``). An empty sequence takes
        any start. The first refused ``(seq, pos_max, start)``, else None."""
        for (seq, new), start in zip(batch, starts, strict=True):
            pos_max = self.seqs[seq].pos_range()[1]
            if new and pos_max >= 0 and start != pos_max + 1:
                return seq, pos_max, start
        return None

    def seq_rm(self, seq: int, p0: int) -> bool:
        """``llama_memory_seq_rm(mem, seq, p0, -1)`` (``p0 <= 0``: the whole sequence); iSWA
        removes from both caches (llama-kv-cache-iswa.cpp:113-120). False when the memory
        refuses (``SeqMemory.seq_rm``)."""
        if not self.seqs[seq].seq_rm(p0):
            return False
        if p0 <= 0:
            self._leave_tail(seq)
        if self.swa is not None:
            self.swa.seq_rm(seq, p0, -1)
            self._sync()
        return True

    def seq_cp(self, src: int, dst: int) -> None:
        """``llama_memory_seq_cp(mem, src, dst, -1, -1)`` onto an emptied ``dst`` (``copy_prompt_to``
        removes it first): ``dst`` holds what ``src`` holds.

        * KV: both sequences' cells (src/llama-kv-cache.cpp:469-559 of b11549: in one stream the
          cells gain ``dst``, 481-510; across streams, ``--kv-unified`` off, the stream is copied,
          512 on). A sequence's attention memory is the tokens of its cells either way.
        * recurrent: ``dst`` joins ``src``'s tail cell (src/llama-memory-recurrent.cpp:265-300 of
          b11549): one state for both until either decodes, when ``find_slot`` moves the decoding
          sequence to a cell of its own (605-630), or is removed whole, or reads a state
          (``state_read_meta``'s ``seq_rm(dest, -1, -1)``, 1022). Meanwhile a partial ``seq_rm``
          of either refuses (``SeqMemory.seq_rm``, 202-205).
        * hybrid: both (src/llama-memory-hybrid.cpp:152-155 of b11549).
        * iSWA: both caches (llama-kv-cache-iswa.cpp:122-125 of b11549); with one stream per
          sequence the SWA cache copies the stream (``SwaCache.seq_cp``). With ``--kv-unified``
          the C++ adds ``dst`` to the cells' sequence sets, which the model's ring, of cells of
          one sequence each, cannot hold: not modelled, and the server refuses a group of
          shared-prefix tasks there (``Server.request_group``)."""
        if self.swa is not None and self.swa.unified:
            raise PcspecError(f"seq_cp of an iSWA memory with --kv-unified (context {self.name}) is not modelled")
        a, b = self.seqs[src], self.seqs[dst]
        b.attn, b.part, b.part_lo, b.garbage = a.attn, a.part, a.part_lo, a.garbage
        if self.swa is not None:
            self.swa.seq_cp(src, dst)
            self._sync()
        if self.kind in (MemoryKind.RECURRENT, MemoryKind.HYBRID) and a.part:
            self._leave_tail(dst)
            group = a.tail_with | {src}
            for other in group:
                o = self.seqs[other]
                o.tail_with = o.tail_with | {dst}
            b.tail_with = group

    def _leave_tail(self, seq: int) -> None:
        """``seq`` no longer shares a recurrent tail cell (the cell keeps the others)."""
        mem = self.seqs[seq]
        for other in mem.tail_with:
            o = self.seqs[other]
            o.tail_with = o.tail_with - {seq}
        mem.tail_with = frozenset()

    def _own_tail(self, seq: int, new: Tokens) -> None:
        """A decode of a sequence whose tail cell is shared copies the cell first
        (src/llama-memory-recurrent.cpp:605-630 of b11549, ``find_slot``)."""
        if new and self.seqs[seq].tail_with:
            self._leave_tail(seq)

    def shift(self, seq: int, n_keep: int, n_discard: int) -> None:
        """A context shift's ``llama_memory_seq_rm(mem, seq, n_keep, n_keep + n_discard)`` and
        ``llama_memory_seq_add(mem, seq, n_keep + n_discard, -1, -n_discard)``
        (server-context.cpp:2930-2931; iSWA on both caches, llama-kv-cache-iswa.cpp:113-120, 132-135)."""
        self.seqs[seq].shift_out(n_keep, n_discard)
        if self.swa is not None:
            self.swa.seq_rm(seq, n_keep, n_keep + n_discard)
            self.swa.seq_add(seq, n_keep + n_discard, -1, -n_discard)
            self._sync()

    def state_write(self, seq: int, scope: int) -> StateImage:
        """What ``state_write`` of the sequence writes (llama-kv-cache-iswa.cpp:259-265): its
        image, with the SWA cells in the order they lie in the cache."""
        img = self.seqs[seq].image(scope)
        if self.swa is not None and img.part is not None:
            # (``dataclasses.replace`` without its field walk: a save's hot path)
            img = StateImage(img.kind, img.scope, img.attn, img.part, img.part_lo, self.swa.state_write(seq))
        return img

    def state_read(self, seq: int, img: StateImage) -> None:
        """A ``state_read`` of ``img`` into the sequence that succeeds
        (llama-kv-cache-iswa.cpp:267-273: the base cache unless PARTIAL_ONLY, then the SWA
        cache, which places the written cells in their order: ``SwaCache.state_read``)."""
        self._leave_tail(seq)  # (the recurrent state_read_meta's seq_rm(dest, -1, -1))
        self.seqs[seq].load_image(img)
        if self.swa is not None and img.part is not None:
            self.swa.state_read(seq, img.swa_order or tuple(range(img.part_lo, len(img.part))))
            self._sync()

    def _sync(self) -> None:
        """Each sequence's ``pos_min`` is its SWA cache's (llama-kv-cache-iswa.cpp:142-145)."""
        assert self.swa is not None
        for seq, mem in enumerate(self.seqs):
            lo = self.swa.seq_pos_min(seq)
            if lo >= 0:
                mem.part_lo = lo

    def get_size(self, seq: int, scope: int) -> int:
        """llama-context.cpp: llama_state_seq_get_size_ext (3191-3202; with the target's
        ``Config.state_overhead`` / ``ckpt_overhead``: ``SeqMemory.state_size``)."""
        return self.seqs[seq].state_size(scope)

    def get_data(self, heap: Heap, seq: int, buf: Buffer, scope: int, site: str) -> int:
        """llama-context.cpp: llama_state_seq_get_data_ext. Returns bytes written: 0 when the
        write threw (a fault at ``site``, or a buffer smaller than the state: the write
        stops at its end and the exception is caught), or fewer bytes than ``get_size`` said
        (a *short write*, fault site ``state.write.short``: the state shrank between the
        size query and the write); the bytes past what was written stay unwritten."""
        size = self.get_size(seq, scope)
        img = self.state_write(seq, scope)
        if heap.faults.hit(site) or buf.size < size:
            heap.fill(buf, img, min(buf.size, size) // 2)
            heap.emit(ev.StateReadShort(ctx=self.name, seq=seq, buf=buf.id, size=size))
            return 0
        if size > 1 and heap.faults.hit("state.write.short"):
            n = size // 2
            heap.fill(buf, img, n)
            heap.emit(ev.StateReadShort(ctx=self.name, seq=seq, buf=buf.id, size=size, written=n))
            return n
        heap.fill(buf, img, size)
        return size

    def set_data(self, heap: Heap, seq: int, buf: Buffer | None, site: str) -> int:
        """llama-context.cpp: llama_state_seq_set_data_ext. Returns bytes consumed (0 on
        failure). The scope is in the image itself."""
        mem = self.seqs[seq]
        if buf is None or buf.size == 0:
            return 0
        if heap.faults.hit(site):
            self.seq_rm(seq, -1)  # state_read failed: the destination sequence was removed
            heap.emit(ev.StateWriteFailed(ctx=self.name, seq=seq, buf=buf.id, cause="fault"))
            return 0
        if buf.unwritten > 0:
            # The header and a prefix were written; the rest is whatever the heap held. The
            # read "succeeds" (nothing checks the bytes) and the sequence holds garbage.
            heap.emit(ev.UninitLoaded(ctx=self.name, seq=seq, buf=buf.id, unwritten=buf.unwritten))
            claimed = buf.content[1] if isinstance(buf.content, tuple) else buf.content
            if isinstance(claimed, StateImage) and claimed.kind == mem.kind:
                self.state_read(seq, claimed)
            else:
                self.seq_rm(seq, -1)
            mem.garbage = True
            return buf.size
        img = buf.content
        if not buf.complete or not isinstance(img, StateImage) or img.kind != mem.kind:
            if buf.filled == 0:  # all zeros: "wrong sequence state magic", nothing touched
                heap.emit(ev.StateWriteFailed(ctx=self.name, seq=seq, buf=buf.id, cause="magic"))
                return 0
            self.seq_rm(seq, -1)
            heap.emit(ev.StateWriteFailed(ctx=self.name, seq=seq, buf=buf.id, cause="corrupt"))
            return 0
        self.state_read(seq, img)
        return buf.size
