"""The pieces of the conformance kit: states as bytes, canonical comparison, the lowering's
fault attribution, the judge, and a port that misbehaves."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pcspec.conform import golden
from pcspec.conform.canon import Canon, differences
from pcspec.conform.judge import Judge
from pcspec.conform.lower import lower
from pcspec.conform.protocol import decode_state, encode_state
from pcspec.conform.scenarios import BASE_CONFIG, base_scenarios, chat
from pcspec.conform.session import Session, sanitizer_findings
from pcspec.core.trace import Trace
from pcspec.model.designs import DESIGNS

FIXED = DESIGNS["fixed"]
CASE = next(c for c in golden.cases() if c.name == "base")


def test_states_as_bytes() -> None:
    for tag, size in ((1, 16), (258, 80), (70000, 5), (3, 2), (0, 9)):
        data = encode_state(tag, size)
        assert len(data) == size
        assert decode_state(data) == (tag if size >= 4 else tag & ((1 << (8 * size)) - 1))
    half = bytearray(encode_state(7, 16))
    half[8:] = bytes(8)
    assert decode_state(half) is None
    assert decode_state(bytes(16)) is None
    assert decode_state(b"") is None


def test_canonical_comparison_ignores_ids_and_event_order() -> None:
    obs = CASE.expect[5]
    shifted = {
        **obs,
        "events": list(reversed(obs["events"])),
        "slots": [{**s, "ckpts": [c + 100 for c in s["ckpts"]],
                   "restored": None if s["restored"] is None else s["restored"] + 100} for s in obs["slots"]],
        "ckpts": [{**c, "id": c["id"] + 100} for c in reversed(obs["ckpts"])],
        "entries": [{**e, "id": e["id"] + 7, "ckpts": [c + 100 for c in e["ckpts"]]} for e in obs["entries"]],
    }
    for k, ev in enumerate(shifted["events"]):
        if "ckpt" in ev:
            shifted["events"][k] = {**ev, "ckpt": ev["ckpt"] + 100}
        if ev.get("entry") is not None:
            shifted["events"][k] = {**shifted["events"][k], "entry": ev["entry"] + 7}
    assert Canon()(shifted) == Canon()(obs)


def test_differences_name_the_field() -> None:
    want = Canon()(CASE.expect[3])
    got = {**want, "accounted": want["accounted"] + 1, "slots": [{**want["slots"][0], "tokens": [9]}]}
    found = differences(want, got, 3)
    assert [f.rule for f in found] == ["slots[0].tokens", "accounted"]
    assert {(f.kind, f.at) for f in found} == {("divergence", 3)}
    assert found[1].to_json() == {"property": "accounted", "op": 3, "message": "the port differs at accounted",
                                  "expected": want["accounted"], "port": want["accounted"] + 1}


def test_faults_are_attached_to_the_operation_that_reaches_them() -> None:
    ops = chat()
    ops.insert(4, {"op": "inject", "site": "save.read.tgt"})
    low = lower(Trace(FIXED, BASE_CONFIG, ops))
    faulted = [(op["op"], op["faults"]) for op in low.ops if "faults" in op]
    assert faulted == [("save", ["save.read.tgt"])]
    i = next(i for i, op in enumerate(low.ops) if "faults" in op)
    kinds = [e["kind"] for e in low.expect[i]["events"]]
    assert kinds == ["save_fill_short", "save_end"]


def test_lowering_keeps_the_model_in_step() -> None:
    low = lower(Trace(FIXED, BASE_CONFIG, chat()))
    assert low.crash is None and len(low.ops) == len(low.expect) == len(low.origin)
    assert {op["op"] for op in low.ops} >= {"save", "load", "update", "prompt_start", "checkpoint", "tokens", "release"}


def test_a_clear_is_observed_before_a_restore_that_follows_it() -> None:
    """A slot restore a release re-queued runs right after the idle-slot save of the task the same
    release re-queued, which cleared that slot (fuzzed trace 636 of seed 0): the clear's
    observation has the slot empty, the install's has the file's tokens."""
    scenario = next(s for s in base_scenarios() if s.name == "restore-after-idle-clear")
    low = lower(scenario.trace())
    i = next(i for i, op in enumerate(low.ops) if op["op"] == "install")
    assert low.ops[i - 1] == {"op": "clear", "slot": 1}
    assert low.expect[i - 1]["slots"][1] == {"tokens": [], "ckpts": [], "restored": None}
    assert low.expect[i]["slots"][1]["tokens"] == low.ops[i]["tokens"] != []


def test_judge_names_what_an_observation_breaks() -> None:
    obs = Canon()(CASE.expect[-1])
    j = Judge(CASE.config, CASE.tags)
    assert j(0, {"op": "update"}, obs) == []
    bad = {**obs, "ckpts": [{**c, "refs": c["refs"] + 1} for c in obs["ckpts"]], "accounted": obs["accounted"] + 3}
    named = {f.property for f in Judge(CASE.config, CASE.tags)(0, {"op": "update"}, bad)}
    assert {"REF-1", "ACC-1"} <= named
    assert all(f.kind == "violation" and f.at == 0 for f in Judge(CASE.config, CASE.tags)(0, {"op": "update"}, bad))


def _judged(*steps: tuple[dict[str, Any], dict[str, Any]]) -> set[str]:
    j = Judge(CASE.config, CASE.tags)
    return {f.property for i, (op, obs) in enumerate(steps) for f in j(i, op, obs)}


def test_judge_settles_what_an_observation_leaves_open() -> None:
    """The catalogue's checks over a port's observed state (pcspec/conform/judge.py): a held
    checkpoint the port does not report, a reported one nobody holds, a copy in a saved entry,
    the token limit."""
    obs = next(o for o in CASE.expect if o["entries"] and o["slots"][0]["ckpts"] and o["entries"][0]["ckpts"])
    obs = {**obs, "events": []}
    ck = obs["ckpts"][0]
    assert _judged(({"op": "update"}, {**obs, "ckpts": obs["ckpts"][1:]})) >= {"REF-1"}  # held, not reported
    stray = {**ck, "id": 99, "refs": 0}
    assert "REF-1" in _judged(({"op": "update"}, {**obs, "ckpts": [*obs["ckpts"], stray]}))  # nobody holds it
    entry = obs["entries"][0]
    copies = {**obs, "ckpts": [*obs["ckpts"], *({**c, "id": c["id"] + 100, "refs": 1} for c in obs["ckpts"]
                                              if c["id"] in entry["ckpts"])],
              "entries": [{**entry, "ckpts": [c + 100 for c in entry["ckpts"]]}, *obs["entries"][1:]]}
    saved = {"kind": "entry_insert", "entry": entry["id"], "n_tokens": len(entry["tokens"]), "own_unique": 1,
             "unique_after": 1, "limit": obs["limit"]}
    slot = next(i for i, s in enumerate(obs["slots"]) if s["ckpts"])
    found = _judged(({"op": "update"}, obs), ({"op": "save", "slot": slot}, {**copies, "events": [saved]}))
    assert "PERF-1" in found  # the entry holds copies of the slot's checkpoints
    over = {**obs, "limit": 0}
    config = {**CASE.config, "limit_size": 0, "limit_tokens": 1}
    for op, named in (({"op": "save", "slot": 0}, False), ({"op": "update"}, True)):  # update keeps the token limit
        j = Judge(config, CASE.tags)
        assert ("LIMIT-1" in {f.property for f in j(0, op, over)}) == named, op


MISBEHAVING = [
    ("import sys; sys.exit(3)", "exited (code 3)"),
    ("print('not json', flush=True)", "not JSON"),
    ("print('{\"schema\": 2}', flush=True)", "schema 2"),
    ("import time; print('{\"schema\": 1}', flush=True); time.sleep(30)", "no answer within"),
]
# ``gone``: the race of a loaded machine made certain, the port has answered and exited before
# the kit writes the trace; its answer, not the closed pipe, is the diagnosis. (Not for the
# stalled port: it does not exit.)
CASES = [(s, w, False) for s, w in MISBEHAVING] + [(s, w, True) for s, w in MISBEHAVING[:3]]


@pytest.mark.parametrize(("script", "why", "gone"), CASES)
def test_a_misbehaving_port_is_a_divergence(tmp_path: Path, script: str, why: str, gone: bool) -> None:
    prog = tmp_path / "port.py"
    prog.write_text(script, encoding="utf-8")
    session = Session(f"{sys.executable} {prog}", timeout=2.0)
    if gone:
        session.port.proc.wait(timeout=30)
    try:
        d = session.run_one(CASE)
    finally:
        session.port.kill()
    assert d is not None and d.index == -1 and d.error is not None and why in d.error, d.error


def test_sanitizer_reports_name_properties() -> None:
    def named(text: str) -> list[str]:
        return [f.property for f in sanitizer_findings(text)]

    assert named("==1== Conditional jump or move depends on uninitialised value(s)") == ["UNINIT-1"]
    assert named("depends on uninitialised value(s)\n at llama_state_seq_set_data_ext") == ["UNINIT-2"]
    assert named("ERROR: AddressSanitizer: heap-use-after-free") == ["REF-1"]
    assert named("all fine") == []
