"""Invalid configurations are rejected with a ``PcspecError`` that names the field.

``Config.validate`` (and ``Server``, which validates), and ``Config.from_json`` for
configurations that come from a trace header or a file: unknown keys and wrong JSON types.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pcspec.core.errors import PcspecError
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server

INVALID: list[tuple[dict[str, Any], tuple[str, ...]]] = [
    ({"cache_ram": -2}, ("cache_ram",)),
    ({"cache_ram": -(1 << 30)}, ("cache_ram",)),
    ({"host_ram": 0}, ("host_ram",)),
    ({"host_ram": -1}, ("host_ram",)),
    ({"n_ctx_checkpoints": -1}, ("n_ctx_checkpoints",)),
    ({"checkpoint_min_step": -1}, ("checkpoint_min_step",)),
    ({"spec_bytes": 64}, ("spec_bytes", "has_draft")),
    ({"spec_bytes": -1, "has_draft": True}, ("spec_bytes",)),
    ({"n_batch": 16, "n_ubatch": 32}, ("n_ubatch", "n_batch")),
    ({"n_ubatch": 0}, ("n_ubatch",)),
    ({"n_batch": 0, "n_ubatch": 0}, ("n_batch",)),
    ({"n_slots": 0}, ("n_slots",)),
    ({"n_ctx_slot": 4}, ("n_ctx_slot",)),
    ({"n_swa": -1, "memory": MemoryKind.KV}, ("n_swa",)),
    ({"memory": MemoryKind.SWA, "n_swa": 0}, ("n_swa",)),
    ({"memory": MemoryKind.SWA, "n_swa": 64, "swa_cells": 32}, ("swa_cells", "n_swa")),
    ({"n_rs_seq": -1}, ("n_rs_seq",)),
    ({"cell_bytes": 0}, ("cell_bytes",)),
    ({"rs_bytes": -5}, ("rs_bytes",)),
    ({"draft_cell_bytes": 0}, ("draft_cell_bytes",)),
    ({"slot_prompt_similarity": 1.5}, ("slot_prompt_similarity",)),
    ({"slot_prompt_similarity": -0.1}, ("slot_prompt_similarity",)),
]


def ids(case: tuple[dict[str, Any], tuple[str, ...]]) -> str:
    return ",".join(f"{k}={v}" for k, v in case[0].items())


@pytest.mark.parametrize("case", INVALID, ids=[ids(c) for c in INVALID])
def test_validate_rejects_and_names_the_field(case: tuple[dict[str, Any], tuple[str, ...]]) -> None:
    kwargs, names = case
    with pytest.raises(PcspecError) as info:
        Config(**kwargs).validate()
    for name in names:
        assert name in str(info.value)


@pytest.mark.parametrize("case", INVALID, ids=[ids(c) for c in INVALID])
def test_server_refuses_invalid_config(case: tuple[dict[str, Any], tuple[str, ...]]) -> None:
    kwargs, names = case
    with pytest.raises(PcspecError) as info:
        Server(Config(**kwargs), DESIGNS["fixed"])
    assert names[0] in str(info.value)


@pytest.mark.parametrize("case", INVALID, ids=[ids(c) for c in INVALID])
def test_from_json_rejects_invalid_values(case: tuple[dict[str, Any], tuple[str, ...]]) -> None:
    kwargs, names = case
    data = json.loads(
        json.dumps({k: str(v) if isinstance(v, MemoryKind) else v for k, v in kwargs.items()})
    )
    with pytest.raises(PcspecError) as info:
        Config.from_json(data, where="trace.jsonl:1")
    assert names[0] in str(info.value)
    assert info.value.where == "trace.jsonl:1"


def test_all_problems_reported_together() -> None:
    with pytest.raises(PcspecError) as info:
        Config(cache_ram=-7, n_ctx_checkpoints=-1, spec_bytes=8).validate()
    message = str(info.value)
    for name in ("cache_ram", "n_ctx_checkpoints", "spec_bytes"):
        assert name in message


@pytest.mark.parametrize("cache_ram", [-1, 0, 1, 8192 * 1024 * 1024])
def test_cache_ram_special_values_are_valid(cache_ram: int) -> None:
    cfg = Config(cache_ram=cache_ram).validate()
    assert cfg.limit_size == max(0, cache_ram)
    assert cfg.cache_enabled == (cache_ram != 0)


def test_spec_bytes_with_draft_is_valid() -> None:
    Config(has_draft=True, spec_bytes=64).validate()
    Config(n_ctx_checkpoints=0, checkpoint_min_step=0).validate()


@pytest.mark.parametrize("keys", [["cache_mib"], ["ctx_checkpoints", "n_parallel"]])
def test_from_json_rejects_unknown_keys(keys: list[str]) -> None:
    data: dict[str, Any] = {"n_slots": 2, **dict.fromkeys(keys, 1)}
    with pytest.raises(PcspecError) as info:
        Config.from_json(data, where="cfg.json")
    for key in keys:
        assert key in info.value.why
    assert "n_slots" in info.value.why  # the valid keys are listed
    assert info.value.where == "cfg.json"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("n_batch", "16"),
        ("n_batch", 16.5),
        ("n_batch", True),
        ("n_batch", None),
        ("cache_ram", [1024]),
        ("has_draft", 1),
        ("has_draft", "true"),
        ("kv_unified", None),
        ("memory", "mamba"),
        ("memory", 3),
        ("draft_memory", "transformer"),
        ("slot_prompt_similarity", "0.1"),
        ("slot_prompt_similarity", False),
    ],
)
def test_from_json_rejects_wrong_types(key: str, value: object) -> None:
    with pytest.raises(PcspecError) as info:
        Config.from_json({key: value}, where="trace.jsonl:1")
    assert key in info.value.why
    assert info.value.where == "trace.jsonl:1"
    assert str(info.value).startswith("trace.jsonl:1: ")


@pytest.mark.parametrize("data", [[], "n_slots=2", 3, None])
def test_from_json_rejects_non_objects(data: object) -> None:
    with pytest.raises(PcspecError):
        Config.from_json(data)


def test_json_round_trip() -> None:
    cfg = Config(
        n_slots=3,
        memory=MemoryKind.HYBRID,
        has_draft=True,
        draft_memory=MemoryKind.RECURRENT,
        spec_bytes=32,
        cache_ram=-1,
        slot_prompt_similarity=0.25,
    )
    text = json.dumps(cfg.to_json())
    assert Config.from_json(json.loads(text)) == cfg
    # An integer where a float is expected is a number too.
    assert Config.from_json({"slot_prompt_similarity": 0}).slot_prompt_similarity == 0.0
