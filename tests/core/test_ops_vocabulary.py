"""The operation vocabulary (pcspec/core/ops.py): one frozen dataclass per server action, read
from JSON with every field checked, written back as what differs from the defaults; and every
driver of the model applies them through the one loop (pcspec/core/loop.py)."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.core import ops
from pcspec.core.errors import PcspecError
from pcspec.core.trace import load
from tests.support.paths import DATA, ROOT

# One of each kind with every field away from its default (the round trip must keep them all).
SAMPLES: tuple[ops.Operation, ...] = (
    ops.Request((1, 2, 3), 7, spans=(1,), id_slot=1, cache_prompt=False, type="decision", chat=True),
    ops.RequestGroup(((1, 2), (1, 3))),
    ops.Step(),
    ops.Run(12),
    ops.Inject("ckpt.alloc", 2),
    ops.SlotSave(1, "a.bin"),
    ops.SlotRestore(1, "a.bin"),
    ops.SlotErase(1),
    ops.CorruptFile("a.bin", offset=3, data=(1, 2), remove=1),
    ops.CorruptFile("a.bin", truncate=9),
    ops.CorruptFile("a.bin", field="tokens marker", value=4),
    ops.SleepWake(),
    ops.Restart.of(n_slots=2, n_ctx_checkpoints=3),
)


def test_every_kind_has_a_sample_and_a_json_name() -> None:
    assert {type(s) for s in SAMPLES} == set(ops.KINDS)
    assert tuple(k.OP for k in ops.KINDS) == ops.OPS


@pytest.mark.parametrize("op", SAMPLES, ids=lambda o: o.OP)
def test_json_round_trip(op: ops.Operation) -> None:
    text = json.dumps(op.to_json())
    assert ops.parse(json.loads(text)) == op


def test_defaults_are_left_out_and_read_back() -> None:
    assert ops.Request((5,)).to_json() == {"op": "request", "tokens": [5]}
    assert ops.Run().to_json() == {"op": "run"}
    assert ops.parse({"op": "request", "tokens": [5], "n_predict": 4, "id_slot": -1}) == ops.Request((5,))


def test_operations_are_values() -> None:
    op = ops.Request((1,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.n_predict = 9  # type: ignore[misc]
    assert hash(op) == hash(ops.Request((1,)))


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({"op": "request", "tokens": [1], "n_predcit": 3}, "op 'request' has no field 'n_predcit'"),
        ({"op": "step", "max_steps": 3}, "op 'step' has no field 'max_steps'"),
        ({"op": "requets", "tokens": [1]}, "unknown op 'requets'"),
        ({"op": "request", "tokens": [1, -2]}, "field 'tokens' must hold token ids"),
        ({"op": "request_group", "prompts": [[1], ["x"]]}, "field 'prompts[1]' must be a list of integers"),
        ({"op": "inject", "site": "nowhere"}, "unknown fault site 'nowhere'"),
        ({"op": "restart", "config": {"n_slot": 2}}, "field 'config' may change"),
        ([1, 2], "an operation must be a JSON object"),
    ],
)
def test_a_wrong_field_is_named(raw: object, why: str) -> None:
    with pytest.raises(PcspecError, match="^" + why.replace("[", r"\[").replace("]", r"\]")):
        ops.parse(raw)


def test_a_misspelt_field_in_a_trace_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    head = {"schema": 1, "kind": "pcspec-trace", "variant": "baseline", "config": {}}
    path.write_text(json.dumps(head) + "\n" + json.dumps({"op": "request", "tokens": [1], "id_slto": 0}) + "\n")
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"pcspec: error: {path}: line 2: op 'request' has no field 'id_slto'; its fields: "
                   "cache_prompt, chat, id_slot, n_predict, spans, tokens, type"]


def test_every_committed_trace_reads_and_writes_back_the_same_operations() -> None:
    """The trace files written before the vocabulary was typed still read; written again, each
    line holds the same operation (defaults given explicitly may be left out)."""
    paths = [p for p in DATA.rglob("*.jsonl") if p.read_text().startswith('{"') and '"pcspec-trace"' in
             p.read_text().split("\n", 1)[0]]
    assert len(paths) > 100
    for p in paths:
        trace = load(p)
        again = [ops.parse(json.loads(line)) for line in trace.dumps().splitlines()[1:]]
        assert again == trace.ops, p


def _calls_of_ops_apply(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "pcspec.core"
             for a in n.names if a.name == "ops"}
    direct = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
              and n.module == "pcspec.core.ops" for a in n.names if a.name == "apply"}
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if (isinstance(f, ast.Attribute) and f.attr == "apply" and isinstance(f.value, ast.Name)
                and f.value.id in names) or (isinstance(f, ast.Name) and f.id in direct):
            out.append(n.lineno)
    return out


def test_only_the_one_loop_applies_operations() -> None:
    """Every driver of the model goes through ``pcspec.core.loop`` (apply, replay, Driver):
    the vocabulary's own ``apply`` is called there and nowhere else in the package."""
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted((ROOT / "pcspec").rglob("*.py"))
        if p.is_file() and (lines := _calls_of_ops_apply(p))
    }
    assert set(found) == {"pcspec/core/loop.py"}, found


def test_the_check_sees_a_side_door(tmp_path: Path) -> None:
    side = tmp_path / "side.py"
    side.write_text("from pcspec.core import ops as o\nfor _ in o.apply(srv, op):\n    pass\n")
    assert _calls_of_ops_apply(side) == [2]
