"""The operation vocabulary: one frozen dataclass per server action, applied to a ``Server``.

This is what trace files, the fuzzing rules, the shrinker, the live checker's predictions and
the conformance kit's lowering share. An operation is a value (``Request``, ``Step``, ...);
``parse`` makes one of a JSON object, checking every field (an unknown field, a typo included,
is refused naming it), and ``to_json`` gives the object back with the fields that differ from
their defaults (a ``restart``'s ``config`` always). A trace line is that object.

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

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self, TypeAlias

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
TASK_TYPES = tuple(x.value for x in TaskType)

JsonOp: TypeAlias = dict[str, Any]


# -- the field checks ------------------------------------------------------------------------


def _int(d: Mapping[str, Any], key: str, default: int | None = None, lo: int | None = None) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise PcspecError(f"field {key!r} must be an integer (got {v!r})")
    if lo is not None and v < lo:
        raise PcspecError(f"field {key!r} must be >= {lo} (got {v})")
    return v


def _ints(d: Mapping[str, Any], key: str, default: list[int] | None = None) -> tuple[int, ...]:
    v = d.get(key, default)
    # ``set(map(type, v))`` runs in C: a request of millions of tokens is checked in
    # milliseconds (a generator over ``isinstance`` took seconds). ``bool`` is its own type.
    if not isinstance(v, list | tuple) or not set(map(type, v)) <= {int}:
        raise PcspecError(f"field {key!r} must be a list of integers")
    return tuple(v)


def _tokens(key: str, v: tuple[int, ...]) -> tuple[int, ...]:
    if v and (min(v) < 0 or max(v) > TOKEN_MAX):
        i, t = next((i, t) for i, t in enumerate(v) if not 0 <= t <= TOKEN_MAX)
        raise PcspecError(f"field {key!r} must hold token ids 0..{TOKEN_MAX} (got {t} at index {i})")
    return v


def _str(d: Mapping[str, Any], key: str) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v:
        raise PcspecError(f"field {key!r} must be a non-empty string (got {v!r})")
    return v


def _bool(d: Mapping[str, Any], key: str, default: bool) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise PcspecError(f"field {key!r} must be true or false")
    return v


# -- the operations --------------------------------------------------------------------------
# Each class's ``OP`` is its JSON name; ``_parse`` checks a JSON object's fields (``parse``
# has already refused a field the class does not have); ``to_json`` writes what differs from
# the defaults. ``__post_init__`` is not used: a value built in code is trusted as the fuzzing
# rules build millions of them, and one read from a file always goes through ``parse``.


@dataclass(frozen=True, slots=True)
class Request:
    """``POST /completion`` (or a chat request, or a decision task): ``Server.request``."""

    OP: ClassVar[str] = "request"
    tokens: tuple[int, ...]
    n_predict: int = 4
    spans: tuple[int, ...] = ()
    id_slot: int = -1
    cache_prompt: bool = True
    type: str = "completion"
    chat: bool = False

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> Request:
        spans = _ints(d, "spans", [])
        if list(spans) != sorted(set(spans)):
            raise PcspecError("field 'spans' must be strictly increasing positions")
        kind = d.get("type", "completion")
        if kind not in TASK_TYPES:
            raise PcspecError(f"field 'type' must be one of {', '.join(TASK_TYPES)} (got {kind!r})")
        return cls(
            _tokens("tokens", _ints(d, "tokens")),
            _int(d, "n_predict", 4, lo=1),
            spans,
            _int(d, "id_slot", -1, lo=-1),
            _bool(d, "cache_prompt", True),
            kind,
            _bool(d, "chat", False),
        )

    def to_json(self) -> JsonOp:
        d: JsonOp = {"op": self.OP, "tokens": list(self.tokens)}
        if self.n_predict != 4:
            d["n_predict"] = self.n_predict
        if self.spans:
            d["spans"] = list(self.spans)
        if self.id_slot != -1:
            d["id_slot"] = self.id_slot
        if not self.cache_prompt:
            d["cache_prompt"] = False
        if self.type != "completion":
            d["type"] = self.type
        if self.chat:
            d["chat"] = True
        return d


@dataclass(frozen=True, slots=True)
class RequestGroup:
    """One request of decision prompts: ``Server.request_group``."""

    OP: ClassVar[str] = "request_group"
    prompts: tuple[tuple[int, ...], ...]

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> RequestGroup:
        prompts = d.get("prompts")
        if not isinstance(prompts, list) or not prompts:
            raise PcspecError("field 'prompts' must be a non-empty list of token lists")
        keys = [f"prompts[{i}]" for i in range(len(prompts))]
        return cls(tuple(_tokens(k, _ints({k: p}, k)) for k, p in zip(keys, prompts, strict=True)))

    def to_json(self) -> JsonOp:
        return {"op": self.OP, "prompts": [list(p) for p in self.prompts]}


@dataclass(frozen=True, slots=True)
class Step:
    """One ``update_slots`` iteration: ``Server.step``."""

    OP: ClassVar[str] = "step"

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> Step:
        return cls()

    def to_json(self) -> JsonOp:
        return {"op": self.OP}


@dataclass(frozen=True, slots=True)
class Run:
    """Steps until the server is idle, at most ``max_steps`` (each step judged on its own)."""

    OP: ClassVar[str] = "run"
    max_steps: int = 10_000

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> Run:
        n = _int(d, "max_steps", 10_000, lo=1)
        if n > MAX_RUN_STEPS:
            raise PcspecError(f"field 'max_steps' must be at most {MAX_RUN_STEPS} (got {n})")
        return cls(n)

    def to_json(self) -> JsonOp:
        return {"op": self.OP} if self.max_steps == 10_000 else {"op": self.OP, "max_steps": self.max_steps}


@dataclass(frozen=True, slots=True)
class Inject:
    """Arm a one-shot fault at ``site`` (``Faults.SITES``): ``Server.inject``."""

    OP: ClassVar[str] = "inject"
    site: str
    count: int = 1

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> Inject:
        site = _str(d, "site")
        if site not in Faults.SITES:
            raise PcspecError(f"unknown fault site {site!r}; valid sites: {', '.join(Faults.SITES)}")
        return cls(site, _int(d, "count", 1, lo=1))

    def to_json(self) -> JsonOp:
        return {"op": self.OP, "site": self.site} | ({"count": self.count} if self.count != 1 else {})


@dataclass(frozen=True, slots=True)
class _SlotFile:
    """A ``/slots`` action on a file: the slot and the file's name in the slot-save directory."""

    OP: ClassVar[str]
    id_slot: int
    filename: str

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> Self:
        return cls(_int(d, "id_slot", lo=0), _str(d, "filename"))

    def to_json(self) -> JsonOp:
        return {"op": self.OP, "id_slot": self.id_slot, "filename": self.filename}


@dataclass(frozen=True, slots=True)
class SlotSave(_SlotFile):
    """``POST /slots/{id}?action=save``: ``Server.slot_action("save", ...)``."""

    OP: ClassVar[str] = "slot_save"


@dataclass(frozen=True, slots=True)
class SlotRestore(_SlotFile):
    """``POST /slots/{id}?action=restore``: ``Server.slot_action("restore", ...)``."""

    OP: ClassVar[str] = "slot_restore"


@dataclass(frozen=True, slots=True)
class SlotErase:
    """``POST /slots/{id}?action=erase``: ``Server.slot_action("erase", ...)``."""

    OP: ClassVar[str] = "slot_erase"
    id_slot: int

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> SlotErase:
        return cls(_int(d, "id_slot", lo=0))

    def to_json(self) -> JsonOp:
        return {"op": self.OP, "id_slot": self.id_slot}


@dataclass(frozen=True, slots=True)
class CorruptFile:
    """Damage a slot file: ``Server.corrupt_file``. One of three forms: ``truncate``; ``field``
    + ``value``; ``offset`` + ``data`` (with ``remove``: a splice)."""

    OP: ClassVar[str] = "corrupt_file"
    filename: str
    offset: int = 0
    data: tuple[int, ...] = ()
    truncate: int | None = None
    field: str | None = None
    value: int = 0
    remove: int | None = None

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> CorruptFile:
        name = _str(d, "filename")
        if "truncate" in d:
            return cls(name, truncate=_int(d, "truncate", lo=0))
        if "field" in d:
            return cls(name, field=_str(d, "field"), value=_int(d, "value", lo=0))
        data = _ints(d, "data")
        if any(not 0 <= b <= 255 for b in data):
            raise PcspecError("field 'data' must hold bytes (0..255)")
        remove = _int(d, "remove", lo=0) if "remove" in d else None
        return cls(name, offset=_int(d, "offset", lo=0), data=data, remove=remove)

    def to_json(self) -> JsonOp:
        d: JsonOp = {"op": self.OP, "filename": self.filename}
        if self.truncate is not None:
            d["truncate"] = self.truncate
        elif self.field is not None:
            d["field"], d["value"] = self.field, self.value
        else:
            d["offset"], d["data"] = self.offset, list(self.data)
            if self.remove is not None:
                d["remove"] = self.remove
        return d


@dataclass(frozen=True, slots=True)
class SleepWake:
    """``--sleep-idle-seconds``: sleep, then wake: ``Server.sleep_wake``."""

    OP: ClassVar[str] = "sleep_wake"

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> SleepWake:
        return cls()

    def to_json(self) -> JsonOp:
        return {"op": self.OP}


@dataclass(frozen=True, slots=True)
class Restart:
    """The process restarts, ``config`` changing flags of ``RESTART_FIELDS``: ``Server.restart``."""

    OP: ClassVar[str] = "restart"
    config: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, **changes: int) -> Restart:
        return cls(tuple(changes.items()))

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> Restart:
        changes = d.get("config", {})
        if not isinstance(changes, dict):
            raise PcspecError("field 'config' must be an object of flags to change")
        for key in changes:
            if key not in RESTART_FIELDS:
                raise PcspecError(f"field 'config' may change {', '.join(RESTART_FIELDS)} (got {key!r})")
            _int(changes, key, lo=-1 if key == "cache_ram" else 0)
        return cls(tuple(changes.items()))

    def to_json(self) -> JsonOp:
        return {"op": self.OP, "config": dict(self.config)}


Operation: TypeAlias = (
    Request | RequestGroup | Step | Run | Inject
    | SlotSave | SlotRestore | SlotErase | CorruptFile
    | SleepWake | Restart
)
KINDS: tuple[type[Operation], ...] = (
    Request, RequestGroup, Step, Run, Inject, SlotSave, SlotRestore, SlotErase, CorruptFile, SleepWake, Restart,
)
BY_OP: dict[str, type[Operation]] = {k.OP: k for k in KINDS}
OPS = tuple(BY_OP)
_FIELDS: dict[str, frozenset[str]] = {k.OP: frozenset(f.name for f in fields(k)) | {"op"} for k in KINDS}


def parse(d: object) -> Operation:
    """The operation a JSON object stands for, every field checked; ``PcspecError`` names the
    first field that is wrong (a field the operation does not have, too)."""
    if isinstance(d, Operation):  # already one: its fields were checked when it was read or built
        return d
    if not isinstance(d, dict):
        raise PcspecError("an operation must be a JSON object")
    name = d.get("op")
    kind = BY_OP.get(name) if isinstance(name, str) else None
    if kind is None:
        raise PcspecError(f"unknown op {name!r}; valid ops: {', '.join(OPS)}")
    extra = sorted(k for k in d if k not in _FIELDS[kind.OP])
    if extra:
        known = sorted(_FIELDS[kind.OP] - {"op"})
        raise PcspecError(
            f"op {kind.OP!r} has no field {extra[0]!r}" + (f"; its fields: {', '.join(known)}" if known else "")
        )
    return kind._parse(d)


def _slot_action(srv: Server, op: SlotSave | SlotRestore | SlotErase) -> None:
    if op.id_slot >= srv.cfg.n_slots:
        raise PcspecError(f"field 'id_slot' is {op.id_slot} but the server has {srv.cfg.n_slots} slot(s)")
    filename = "" if isinstance(op, SlotErase) else op.filename
    srv.slot_action(op.OP.removeprefix("slot_"), op.id_slot, filename)


def _request(srv: Server, op: Request) -> None:
    srv.request(op.tokens, op.spans, op.n_predict, op.id_slot, op.cache_prompt, TaskType(op.type), op.chat)


def _corrupt(srv: Server, op: CorruptFile) -> None:
    srv.corrupt_file(op.filename, op.offset, bytes(op.data), op.truncate, op.field, op.value, op.remove)


# One model operation each (``run`` is many steps, and is applied by ``apply`` itself).
_APPLY: dict[type[Operation], Callable[[Server, Any], object]] = {
    Request: _request,
    RequestGroup: lambda srv, op: srv.request_group(op.prompts),
    Step: lambda srv, _op: srv.step(),
    Inject: lambda srv, op: srv.inject(op.site, op.count),
    SlotSave: _slot_action,
    SlotRestore: _slot_action,
    SlotErase: _slot_action,
    CorruptFile: _corrupt,
    SleepWake: lambda srv, _op: srv.sleep_wake(),
    Restart: lambda srv, op: srv.restart(**dict(op.config)),
}


def apply(srv: Server, op: Operation) -> Iterator[None]:
    """Apply one operation; yields after every model operation it performs (a ``run`` is
    many steps), so that callers can judge the properties after each."""
    if isinstance(op, Run):
        for _ in range(op.max_steps):
            if srv.idle or srv.crash is not None:
                return
            srv.step()
            yield
        return
    _APPLY[type(op)](srv, op)
    yield


__all__ = [
    "KINDS",
    "OPS",
    "CorruptFile",
    "Inject",
    "JsonOp",
    "Operation",
    "Request",
    "RequestGroup",
    "Restart",
    "Run",
    "SleepWake",
    "SlotErase",
    "SlotRestore",
    "SlotSave",
    "Step",
    "apply",
    "parse",
]
