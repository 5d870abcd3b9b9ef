"""The operation vocabulary: one JSON object per server action, applied to a ``Server``.

This is what trace files, the fuzzer, the simulator and C++ ports share. Each operation is
validated before it runs; a malformed one raises ``PcspecError`` naming the field.

=================  ==========================================================================
op                 fields (defaults)
=================  ==========================================================================
``request``        ``tokens`` [int], ``spans`` [int] ([]), ``n_predict`` (4), ``id_slot`` (-1),
                   ``cache_prompt`` (true), ``type`` ("completion"; "decision" from b11434),
                   ``chat`` (false: a raw ``/completion``, whose ``spans`` a build that takes
                   them from the chat session only drops; ``Server.request``)
``request_group``  ``prompts`` [[int]] (at least one): one request of decision prompts, grouped
                   into parents and shared-prefix children (``Server.request_group``; decision
                   tasks are from b11434; a group on an iSWA memory with --kv-unified is refused)
``step``           one ``update_slots`` iteration
``run``            ``max_steps`` (10000, at most 1,000,000): steps until idle (each step is one
                   operation)
``inject``         ``site`` (a fault site), ``count`` (1)
``slot_save``      ``id_slot``, ``filename``
``slot_restore``   ``id_slot``, ``filename``
``slot_erase``     ``id_slot``
``corrupt_file``   ``filename``, and ``offset`` + ``data`` ([int] bytes written there; with
                   ``remove`` (n), spliced in instead: n bytes at ``offset`` replaced by
                   ``data``, an append at the end), or ``truncate`` (new length), or ``field``
                   (a slot-file field name, see ``slotfile.field_map``) + ``value`` (its new
                   integer value)
``sleep_wake``     sleep and wake (the cache and the slots are lost)
``restart``        the process restarts; ``config`` ({}) changes flags of ``RESTART_FIELDS``
                   (the slot-save directory stays)
=================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pcspec.model.errors import PcspecError
from pcspec.model.heap import Faults
from pcspec.model.server import RESTART_FIELDS, Server
from pcspec.model.slot import TaskType

# llama_token is an int32_t, and server_tokens::validate refuses a negative id: a request with
# any other id never reaches a slot (the slot file writer could not store it either).
TOKEN_MAX = 2**31 - 1
# A ``run`` is judged after every step: a million steps is minutes of model time already, and
# no workload of the catalogue needs more (a generation that never ends under context shift
# would otherwise keep a replay busy for as long as it asks).
MAX_RUN_STEPS = 1_000_000

OPS = (
    "request",
    "request_group",
    "step",
    "run",
    "inject",
    "slot_save",
    "slot_restore",
    "slot_erase",
    "corrupt_file",
    "sleep_wake",
    "restart",
)


def _int(op: dict[str, Any], key: str, default: int | None = None, lo: int | None = None) -> int:
    v = op.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise PcspecError(f"field {key!r} must be an integer (got {v!r})")
    if lo is not None and v < lo:
        raise PcspecError(f"field {key!r} must be >= {lo} (got {v})")
    return v


def _ints(op: dict[str, Any], key: str, default: list[int] | None = None) -> tuple[int, ...]:
    v = op.get(key, default)
    # ``set(map(type, v))`` runs in C: a request of millions of tokens is checked in
    # milliseconds (a generator over ``isinstance`` took seconds). ``bool`` is its own type.
    if not isinstance(v, list) or not set(map(type, v)) <= {int}:
        raise PcspecError(f"field {key!r} must be a list of integers")
    return tuple(v)


def _tokens(op: dict[str, Any], key: str, v: tuple[int, ...]) -> tuple[int, ...]:
    if v and (min(v) < 0 or max(v) > TOKEN_MAX):
        i, t = next((i, t) for i, t in enumerate(v) if not 0 <= t <= TOKEN_MAX)
        raise PcspecError(f"field {key!r} must hold token ids 0..{TOKEN_MAX} (got {t} at index {i})")
    return v


def _str(op: dict[str, Any], key: str) -> str:
    v = op.get(key)
    if not isinstance(v, str) or not v:
        raise PcspecError(f"field {key!r} must be a non-empty string (got {v!r})")
    return v


TASK_TYPES = tuple(x.value for x in TaskType)


def validate(op: object) -> dict[str, Any]:
    """Check an operation's shape; returns it (as a dict) or raises ``PcspecError``."""
    if not isinstance(op, dict):
        raise PcspecError("an operation must be a JSON object")
    name = op.get("op")
    if name not in OPS:
        raise PcspecError(f"unknown op {name!r}; valid ops: {', '.join(OPS)}")
    if name == "request":
        _tokens(op, "tokens", _ints(op, "tokens"))
        spans = _ints(op, "spans", [])
        if list(spans) != sorted(set(spans)):
            raise PcspecError("field 'spans' must be strictly increasing positions")
        _int(op, "n_predict", 4, lo=1)
        _int(op, "id_slot", -1, lo=-1)
        if not isinstance(op.get("cache_prompt", True), bool):
            raise PcspecError("field 'cache_prompt' must be true or false")
        kind = op.get("type", "completion")
        if kind not in TASK_TYPES:
            raise PcspecError(f"field 'type' must be one of {', '.join(TASK_TYPES)} (got {kind!r})")
        if not isinstance(op.get("chat", False), bool):
            raise PcspecError("field 'chat' must be true or false")
    elif name == "request_group":
        prompts = op.get("prompts")
        if not isinstance(prompts, list) or not prompts:
            raise PcspecError("field 'prompts' must be a non-empty list of token lists")
        for i, p in enumerate(prompts):
            key = f"prompts[{i}]"
            _tokens(op, key, _ints({key: p}, key))
    elif name == "run":
        if _int(op, "max_steps", 10_000, lo=1) > MAX_RUN_STEPS:
            raise PcspecError(f"field 'max_steps' must be at most {MAX_RUN_STEPS} (got {op['max_steps']})")
    elif name == "inject":
        site = _str(op, "site")
        if site not in Faults.SITES:
            raise PcspecError(f"unknown fault site {site!r}; valid sites: {', '.join(Faults.SITES)}")
        _int(op, "count", 1, lo=1)
    elif name in ("slot_save", "slot_restore"):
        _int(op, "id_slot", lo=0)
        _str(op, "filename")
    elif name == "slot_erase":
        _int(op, "id_slot", lo=0)
    elif name == "restart":
        changes = op.get("config", {})
        if not isinstance(changes, dict):
            raise PcspecError("field 'config' must be an object of flags to change")
        for key in changes:
            if key not in RESTART_FIELDS:
                raise PcspecError(f"field 'config' may change {', '.join(RESTART_FIELDS)} (got {key!r})")
            _int(changes, key, lo=-1 if key == "cache_ram" else 0)
    elif name == "corrupt_file":
        _str(op, "filename")
        if "truncate" in op:
            _int(op, "truncate", lo=0)
        elif "field" in op:
            _str(op, "field")
            _int(op, "value", lo=0)
        else:
            _int(op, "offset", lo=0)
            if "remove" in op:
                _int(op, "remove", lo=0)
            data = _ints(op, "data")
            if any(not 0 <= b <= 255 for b in data):
                raise PcspecError("field 'data' must hold bytes (0..255)")
    return op


def apply(srv: Server, op: dict[str, Any]) -> Iterator[None]:
    """Apply one operation; yields after every model operation it performs (a ``run`` is
    many steps), so that callers can judge the properties after each."""
    op = validate(op)
    name = op["op"]
    if name in ("slot_save", "slot_restore", "slot_erase") and _int(op, "id_slot") >= srv.cfg.n_slots:
        raise PcspecError(f"field 'id_slot' is {op['id_slot']} but the server has {srv.cfg.n_slots} slot(s)")
    if name == "run":
        for _ in range(op.get("max_steps", 10_000)):
            if srv.idle or srv.crash is not None:
                return
            srv.step()
            yield
        return
    # (plain dispatch: this runs once per fuzzing step)
    if name == "step":
        srv.step()
    elif name == "request":
        srv.request(
            tuple(op["tokens"]),
            tuple(op.get("spans", [])),
            op.get("n_predict", 4),
            op.get("id_slot", -1),
            op.get("cache_prompt", True),
            TaskType(op.get("type", "completion")),
            op.get("chat", False),
        )
    elif name == "request_group":
        srv.request_group([tuple(p) for p in op["prompts"]])
    elif name == "inject":
        srv.inject(op["site"], op.get("count", 1))
    elif name in ("slot_save", "slot_restore"):
        srv.slot_action(name[5:], op["id_slot"], op["filename"])
    elif name == "slot_erase":
        srv.slot_action("erase", op["id_slot"])
    elif name == "corrupt_file":
        srv.corrupt_file(
            op["filename"],
            op.get("offset", 0),
            bytes(op.get("data", [])),
            op.get("truncate"),
            op.get("field"),
            op.get("value", 0),
            op.get("remove"),
        )
    elif name == "restart":
        srv.restart(**op.get("config", {}))
    else:  # sleep_wake (validate() admitted nothing else)
        srv.sleep_wake()
    yield
