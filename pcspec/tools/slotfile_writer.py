"""Slot files written by the model, for ``pcspec slotfile write``.

A slot file is only ever produced the way the server produces it: a ``Server`` runs (a trace,
or one request for the given tokens), then ``POST /slots/N?action=save`` goes through the
model's own save (``pcspec.model.slot_files.save`` -> ``slotfile.write_slot_file``). So the
bytes are what the modelled server would write for that history, checkpoint appendix included.

* ``from_tokens``: one request of exactly those tokens (``n_predict`` 1: the sampled token is
  never decoded, so the slot keeps the prompt), pinned to the slot, run to the end, saved.
* ``from_trace``: the trace replayed, the server run until idle (the server defers a save on a
  busy slot until it is idle), then the slot saved. Or, with ``saved``, the file the trace's
  own ``slot_save`` wrote, as its later operations (``corrupt_file``) left it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.core import loop, ops
from pcspec.core.errors import PcspecError
from pcspec.core.trace import Trace
from pcspec.model.config import Config
from pcspec.model.design import Design
from pcspec.model.server import Server
from pcspec.properties.judge import replay


@dataclass(frozen=True)
class Written:
    data: bytes
    variant: str
    slot: int | None  # None: a file the trace saved itself


def _apply(srv: Server, op: ops.Operation) -> None:
    loop.apply(srv, op, loop.unjudged)


def _save(srv: Server, slot: int, name: str, variant: str) -> Written:
    if srv.crash is not None:
        crash = f"{srv.crash.where}: {srv.crash.message}"
        raise PcspecError(f"the server crashed ({crash}); a crashed server saves nothing")
    _apply(srv, ops.Run())  # a save waits until the slot is idle
    _apply(srv, ops.SlotSave(slot, name))
    data = srv.files.get(name)
    if data is None:
        raise PcspecError(f"the model did not save slot {slot} ({srv.last_result or 'no result'})")
    return Written(data, variant, slot)


def from_tokens(tokens: list[int], config: Config, variant: Design, slot: int = 0, name: str = "slot.bin") -> Written:
    """The file a server with ``config`` writes after one request of ``tokens`` on ``slot``."""
    try:
        request = ops.parse({"op": "request", "tokens": tokens, "n_predict": 1, "id_slot": slot})
    except PcspecError as exc:
        raise PcspecError(exc.why, "--tokens") from None
    if slot >= config.n_slots:
        raise PcspecError(f"slot {slot} does not exist: the configuration has {config.n_slots} slot(s)", "--slot")
    srv = replay(Trace(variant, config, [request, ops.Run()]), props=()).server
    kept = srv.slots[slot].prompt.tokens
    if srv.crash is None and kept != tuple(tokens):
        raise PcspecError(
            f"slot {slot} kept {len(kept)} of the {len(tokens)} tokens: the server refused or cut the "
            f"request (a prompt must be shorter than n_ctx_slot, {config.n_ctx_slot})",
            "--tokens",
        )
    return _save(srv, slot, name, variant.name)


def from_trace(trace: Trace, slot: int = 0, saved: str | None = None, name: str = "slot.bin") -> Written:
    """The file of ``slot`` after the trace, or the trace's own saved file ``saved``."""
    srv = replay(trace, props=()).server
    if saved is None:
        if slot >= trace.config.n_slots:
            n = trace.config.n_slots
            raise PcspecError(f"slot {slot} does not exist: the trace's server has {n} slot(s)", "--slot")
        return _save(srv, slot, name, trace.variant.name)
    data = srv.files.get(saved)
    if data is None:
        names = ", ".join(sorted(srv.files)) or "none"
        raise PcspecError(f"the trace saved no file {saved!r} (files it saved: {names})", "--saved")
    return Written(data, trace.variant.name, None)
