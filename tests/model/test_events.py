"""The event vocabulary (``pcspec.model.events``): one frozen class per kind, the heap stamps
``op``, the JSON form is what it was when events were a kind and a dictionary, and the events
the server logs too give the records the log checker reads from the log."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re

import pytest

from pcspec.live.predict import model_records
from pcspec.logcheck import parse_text
from pcspec.logcheck.logged import logged as log_records
from pcspec.model import events as ev
from pcspec.model import logged as lg
from pcspec.model.config import Config
from pcspec.model.designs import DESIGNS
from pcspec.model.heap import Heap
from pcspec.model.server import Server


def _erase(**extra: object) -> ev.CkptErase:
    return ev.CkptErase(slot=0, ckpt=3, reason="invalidated", task=1, restored_by_task=False, n_tokens=8,
                        list_len=2, **extra)  # type: ignore[arg-type]


def test_one_class_per_kind_each_naming_its_place() -> None:
    kinds = [t.kind for t in ev.EVENT_TYPES]
    assert len(set(kinds)) == len(kinds) and set(ev.BY_KIND) == set(kinds)
    for t in (*ev.EVENT_TYPES, *lg.LOGGED_TYPES):
        params = t.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and "__slots__" in t.__dict__, t
        doc = t.__doc__ or ""
        assert re.search(r"\.(cpp|h):\d+|[Mm]odel-only|#\d{5}|livelock", doc), f"{t.__name__}: {doc!r}"


def test_the_heap_stamps_op_and_events_stay_frozen() -> None:
    heap = Heap(host_ram=1 << 20)
    heap.op = 7
    e = ev.Free(buf=1, size=2)
    heap.emit(e)
    assert heap.events == [e] and e.op == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.size = 3  # type: ignore[misc]
    for c in (copy.copy(e), copy.deepcopy(e), pickle.loads(pickle.dumps(e))):
        assert c == e and c.op == 7


def test_json_form_omits_what_an_emission_left_out() -> None:
    e = _erase(pos_max=9, pos_next=8, n_prefix=8)
    ev.stamp(e, 4)
    assert list(e.to_json().items()) == [
        ("op", 4), ("kind", "ckpt_erase"), ("slot", 0), ("ckpt", 3), ("reason", "invalidated"), ("task", 1),
        ("restored_by_task", False), ("n_tokens", 8), ("list_len", 2), ("pos_max", 9), ("pos_next", 8),
        ("n_prefix", 8),
    ]
    cause = _erase(cause="seq_rm refused")
    ev.stamp(cause, 4)
    assert list(cause.to_json())[-1] == "cause" and "pos_max" not in cause.to_json()
    release = ev.Release(slot=0, task=1, n_tokens=5, error=None, token=None)  # None kept: not optional
    ev.stamp(release, 1)
    assert release.to_json() == {"op": 1, "kind": "release", "slot": 0, "task": 1, "n_tokens": 5, "error": None,
                                 "token": None}


def test_operations_and_restarts_keep_their_arguments_as_fields() -> None:
    srv = Server(Config(n_slots=2), DESIGNS["fixed"])
    srv.request((1, 2, 3), n_predict=1)
    srv.restart(n_slots=1)
    ops = [e.to_json() for e in srv.heap.events if isinstance(e, ev.Op | ev.Restart)]
    assert ops == [
        {"op": 1, "kind": "op", "name": "request", "task": 0, "n_tokens": 3, "id_slot": -1},
        {"op": 2, "kind": "op", "name": "restart", "n_slots": 1},
        {"op": 2, "kind": "restart", "n_slots": 1},
    ]


def test_logged_records_of_model_events() -> None:
    evict = ev.EntryEvict(entry=1, reason="loaded", n_tokens=0, loaded_tokens=30)
    assert evict.logged() == lg.CacheLoaded(30)
    assert ev.EntryEvict(entry=1, reason="make_room", n_tokens=9, unique_total=1, limit=1).logged() == lg.CacheEvicted(
        "make_room", 9
    )
    assert ev.EntryEvict(entry=1, reason="pop_back", n_tokens=9).logged() is None
    assert _erase().logged() == lg.CkptErased(0, "invalidated", 8)
    assert ev.Free(buf=1, size=2).logged() is None
    sel = ev.Select(task=3, slot=0, how="lcp", update_cache=False, prompt=(1,), task_type="completion")
    # a pinned task is logged "by id" even where the similarity scan confirmed the slot
    assert model_records([sel]) == [lg.Selected(0, "lcp")]
    assert model_records([sel], {3}) == [lg.Selected(0, "id")]
    no_slot = dataclasses.replace(sel, slot=None, how="none")
    assert model_records([no_slot]) == []


def test_the_log_gives_the_same_classes() -> None:
    text = (
        "0.00.499.422 I slot get_availabl: id  0 | task -1 | selected slot by LRU, t_last = -1\n"
        "0.00.538.652 I srv   prompt_save:  - saving prompt with length 12, total state size = 0.321 MiB"
        " (draft: 0.000 MiB)\n"
        "0.00.509.424 I slot create_check: id  0 | task 0 | created context checkpoint 1 of 8 (pos_min = 0,"
        " pos_max = 9, n_tokens = 10, size = 0.016 MiB)\n"
        "0.00.536.866 I slot      release: id  0 | task 0 | stop processing: n_tokens = 14, truncated = 0\n"
    )
    recs = list(log_records(parse_text(text).events))
    assert recs == [lg.Selected(0, "lru"), lg.CacheSaved(12), lg.CkptCreated(0, 10, 0, 9), lg.Released(0, 14)]
    model = [lg.Selected(0, "lru"), lg.CacheSaved(12), lg.CkptCreated(0, 10, None, 9), lg.Released(0, 14)]
    assert all(a.matches(b) for a, b in zip(recs, model, strict=True))
