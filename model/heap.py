"""Symbolic heap: buffers with written extents and content identity, refcounts, events.

A buffer never holds bytes. It records its size, whether it was zero-filled at allocation,
how many bytes from offset 0 a fill wrote (``filled``; every fill in llama.cpp writes
sequentially from the start and stops where it fails), and the *identity* of what was
written (a ``StateImage``: the state of a token prefix). "Uninitialized" means bytes that
neither a zero-fill nor a fill wrote; zero-filled bytes are initialized but are not a state.

Ownership is reference counting, as ``std::shared_ptr`` does it: a holder ``retain``s what it
keeps and ``release``s it when it lets go; the count reaching zero frees the buffer. The
properties rebuild the holder graph independently (``pcspec.model.ownership``) and compare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pcspec.model import events as ev
from pcspec.model.events import Event, stamp


class BadAlloc(Exception):
    """``std::bad_alloc``: an allocation failed (injected, or beyond ``host_ram``)."""


class Abort(Exception):
    """``GGML_ABORT`` or an uncaught C++ exception: the server process dies.

    The model raises it where the C++ aborts and ``Server`` turns it into a recorded crash;
    it never escapes the model's public API.
    """

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")


@dataclass(eq=False)
class Buffer:
    """A heap byte buffer (``common_state_data`` / ``std::vector<uint8_t>``)."""

    id: int
    size: int
    role: str  # main | drft | ckpt_tgt | ckpt_dft | ckpt_spec | file
    zeroed: bool
    filled: int = 0
    content: Any = None  # what the fill wrote; meaningful only when filled == size (Any: see
    # benchmarks/compiled_speed.py, mypyc cannot compile a dataclass field annotated ``object``)
    refs: int = 0
    freed: bool = False
    version: int = 0  # how many writes the buffer took (a comparison of two moments compares these)

    @property
    def unwritten(self) -> int:
        """Bytes that hold whatever the heap had before (never written, not zeroed)."""
        return 0 if self.zeroed else self.size - self.filled

    @property
    def complete(self) -> bool:
        return self.filled == self.size


class Faults:
    """One-shot faults armed by the fault model, consumed where the C++ can fail.

    Sites (see ``SITES``) name a place in the code, e.g. ``save.read.tgt`` is the
    ``llama_state_seq_get_data_ext`` of ``prompt_save`` on the target context.
    """

    SITES: ClassVar[tuple[str, ...]] = (
        "save.alloc.main",  # server_prompt_cache::alloc: state_data_tgt.resize
        "save.alloc.drft",  # server_prompt_cache::alloc: state_data_dft.resize
        "save.alloc.entry",  # server_prompt_cache::alloc: states.push_back (clone + copies)
        "save.read.tgt",  # server_slot::prompt_save: get_data_ext(ctx_tgt) comes up short
        "save.read.dft",  # server_slot::prompt_save: get_data_ext(ctx_dft) comes up short
        "load.write.tgt",  # server_prompt_cache::load: set_data_ext(ctx_tgt) fails
        "load.write.dft",  # server_prompt_cache::load: set_data_ext(ctx_dft) fails
        "ckpt.read.tgt",  # common_prompt_checkpoint::update_tgt: short read
        "ckpt.read.dft",  # common_prompt_checkpoint::update_dft: short read
        "ckpt.write.tgt",  # common_prompt_checkpoint::load_tgt at restore fails
        "ckpt.write.dft",  # common_prompt_checkpoint::load_dft at restore fails
        "ckpt.alloc",  # create_checkpoint: the checkpoint buffers
        "file.write.tgt",  # slot restore: llama_state_seq_load_file fails to load the state
        "state.write.short",  # any llama_state_seq_get_data_ext returns fewer bytes than get_size
    )

    def __init__(self) -> None:
        self.armed: dict[str, int] = {}
        self.on_hit: Callable[[str], None] = lambda _site: None  # the heap records hits as events

    def arm(self, site: str, count: int = 1) -> None:
        self.armed[site] = self.armed.get(site, 0) + count

    def hit(self, site: str) -> bool:
        """True (and consume one) when a fault is armed at ``site``."""
        n = self.armed.get(site, 0)
        if n <= 0:
            return False
        if n == 1:
            del self.armed[site]
        else:
            self.armed[site] = n - 1
        self.on_hit(site)
        return True


@dataclass
class Heap:
    """All live buffers, the event history, and the fault plan."""

    host_ram: int
    faults: Faults = field(default_factory=Faults)
    events: list[Event] = field(default_factory=list)
    live: dict[int, Buffer] = field(default_factory=dict)
    op: int = 0
    _next_id: int = 1
    _live_bytes: int = 0
    # Who watches which events as they are emitted (event kind -> callbacks, called after the
    # event is recorded): an observer outside the model (the judge keeping its history, the
    # conformance kit lowering a run) sees each event at the moment it happens, with the state
    # as it is then; ``everything``: the callbacks of every event. Callbacks rather than a list
    # subclass with its own ``append``: the model compiled with mypyc
    # (benchmarks/compiled_speed.py) appends to a list directly.
    watchers: dict[str, list[Callable[[Event], None]]] = field(default_factory=dict)
    everything: list[Callable[[Event], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.faults.on_hit = lambda site: self.emit(ev.FaultHit(site=site))

    def emit(self, e: Event) -> None:
        """Record ``e`` as an event of the current operation (``pcspec.model.events``)."""
        stamp(e, self.op)
        self.events.append(e)
        if self.watchers:
            ws = self.watchers.get(e.kind)
            if ws is not None:
                for w in ws:
                    w(e)
        if self.everything:
            for w in self.everything:
                w(e)

    def watch(self, kind: str, callback: Callable[[Event], None]) -> None:
        """Call ``callback`` with every event of ``kind`` (``"*"``: every event) from now on."""
        if kind == "*":
            self.everything.append(callback)
        else:
            self.watchers.setdefault(kind, []).append(callback)

    def new_id(self) -> int:
        i = self._next_id
        self._next_id += 1
        return i

    # -- allocation ----------------------------------------------------------------------

    def allocate(self, size: int, role: str, zero_init: bool, site: str | None = None) -> Buffer:
        """Allocate ``size`` bytes (``resize`` of an empty vector). Raises ``BadAlloc`` when a
        fault is armed at ``site`` or the host has no room. The caller holds one reference."""
        if (site is not None and self.faults.hit(site)) or self._live_bytes + size > self.host_ram:
            self.emit(ev.AllocFailed(size=size, role=role, site=site))
            raise BadAlloc(site or role)
        buf = Buffer(self.new_id(), size, role, zeroed=zero_init, refs=1)
        self.live[buf.id] = buf
        self._live_bytes += size
        self.emit(ev.Alloc(buf=buf.id, size=size, role=role, zeroed=zero_init))
        return buf

    def fill(self, buf: Buffer, content: object, n: int) -> None:
        """A state read wrote ``n`` bytes from offset 0 (``n < size``: it stopped short)."""
        buf.filled = max(0, min(n, buf.size))
        buf.content = content if n >= buf.size else ("short", content)
        buf.version += 1
        self.emit(ev.Fill(buf=buf.id, n=buf.filled, complete=buf.complete))

    def copy(self, src: Buffer, role: str, zero_init: bool, site: str | None = None) -> Buffer:
        """A deep copy (``std::vector`` copy constructor): a new buffer with the same bytes."""
        dst = self.allocate(src.size, role, zero_init=zero_init, site=site)
        dst.zeroed = src.zeroed or zero_init
        dst.filled = src.filled
        dst.content = src.content
        self.emit(ev.CopyPayload(src=src.id, dst=dst.id, bytes=src.size, role=role))
        return dst

    # -- ownership -----------------------------------------------------------------------

    def retain(self, buf: Buffer) -> Buffer:
        buf.refs += 1
        return buf

    def release(self, buf: Buffer | None) -> None:
        if buf is None or buf.freed:
            return
        buf.refs -= 1
        if buf.refs <= 0:
            self.free(buf)

    def free(self, buf: Buffer) -> None:
        if buf.freed:
            return
        buf.freed = True
        self.live.pop(buf.id, None)
        self._live_bytes -= buf.size
        self.emit(ev.Free(buf=buf.id, size=buf.size))

    @property
    def physical_bytes(self) -> int:
        return self._live_bytes
