"""pcspec live without a server: operations, workloads, records, comparison, oracles, models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pcspec.live import build
from pcspec.live.client import Reply, completion_body
from pcspec.live.compare import diff
from pcspec.live.fuzz import LIT_MAX, LIT_MIN, Feedback, Fuzzer
from pcspec.live.ops import LiveOp, renumber, resolve
from pcspec.live.process import Flags
from pcspec.live.report import KIND, read_workload, workload_lines
from pcspec.live.schedule import read_facts, read_schedule
from pcspec.live.shrink import shrink, through, units
from pcspec.live.transparency import compare
from pcspec.logcheck import read_log
from pcspec.logcheck.logged import logged
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import get_design
from pcspec.model.events import logged as model_logged
from pcspec.model.logged import CacheLoaded, CkptCreated, CkptErased, FullReprocess, Selected
from pcspec.model.server import Server
from tests.support.paths import DATA

REAL_LOGS = DATA / "real"


def test_ops_round_trip_and_resolve() -> None:
    ops = [
        LiveOp("request", id=0, segments=(("lit", (1, 2, 3)),), n_predict=2),
        LiveOp("request", id=1, segments=(("prompt", 0), ("reply", 0), ("lit", (9,))), id_slot=1, is_async=True,
               delay_ms=5),
        LiveOp("request", id=2, segments=(("head", (1, 4)), ("lit", (7,))), cut=3, cache_prompt=False),
        LiveOp("wait"),
        LiveOp("slot_save", id_slot=0, filename="a.bin"),
        LiveOp("corrupt_file", filename="a.bin", offset=3, data=(1, 2)),
        LiveOp("corrupt_file", filename="a.bin", truncate=10),
        LiveOp("slot_erase", id_slot=0),
    ]
    again = [LiveOp.from_json(json.loads(json.dumps(op.to_json()))) for op in ops]
    assert again == ops
    prompts = {0: [1, 2, 3]}
    replies = {0: [200, 201]}
    assert resolve(ops[1], prompts, replies) == [1, 2, 3, 200, 201, 9]
    prompts[1] = resolve(ops[1], prompts, replies)
    assert resolve(ops[2], prompts, replies) == [1, 2, 3]


@pytest.mark.parametrize(("op", "says"), [
    ({"op": "request", "id": 0, "segments": [], "id_slto": 1},
     "live operation 'request' has no field 'id_slto'; its fields: id, segments, cut, n_predict, id_slot,"),
    ({"op": "wait", "id_slot": 0}, "live operation 'wait' has no field 'id_slot'; its fields: none"),
    ({"op": "slot_save", "id_slot": 0, "file": "a.bin"}, "live operation 'slot_save' has no field 'file'"),
])
def test_a_field_an_operation_lacks_is_refused(op: dict[str, Any], says: str) -> None:
    """As the model's operations do (pcspec.core.ops.parse): a misspelt field is not ignored."""
    from pcspec.core.errors import PcspecError

    with pytest.raises(PcspecError, match="^" + says.replace("(", r"\(")):
        LiveOp.from_json(op)


def test_renumber_drops_references_to_removed_requests() -> None:
    ops = [
        LiveOp("request", id=3, segments=(("lit", (1,)),)),
        LiveOp("request", id=5, segments=(("prompt", 4), ("lit", (2,)))),
        LiveOp("request", id=6, segments=(("head", (3, 1)), ("reply", 5))),
    ]
    out = renumber(ops)
    assert [o.id for o in out] == [0, 1, 2]
    assert out[1].segments == (("lit", (2,)),)
    assert out[2].segments == (("head", (0, 1)), ("reply", 1))


def test_units_close_a_trailing_async_group() -> None:
    a = LiveOp("request", id=0, segments=(("lit", (1,)),), is_async=True)
    b = LiveOp("request", id=1, segments=(("lit", (1,)),))
    us = units([b, a, a, LiveOp("wait"), b, a])
    assert [len(u) for u in us] == [1, 3, 1, 2]
    assert us[-1][-1].op == "wait"


def test_fuzzer_is_deterministic_and_bounded() -> None:
    def draw(seed: int) -> list[dict[str, object]]:
        fz = Fuzzer(seed, n_slots=2, n_ctx_slot=1024)
        out = []
        for _ in range(60):
            out += [op.to_json() for op in fz.next_ops(Feedback())]
        return out

    a, b = draw(7), draw(7)
    assert a == b and a != draw(8)
    fz = Fuzzer(1, n_slots=2, n_ctx_slot=1024)
    for _ in range(100):
        for op in fz.next_ops(Feedback()):
            if op.op == "request":
                assert fz.shapes[op.id].n_full <= 1024 - 40
                for kind, val in op.segments:
                    if kind == "lit":
                        assert all(LIT_MIN <= t <= LIT_MAX for t in val)


def test_generation_is_banned_from_literal_ids() -> None:
    body = completion_body([1, 2], n_predict=3)
    banned = {t for t, v in body["logit_bias"]}
    assert banned >= set(range(LIT_MIN, LIT_MAX + 1)) and not banned & set(range(LIT_MIN))
    assert body["temperature"] == 0 and body["n_probs"] > 0 and body["ignore_eos"]


def test_curl_line_is_exact_json() -> None:
    rep = Reply("POST", "/completion", {"prompt": [1, 2], "n_predict": 1})
    line = rep.curl("$B")
    assert line.startswith('curl -s -X POST "$B/completion"')
    assert json.loads(line.split("-d '", 1)[1].rstrip("'")) == rep.body


def test_transparency_compare() -> None:
    ref = [[(5, -0.1), (6, -2.0)], [(7, -0.5), (8, -1.0)]]
    same = [[(5, -0.103), (6, -2.002)], [(7, -0.5), (8, -1.0)]]
    assert compare(same, [5, 7], ref, [5, 7]).ok
    moved = [[(5, -0.1), (6, -2.0)], [(7, -0.6), (8, -0.9)]]
    v = compare(moved, [5, 7], ref, [5, 7])
    assert not v.ok and v.step == 1
    # a near tie chosen the other way stops the comparison there
    tie = [[(6, -0.70), (5, -0.69)], [(1, -9.0), (2, -9.5)]]
    tie_ref = [[(5, -0.69), (6, -0.70)], [(7, -0.5), (8, -1.0)]]
    assert compare(tie, [6, 1], tie_ref, [5, 7]).ok


def test_records_match_with_unknown_fields() -> None:
    a = CacheLoaded(None)
    assert a.matches(CacheLoaded(300)) and CacheLoaded(300).matches(a)
    assert not CacheLoaded(300).matches(CacheLoaded(301))
    d = diff([CkptCreated(0, 10, 0, 9)], [CkptCreated(0, 11, 0, 10)])
    assert [x.kind for x in d] == ["ckpt_created"]
    assert diff([Selected(0, "lru")], [Selected(0, "lru")]) == []


def test_log_and_model_records_of_the_same_run_agree_on_a_real_log() -> None:
    """The sample log 03 (twelve prompts, 1 MiB cache): its records have the kinds and the
    fields the model's have."""
    log = REAL_LOGS / "03-eviction.log"
    recs = list(logged(read_log(log).events))
    kinds = {x.kind for x in recs}
    assert {"selected", "cache_saved", "cache_evicted", "ckpt_created", "ckpt_erased", "released"} <= kinds
    created = [x for x in recs if isinstance(x, CkptCreated)]
    assert all(x.n_tokens == x.pos_max + 1 for x in created if x.n_tokens is not None and x.pos_max is not None)


def test_model_records() -> None:
    cfg = Config(memory=MemoryKind.SWA, n_ctx_checkpoints=4, checkpoint_min_step=16, cache_ram=1 << 20)
    srv = Server(cfg, get_design("baseline"))
    srv.request(tuple(range(300)), n_predict=2)
    srv.run()
    srv.request(tuple(range(290)), n_predict=2)
    srv.run()
    recs = model_logged(srv.heap.events)
    kinds = [x.kind for x in recs]
    assert "selected" in kinds and "ckpt_created" in kinds and "released" in kinds
    assert any(isinstance(x, CkptErased) and x.why == "invalidated" for x in recs)


def test_schedule_and_facts() -> None:
    text = "\n".join([
        "0.00.100.000 I srv    load_model: initializing, n_slots = 2, n_ctx_slot = 1024, kv_unified = 'false'",
        "0.00.050.000 I llama_kv_cache_iswa: creating     SWA KV cache, size = 256 cells",
        "0.01.000.000 D que    start_loop: processing new tasks",
        "0.01.000.001 D que    start_loop: processing task, id = 0",
        "0.01.000.002 D que    start_loop: update slots",
        "0.01.000.002 D srv  update_slots: posting NEXT_RESPONSE",
        "0.01.000.002 D que          post: new task, id = 7, front = 0",
        "0.01.000.002 D que  process_new_: processing task, id = 7",
        "0.01.000.003 D que          post: new task, id = 8/1, front = 1",
        "0.01.000.003 D que  process_new_: processing task, id = 8",
        "0.01.000.003 D que  process_new_: processing task, id = 1",
        "0.01.000.003 D srv  process_sing: decoding, decline task, id_task = 1",
        "0.01.000.004 D que    start_loop: update slots",
        "0.01.000.003 D que  process_new_: processing task, id = 1",
        "0.01.000.005 D que    start_loop: processing task, id = 1",
        "0.01.000.006 D que    start_loop: update slots",
    ])
    s = read_schedule(text)
    assert s.actions == [("arrive", 0), ("step", 0), ("step", 0), ("arrive", 1), ("step", 0)]
    f = read_facts(text)
    assert f is not None and (f.n_slots, f.n_ctx_slot, f.swa_cells) == (2, 1024, 256)


def test_workload_file_round_trip(tmp_path: Path) -> None:
    ops = [LiveOp("request", id=0, segments=(("lit", (1, 2)),)), LiveOp("slot_save", id_slot=0, filename="x")]
    p = tmp_path / "w.jsonl"
    p.write_text(workload_lines("swa", Flags(n_slots=2), 5, ops))
    kind, flags, seed, got = read_workload(p)
    assert (kind, flags, seed, got) == ("swa", Flags(n_slots=2), 5, ops)
    assert json.loads(p.read_text().splitlines()[0])["kind"] == KIND


def test_build_cache_is_outside_the_checkout_and_keyed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(build.ENV_CACHE, str(tmp_path))
    monkeypatch.delenv(build.ENV_SERVER, raising=False)
    p = build.cached_server()
    assert p.parent.parent == tmp_path
    assert build.SDIST_VERSION in p.parent.name and build.LLAMA_COMMIT in p.parent.name
    assert build.find_server() is None


def test_models_are_small_and_seeded(tmp_path: Path) -> None:
    pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    from pcspec.live.models import KINDS, write_model

    for kind in KINDS:
        a = write_model(kind, tmp_path / f"{kind}-a.gguf", seed=3)
        b = write_model(kind, tmp_path / f"{kind}-b.gguf", seed=3)
        assert a.read_bytes() == b.read_bytes()
        assert a.stat().st_size < 4 << 20


# sha256 of each model at seed 0 (gguf 0.19.0): the decision option leaves them as they were
MODEL_SHA256 = {
    "kv": "d4f3ef57ca90177a8e8a76fde63039a2b7a4b1c16b135fcc5c550608eaf1cdd9",
    "swa": "c4784ab2ed7c3b2d299cca25a981f360ee968294bb8ed30327a7ea2e943b3530",
    "recurrent": "1c19b9a6aa7608203c987045a76545e46f71d657b94068dcdbc2557f98f68f17",
    "hybrid": "b7f80c2cd5bbae5742f4b3078c9b1de9f5c55f2091061f727a3ec06581d3c246",
}


def test_models_are_pinned_and_a_decision_model_adds_two_keys(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    import hashlib

    from pcspec.live.models import KINDS, SYSTEMONE_TEMPLATES, ensure_model, model_key, write_model

    for kind in KINDS:
        plain = ensure_model(kind, tmp_path)
        assert plain.name == model_key(kind, 0) and hashlib.sha256(plain.read_bytes()).hexdigest() == MODEL_SHA256[kind]
    d1 = write_model("kv", tmp_path / "kv-d1.gguf", decision="lfm2-d1")
    a, b = gguf.GGUFReader(str(tmp_path / model_key("kv", 0))), gguf.GGUFReader(str(d1))
    extra = set(b.fields) - set(a.fields)
    assert extra == {"llama.decision.type", "tokenizer.chat_template.systemone"}
    assert b.fields["tokenizer.chat_template.systemone"].contents() == SYSTEMONE_TEMPLATES["lfm2-d1"]
    assert [(t.name, t.data.tobytes()) for t in a.tensors] == [(t.name, t.data.tobytes()) for t in b.tensors]
    assert len({model_key("kv", 0, t) for t in (None, "lfm2-d1", "openjev")}) == 3
    with pytest.raises(ValueError, match="decision type"):
        write_model("kv", tmp_path / "x.gguf", decision="clef")


def test_the_text_model_is_kv_with_its_non_ascii_and_control_rows_quieted(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    from pcspec.live.models import N_VOCAB, TOKEN_BOS, write_model

    kv = {t.name: t.data for t in gguf.GGUFReader(str(write_model("kv", tmp_path / "kv.gguf"))).tensors}
    text = {t.name: t.data for t in gguf.GGUFReader(str(write_model("kv-text", tmp_path / "t.gguf"))).tensors}
    assert set(kv) == set(text)
    e, f = kv["token_embd.weight"], text["token_embd.weight"]
    assert e.shape == f.shape == (N_VOCAB, 64)
    quiet = [*range(0x80, 0x100), *range(TOKEN_BOS, N_VOCAB)]
    loud = [i for i in range(N_VOCAB) if i not in quiet]
    assert (f[loud] == e[loud]).all() and abs(f[quiet]).max() < 0.01 < abs(e[quiet]).max()
    assert all((kv[n] == text[n]).all() for n in kv if n != "token_embd.weight")


def test_decision_body_and_its_shared_prefix() -> None:
    from pcspec.live.decision import STATE, expected_shared, systemone_body

    body = systemone_body()
    assert len(body["questions"]) >= 2 and body["state"] == STATE
    # <|im_start|>, the state's bytes, the newline; "Which colour?" and "How big?" share no byte
    assert expected_shared(body) == 1 + len(STATE) + 1 == 134
    same_start = systemone_body(questions={
        "a": {"type": "choice", "instructions": "Pick one", "criteria": {"A": "x", "B": "y"}},
        "b": {"type": "choice", "instructions": "Pick two", "criteria": {"A": "x", "B": "y"}},
    })
    assert expected_shared(same_start) == 134 + len("Pick ")
    with pytest.raises(ValueError):
        expected_shared(systemone_body(state="two  spaces"))


def test_waste_watch_sees_a_restore_then_full_reprocessing() -> None:
    from pcspec.live.driver import Observation
    from pcspec.live.waste import WasteWatch

    def req(i: int, rid: int, tokens: list[int], gen: list[int]) -> Observation:
        o = Observation(i, LiveOp("request", id=rid, segments=(("lit", tuple(tokens)),)), tokens=tokens)
        o.reply = Reply("POST", "/completion", {}, status=200, data={"id_slot": 0, "tokens": gen})
        return o

    w = WasteWatch(1)
    assert w.observe([req(0, 0, [1, 2, 3], [7, 8])], [CkptCreated(0, 2, 0, 1)]) == []
    save = Observation(1, LiveOp("slot_save", id_slot=0, filename="a"))
    save.reply = Reply("POST", "/slots/0?action=save", {}, status=200, data={"n_saved": 4})
    w.observe([save], [])
    restore = Observation(2, LiveOp("slot_restore", id_slot=0, filename="a"))
    restore.reply = Reply("POST", "/slots/0?action=restore", {}, status=200, data={"n_restored": 4})
    w.observe([restore], [])
    got = w.observe([req(3, 1, [1, 2, 3, 7, 9], [5])], [FullReprocess(0)])
    assert [c for _, c, _ in got] == ["waste:restore-extend"]
    # a checkpoint that is a prefix of the prompt, then a full re-processing
    w2 = WasteWatch(1)
    w2.observe([req(0, 0, [1, 2, 3, 4], [7])], [CkptCreated(0, 3, 2, 2)])
    got = w2.observe([req(1, 1, [1, 2, 3], [5])], [FullReprocess(0)])
    assert [c for _, c, _ in got] == ["waste:unused-checkpoint"]


def test_waste_watch_follows_the_checkpoints_a_b11549_restore_brings_back() -> None:
    """From b11549 a slot file carries the checkpoint appendix and the restore puts back the
    newest N of them, "restored N context checkpoint(s) from" (server-context.cpp:2658-2713 of
    b11549): the restored slot then holds those. A full re-processing is F3's waste only when the
    restore brought none back; with checkpoints back, it is waste only where one of them is a
    prefix of the prompt (F4). Measured on b11549: a recurrent slot restored with checkpoints at
    330 and 362, then a prompt sharing 241 tokens, re-processed all (rightly: no checkpoint at
    or before 241); that was reported as F3 until the watch read the appendix."""
    from pcspec.live.driver import Observation
    from pcspec.live.slotfiles import FileView
    from pcspec.live.waste import WasteWatch

    def req(i: int, rid: int, tokens: list[int]) -> Observation:
        o = Observation(i, LiveOp("request", id=rid, segments=(("lit", tuple(tokens)),)), tokens=tokens)
        o.reply = Reply("POST", "/completion", {}, status=200, data={"id_slot": 0, "tokens": [9]})
        return o

    def restored(w: WasteWatch, appendix: tuple[tuple[int, int, int], ...] | None, n_back: int | None) -> None:
        w.observe([req(0, 0, list(range(1, 11)))], [CkptCreated(0, 4, 3, 3), CkptCreated(0, 8, 7, 7)])
        save = Observation(1, LiveOp("slot_save", id_slot=0, filename="a"))
        save.reply = Reply("POST", "/slots/0?action=save", {}, status=200, data={"n_saved": 10})
        save.file = FileView(tuple(range(1, 11)), appendix)
        w.observe([save], [])
        line = b"" if n_back is None else (f"0.00.000.104 I slot load_slot_ch: id  0 | task -1 | restored {n_back} "
                                           "context checkpoint(s) from 'a'\n").encode()
        restore = Observation(2, LiveOp("slot_restore", id_slot=0, filename="a"), log_start=0, log_end=len(line))
        restore.reply = Reply("POST", "/slots/0?action=restore", {}, status=200, data={"n_restored": 10})
        w.observe([restore], [], line)

    appendix = ((4, 3, 3), (8, 7, 7))
    cases = [  # (appendix, N restored, common prefix of the next prompt, expected)
        (None, None, 6, ["waste:restore-extend"]),  # 0c1e570, b11434: no appendix (F3)
        (appendix, 2, 6, ["waste:unused-checkpoint"]),  # the checkpoint at 4 would serve (F4)
        (appendix, 1, 6, []),  # only the newest (8) came back (--ctx-checkpoints 1): nothing serves
        (appendix, 2, 3, []),  # both after the common prefix: a full re-processing is right
        ((), 0, 6, ["waste:restore-extend"]),  # an empty appendix: nothing came back (F3)
    ]
    for app, n_back, prefix, want in cases:
        w = WasteWatch(1)
        restored(w, app, n_back)
        got = w.observe([req(3, 1, [*range(1, prefix + 1), 99, 98])], [FullReprocess(0)], b"")
        assert [c for _, c, _ in got] == want, (app, n_back, prefix)


def test_explainers_name_known_causes_and_consequences(tmp_path: Path) -> None:
    from pcspec.core.results import divergence
    from pcspec.live.analyze import Analysis
    from pcspec.live.driver import Observation, Run
    from pcspec.live.explain import explain
    from pcspec.live.session import Outcome, Target

    run = Run(observations=[Observation(i, LiveOp("request", id=i, segments=(("lit", (130,)),))) for i in range(3)])
    released = divergence("model:released", 1, "", difference={"kind": "released", "server": ["a", "b"],
                                                                  "model": ["b", "a"]})
    later = divergence("model:selected", 2, "", difference={"kind": "selected", "server": ["x"], "model": ["y"]})
    scan = divergence("logcheck:load-scan", 2, "log line 9: load scanned entries of [15, 2, 15] tokens but the "
                      "cache holds [2, 15, 15]")
    odd = divergence("model:ckpt_created", 0, "", difference={"kind": "ckpt_created", "server": ["p"], "model": []})
    out = Outcome(Target(tmp_path, tmp_path, "kv", Flags()), [], run, Analysis([odd, released, later, scan]), b"",
                  tmp_path)
    # M7 is fixed in the model (releases in slot order after the decode): a release-order
    # difference is a finding again
    assert explain(released, out) is None
    # L2 is fixed in the log checker (pcspec/logcheck/doubt.py): a load-scan finding is a
    # finding again
    assert explain(scan, out) is None
    assert explain(later, out) is None  # (what follows an unexplained finding is not explained)
    assert explain(odd, out) is None  # nothing known: unexplained, the campaign fails
    # M3 is fixed in the model (the SWA cache's cells, model/swa_ring.py): a checkpoint differing
    # in pos_min only is a finding again
    m3 = divergence("model:ckpt_created", 1, "", difference={
        "kind": "ckpt_created", "server": ["ckpt_created(slot=0, n_tokens=8, pos_min=3, pos_max=7)"],
        "model": ["ckpt_created(slot=0, n_tokens=8, pos_min=0, pos_max=7)"]})  # fmt: skip
    swa = Outcome(Target(tmp_path, tmp_path, "swa", Flags()), [], run, Analysis([m3, later]), b"", tmp_path)
    assert explain(m3, swa) is None
    # What follows an explained divergence in the same run is explained by it: the SWA window
    # one cell short after a restore (F2, a transparency finding), then a later difference.
    log = (b"0.01.000.000 I slot update_slots: id  0 | task 5 | restored context checkpoint (pos_min = 0, "
           b"pos_max = 9, n_tokens = 10, n_past = 10, size = 0.100 MiB)\n"
           b"0.01.000.001 W slot update_slots: id  0 | task 5 | need to evaluate at least 1 token for each "
           b"active slot (n_past = 10, task.n_tokens() = 10)\n")
    run.observations[1].log_start, run.observations[1].log_end = 0, len(log)
    f2 = divergence("transparency", 1, "")
    swa = Outcome(Target(tmp_path, tmp_path, "swa", Flags()), [], run, Analysis([f2, later]), log, tmp_path)
    assert (explain(f2, swa) or "").startswith("F2")
    assert (explain(later, swa) or "").startswith("after transparency")


def test_model_config_gives_the_model_the_real_state_sizes() -> None:
    """M8, fixed: ``model_config`` sets ``Config.state_overhead`` / ``ckpt_overhead`` from
    ``Sizes.offsets`` (one stream with --kv-unified, else one per slot), so the model's state in
    the prompt cache is what llama_state_seq_get_size_ext counts: the measured slot-file state
    (calibrate.SIZES) + 8 bytes (io magic, sequence id) + 4 per extra stream per cache."""
    from pcspec.live import calibrate
    from pcspec.live.schedule import ServerFacts
    from pcspec.model.context import Context
    from pcspec.model.memory import FULL, PARTIAL_ONLY

    assert calibrate.SIZES["swa"].offsets(2) == (128, 60)
    assert calibrate.SIZES["kv"].offsets(1) == (56, 0) and calibrate.SIZES["hybrid"].offsets(1) == (72, 8)
    assert calibrate.SIZES["recurrent"].offsets(3) == (8, 8)
    for unified, streams in ((False, 2), (True, 1)):
        flags = Flags(n_slots=2, kv_unified=unified, ctx_checkpoints=2)
        cfg = calibrate.model_config("swa", flags, ServerFacts(2, 2048, 256))
        assert (cfg.state_overhead, cfg.ckpt_overhead) == calibrate.SIZES["swa"].offsets(streams)
        ctx = Context.target(cfg)
        n = 100
        ctx.decode([(0, tuple(range(1, n + 1)))])
        extra = 4 * (streams - 1)
        assert ctx.get_size(0, FULL) == 8 + 128 + 524 * n + 524 * 32 + 2 * extra
        assert ctx.get_size(0, PARTIAL_ONLY) == 8 + 64 + 524 * 32 + extra
        assert ctx.get_size(1, FULL) == 16  # an empty sequence: never cached
    for kind in ("kv", "recurrent", "hybrid"):
        cfg = calibrate.model_config(kind, Flags(), ServerFacts(1, 4096, None))
        ctx = Context.target(cfg)
        ctx.decode([(0, (1, 2, 3))])
        sz = calibrate.SIZES[kind]
        assert ctx.get_size(0, FULL) == 8 + sz.base + sz.rs + sz.per_cell * 3, kind
        if kind != "kv":
            assert ctx.get_size(0, PARTIAL_ONLY) == 8 + sz.ckpt_base + sz.rs, kind

def test_version_4_states_carry_the_rotation_counts() -> None:
    """State-sequence version 4 (b11434 on) writes n_rot_k and n_rot_v (two u32) in each
    attention cache's data (src/llama-kv-cache.cpp:2258-2259 of b11549): a full state is 8 bytes
    larger per attention cache, an SWA checkpoint (the SWA cache alone) 8, a recurrent state
    nothing; the model of a b11549 run gets them through ``model_config``."""
    from pcspec.live import calibrate
    from pcspec.live.schedule import ServerFacts

    sizes = calibrate.SIZES
    assert sizes["kv"].offsets(1, 4) == (64, 0)
    assert sizes["swa"].offsets(2, 4) == (144, 68)
    assert sizes["hybrid"].offsets(1, 4) == (80, 8)
    assert sizes["recurrent"].offsets(3, 4) == sizes["recurrent"].offsets(3) == (8, 8)
    v3 = calibrate.model_config("swa", Flags(), ServerFacts(1, 4096, 256))
    v4 = calibrate.model_config("swa", Flags(), ServerFacts(1, 4096, 256), state_seq_version=4)
    assert (v4.state_overhead - v3.state_overhead, v4.ckpt_overhead - v3.ckpt_overhead) == (16, 8)


def test_silent_restore_explains_only_a_restore_without_a_state_line(tmp_path: Path) -> None:
    """L1's explainer now covers only what the log checker cannot learn: a restore that
    printed no state_read_meta line; a restore the log shows explains nothing."""
    from pcspec.core.results import divergence
    from pcspec.live.analyze import Analysis
    from pcspec.live.driver import Observation, Run
    from pcspec.live.explain import silent_restore
    from pcspec.live.session import Outcome, Target

    log = b"restore: nothing\nD state_read_meta: cell_count = 3, dest_seq_id = 0\n"
    restore = Observation(0, LiveOp("slot_restore", id_slot=0, filename="a"), log_start=0, log_end=17)
    restore.reply = Reply("POST", "/slots/0?action=restore", {}, status=200, data={"n_restored": 3})
    run = Run(observations=[restore, Observation(1, LiveOp("request", id=0, segments=(("lit", (130,)),)))])
    f = divergence("logcheck:invalidate", 1, "")
    out = Outcome(Target(tmp_path, tmp_path, "kv", Flags()), [], run, Analysis([f]), log, tmp_path)
    assert (silent_restore(f, out) or "").startswith("L1")
    restore.log_end = len(log)
    assert silent_restore(f, out) is None


def test_slot_file_contents_compared_with_the_model() -> None:
    """pcspec/live/slotfiles.py over synthetic files: the model's generated ids (>= 1000) are
    translated through the request they came from; each kind of difference is reported."""
    from pcspec.live.slotfiles import FileView, compare, read_view
    from pcspec.model.slotfile import FileCheckpoint, write_slot_file

    prompt, srv_reply, mod_reply = [130, 131, 132], [65, 66], [1007, 1042]
    sources = [([200, 201], [200, 201]), (prompt + mod_reply, prompt + srv_reply)]

    def view(tokens: list[int], ckpts: tuple[tuple[int, int, int], ...] = ()) -> FileView | str:
        recs = [FileCheckpoint(n, lo, hi, b"x", b"", b"") for n, lo, hi in ckpts]
        return read_view(write_slot_file(tokens, b"\0" * 16, recs), "f.bin")

    mod = view(prompt + mod_reply[:1])
    assert isinstance(mod, FileView) and mod.tokens == (130, 131, 132, 1007) and mod.checkpoints is None
    assert compare(view(prompt + srv_reply[:1]), mod, sources, 1000) is None
    assert "token 3 differs (server 66, model 1007 = 65)" in (
        compare(view([*prompt, 66]), mod, sources, 1000) or "")
    assert "5 tokens, model 4" in (compare(view(prompt + srv_reply), mod, sources, 1000) or "")
    # no request fits (the tokens of a restored file): literals and generated tokens by kind
    assert compare(view([130, 70]), view([130, 1001]), sources, 1000) is None
    assert "token 1 differs" in (compare(view([130, 131]), view([130, 1001]), sources, 1000) or "")
    # the appendix: records compared by n_tokens and positions
    with_ck = view(prompt, ((3, 0, 2),))
    assert isinstance(with_ck, FileView) and with_ck.checkpoints == ((3, 0, 2),)
    assert "appendix: server none, model [(3, 0, 2)]" in (compare(view(prompt), with_ck, sources, 1000) or "")
    assert compare(view(prompt, ((3, 1, 2),)), with_ck, sources, 1000) is not None
    # a file that cannot be read
    bad = read_view(b"junk", "f.bin")
    assert isinstance(bad, str) and "f.bin" in bad
    assert "server file: " in (compare(bad, mod, sources, 1000) or "")
    assert compare(bad, bad, sources, 1000) is None


def test_a_long_difference_shows_its_first_records_and_a_count() -> None:
    """A livelock repeats one record hundreds of times (the hybrid campaign's F1 run printed
    several hundred ``ckpt_created`` records on one line); the report line stays short, the
    JSON keeps every record."""
    from pcspec.live.compare import Difference

    d = Difference("ckpt_created", tuple(f"c{i}" for i in range(300)), ("m",))
    line = d.show()
    assert line.startswith("ckpt_created: server [c0, c1,") and ", ... 292 more] vs model [m]" in line
    assert len(d.to_json()["server"]) == 300  # type: ignore[arg-type]


def test_shrink_cuts_after_the_finding_then_removes_what_it_does_not_need(tmp_path: Path) -> None:

    ops = [LiveOp("request", id=i, segments=(("lit", (10 + i,)),), n_predict=3) for i in range(12)]
    assert [len(u) for u in through(units(ops), 4)] == [1] * 5
    runs: list[list[LiveOp]] = []

    def runner(cand: list[LiveOp], wd: Path) -> Any:
        runs.append(cand)
        return [op.segments[0][1][0] for op in cand]  # the literal tokens that ran

    def keep(out: Any) -> Any:
        return out if 11 in out and 14 in out else None  # needs the requests sent as 1 and 4

    small, best, attempts = shrink(ops, runner, keep, tmp_path, upto=4)
    assert [op.segments for op in small] == [(("lit", (11,)),), (("lit", (14,)),)]
    assert all(op.n_predict == 1 for op in small)
    assert len(runs[0]) == 5  # the first attempt: everything after the finding's operation gone
    assert best == [11, 14]
    assert attempts == len(runs) < 20


def test_shrink_makes_prompts_literal_so_a_chain_of_references_can_go(tmp_path: Path) -> None:
    from pcspec.live.driver import Observation

    # request i extends request i-1's prompt; the finding needs the last prompt's tokens only
    ops = [LiveOp("request", id=0, segments=(("lit", (1,)),))]
    ops += [LiveOp("request", id=i, segments=(("prompt", i - 1), ("lit", (i + 1,)))) for i in range(1, 6)]
    sent = [Observation(i, op, tokens=list(range(1, i + 2))) for i, op in enumerate(ops)]

    def runner(cand: list[LiveOp], wd: Path) -> Any:
        prompts: dict[int, list[int]] = {}
        for op in cand:
            prompts[op.id] = resolve(op, prompts, {})
        return [prompts[op.id] for op in cand]

    def keep(out: Any) -> Any:
        return out if [1, 2, 3, 4, 5, 6] in out else None

    chained, _, _ = shrink(ops, runner, keep, tmp_path / "a", upto=5)
    assert len(chained) == 6  # every request is needed to build the last prompt
    small, _, _ = shrink(ops, runner, keep, tmp_path / "b", upto=5, sent=sent)
    assert [op.segments for op in small] == [(("lit", (1, 2, 3, 4, 5, 6)),)]
