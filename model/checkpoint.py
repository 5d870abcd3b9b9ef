"""Context checkpoints and prompts: ``common_prompt_checkpoint`` and ``server_prompt``.

A ``Checkpoint`` holds metadata and up to three payload buffers. Holders (a slot's prompt, a
cache entry's prompt) keep checkpoints in lists; how a list is copied is a design's ``sharing``:

* ``deep_copy`` (baseline): a copy is a new checkpoint with new buffers (payload bytes copied);
* ``shared_object`` (#30137, fixed): a copy is the same object (``shared_ptr<const ...>``);
* ``shared_payload`` (#27451): a copy is a new object with the metadata by value and the
  payload buffers shared.

Reference counts are kept on checkpoint objects (holders) and on buffers (checkpoint objects
and cache entries); the last release frees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pcspec.model import events as ev
from pcspec.model.heap import Buffer, Heap
from pcspec.model.memory import Tokens


class Sharing(StrEnum):
    """How a checkpoint list is copied (``std::list`` copy of the element type): a design's
    ``sharing`` (``pcspec.model.design``)."""

    DEEP_COPY = "deep_copy"  # std::list<common_prompt_checkpoint>: a copy allocates every payload
    SHARED_OBJECT = "shared_object"  # std::shared_ptr<const common_prompt_checkpoint> (#30137)
    SHARED_PAYLOAD = "shared_payload"  # metadata by value, payload buffers shared (#27451)


@dataclass(eq=False)
class Checkpoint:
    """common/common.h: common_prompt_checkpoint."""

    id: int
    n_tokens: int
    id_task: int
    pos_min: int
    pos_max: int
    tgt: Buffer | None = None
    dft: Buffer | None = None
    spec: Buffer | None = None
    refs: int = 0

    def buffers(self) -> list[Buffer]:
        return list(filter(None, (self.tgt, self.dft, self.spec)))  # (hot: judged every step)

    def size(self) -> int:
        """common.cpp: common_prompt_checkpoint::size = |tgt| + |dft| + |spec|."""
        return sum(b.size for b in self.buffers())

    def describe(self) -> str:
        return (
            f"ckpt#{self.id}(n_tokens={self.n_tokens}, pos=[{self.pos_min},{self.pos_max}], "
            f"task={self.id_task}, {self.size()} B)"
        )


@dataclass
class Prompt:
    """server-task.h: server_prompt -- the tokens in memory plus the checkpoints."""

    tokens: Tokens = ()
    checkpoints: list[Checkpoint] = field(default_factory=list)

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


def hold(heap: Heap, prompt: Prompt, ck: Checkpoint) -> None:
    """``push_back`` into a holder's list: the holder takes a reference. The first holder
    publishes the checkpoint: from then on it is reachable by later operations. (A released
    checkpoint is never held again: its last release freed it, and no list names it.)"""
    ck.refs += 1
    if ck.refs == 1:
        heap.emit(ev.PublishCkpt(ckpt=ck.id, checkpoint=ck))
    prompt.checkpoints.append(ck)


def release_ckpt(heap: Heap, ck: Checkpoint) -> None:
    """The holder lets go of a checkpoint; the last release frees its buffers."""
    ck.refs -= 1
    if ck.refs <= 0:
        for b in ck.buffers():
            heap.release(b)


def drop(heap: Heap, prompt: Prompt, ck: Checkpoint) -> None:
    """``erase`` from a holder's list."""
    prompt.checkpoints.remove(ck)
    release_ckpt(heap, ck)


def drop_all(heap: Heap, prompt: Prompt) -> None:
    """server_prompt::clear for the checkpoint list."""
    cks, prompt.checkpoints = prompt.checkpoints, []
    for ck in cks:
        release_ckpt(heap, ck)


def copy_checkpoints(
    heap: Heap, ckpts: list[Checkpoint], sharing: Sharing, zero_init: bool, site: str | None
) -> list[Checkpoint]:
    """Copy a checkpoint list as the variant's ``std::list`` copy does. The result is not yet
    held (the receiving prompt ``hold``s each). May raise ``BadAlloc`` (deep copies)."""
    if sharing == Sharing.SHARED_OBJECT:
        return list(ckpts)
    out: list[Checkpoint] = []
    made: list[Buffer] = []
    try:
        for ck in ckpts:
            bufs: list[Buffer | None] = []
            for b in (ck.tgt, ck.dft, ck.spec):
                # #27451 shares the target and draft payloads, but its description keeps the
                # smaller speculative state owned by each copy (docs/SOURCES.md): copied.
                value_owned = sharing == Sharing.DEEP_COPY or b is ck.spec
                if b is None:
                    bufs.append(None)
                elif value_owned:
                    bufs.append(heap.copy(b, b.role, zero_init, site))
                    made.append(bufs[-1])  # type: ignore[arg-type]
                else:
                    bufs.append(heap.retain(b))
                    made.append(b)
            copy = Checkpoint(heap.new_id(), ck.n_tokens, ck.id_task, ck.pos_min, ck.pos_max)
            copy.tgt, copy.dft, copy.spec = bufs
            out.append(copy)
    except BaseException:
        # Stack unwinding destroys the partial copy.
        for b in made:
            heap.release(b)
        raise
    return out
