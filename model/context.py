"""A llama context (``ctx_tgt`` or ``ctx_dft``): per-sequence memory and the state API.

Mirrors ``llama_state_seq_get_size_ext``, ``llama_state_seq_get_data_ext`` and
``llama_state_seq_set_data_ext`` (src/llama-context.cpp) over symbolic buffers, including the
failure behaviour the server depends on (behaviour notes section 4.2):

* ``get_data`` into a too-small buffer, or failing, returns 0 after writing a prefix;
* ``set_data`` of a 0-byte buffer returns 0 (the magic read throws) and changes nothing,
  which callers comparing ``n != size`` take for success;
* ``set_data`` that fails inside ``state_read`` first removes the destination sequence, so
  after a failed load the sequence is empty, not unchanged; a wrong magic (an all-zero
  buffer) fails before that and leaves the sequence as it was;
* ``set_data`` of a buffer with unwritten bytes "succeeds" with garbage: the worst case the
  seed review warns of (uninitialized heap bytes pushed into model state).
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.heap import Buffer, Heap
from pcspec.model.memory import SeqMemory, StateImage


@dataclass
class Context:
    name: str  # "tgt" | "dft"
    kind: MemoryKind
    seqs: list[SeqMemory]

    @classmethod
    def target(cls, cfg: Config) -> Context:
        return cls(
            "tgt",
            cfg.memory,
            [
                SeqMemory(cfg.memory, cfg.swa_window, cfg.swa_cells, cfg.n_rs_seq, cfg.cell_bytes, cfg.rs_bytes)
                for _ in range(cfg.n_slots)
            ],
        )

    @classmethod
    def draft(cls, cfg: Config) -> Context:
        n_swa = cfg.n_swa if cfg.draft_memory == MemoryKind.SWA else 0
        return cls(
            "dft",
            cfg.draft_memory,
            [
                SeqMemory(
                    cfg.draft_memory, n_swa, cfg.swa_cells, cfg.n_rs_seq, cfg.draft_cell_bytes, cfg.draft_rs_bytes
                )
                for _ in range(cfg.n_slots)
            ],
        )

    def get_size(self, seq: int, scope: int) -> int:
        """llama-context.cpp: llama_state_seq_get_size_ext."""
        return self.seqs[seq].state_size(scope)

    def get_data(self, heap: Heap, seq: int, buf: Buffer, scope: int, site: str) -> int:
        """llama-context.cpp: llama_state_seq_get_data_ext. Returns bytes written: 0 when the
        write threw (a fault at ``site``, or a buffer smaller than the state: the write
        stops at its end and the exception is caught), or fewer bytes than ``get_size`` said
        (a *short write*, fault site ``state.write.short``: the state shrank between the
        size query and the write); the bytes past what was written stay unwritten."""
        mem = self.seqs[seq]
        size = mem.state_size(scope)
        img = mem.image(scope)
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
            mem.clear()  # state_read failed: the destination sequence was removed
            heap.emit(ev.StateWriteFailed(ctx=self.name, seq=seq, buf=buf.id, cause="fault"))
            return 0
        if buf.unwritten > 0:
            # The header and a prefix were written; the rest is whatever the heap held. The
            # read "succeeds" (nothing checks the bytes) and the sequence holds garbage.
            heap.emit(ev.UninitLoaded(ctx=self.name, seq=seq, buf=buf.id, unwritten=buf.unwritten))
            claimed = buf.content[1] if isinstance(buf.content, tuple) else buf.content
            if isinstance(claimed, StateImage) and claimed.kind == mem.kind:
                mem.load_image(claimed)
            else:
                mem.clear()
            mem.garbage = True
            return buf.size
        img = buf.content
        if not buf.complete or not isinstance(img, StateImage) or img.kind != mem.kind:
            if buf.filled == 0:  # all zeros: "wrong sequence state magic", nothing touched
                heap.emit(ev.StateWriteFailed(ctx=self.name, seq=seq, buf=buf.id, cause="magic"))
                return 0
            mem.clear()
            heap.emit(ev.StateWriteFailed(ctx=self.name, seq=seq, buf=buf.id, cause="corrupt"))
            return 0
        mem.load_image(img)
        return buf.size
