"""A model's allocation fault, as the fault build's ``LLAMA_FAULTS`` item that fails the same
allocation of the real server.

The fault build's ``alloc.SIZE@n`` (patches/faults/0002) fails the n-th ``operator new`` of
exactly SIZE bytes in the whole process. Every design allocates each state and checkpoint
buffer with its exact size, and the model, configured for the server
(``pcspec.live.calibrate.model_config``), gives its buffers the server's sizes. So the model
counts, per size, the allocations of its symbolic heap (``Alloc`` events, deep copies included)
as the process counts them, and the allocation the model failed (an ``AllocFailed`` at an armed
site: ``ckpt.alloc``, ``save.alloc.main``, ``save.alloc.drft``) is the n-th of its size.

The count assumes that nothing else in the process allocates a block of that size (states and
checkpoints are tens of KiB and more, an odd size; the log line of the fault says which call it
fired at, so a test sees a count gone wrong as a fault firing somewhere else).
"""

from __future__ import annotations

from collections import Counter

from pcspec.live.designs import alloc_site
from pcspec.model import events as ev
from pcspec.model.heap import Heap


class AllocCalls:
    """Watches a model heap from now on: the allocations per size, and one ``LLAMA_FAULTS``
    item per allocation the model failed (``items``, in order)."""

    def __init__(self, heap: Heap) -> None:
        self.by_size: Counter[int] = Counter()
        self.items: list[str] = []
        heap.watch(ev.Alloc.kind, self._alloc)
        heap.watch(ev.AllocFailed.kind, self._failed)

    def _alloc(self, e: ev.Event) -> None:
        assert isinstance(e, ev.Alloc)
        self.by_size[e.size] += 1

    def _failed(self, e: ev.Event) -> None:
        assert isinstance(e, ev.AllocFailed)
        # the failed call is counted too: the process's operator new was called and threw
        self.by_size[e.size] += 1
        self.items.append(alloc_site(e.size, self.by_size[e.size]))

    def env(self) -> dict[str, str]:
        """The fault build's environment that fails the allocations the model failed."""
        return {"LLAMA_FAULTS": ",".join(self.items)} if self.items else {}
