"""FILE-1 fuzzed at the model level: mutated *model-written* slot files restored into a running server.

Each memory kind (kv, swa, recurrent, hybrid), with and without a draft context, under ``fixed``
and ``baseline``: the server that just saved slot 0 to ``f.bin`` (``file1_setup.build``). The file is
mutated (truncated at any length, bits flipped, a length or count field of ``slotfile.field_map`` or
the state blob's length set to a huge, off-by-one, zero or over-the-cap value, junk appended) and
restored into slot 0 or slot 1 of a copy of that server, then judged by ``file1_setup.judge`` (no
crash, no allocation beyond the file, FILE-1, a consistent slot, STATE-1 on ``fixed``: its
docstring says exactly what, and why baseline's legacy token reading is allowed). The set-up and the
judgement are shared with the campaign, ``benchmarks/file1_campaign.py``.

A request after the restore (``test_follow_up_request_after_a_mutated_restore``) found two model
problems, now fixed in the ``fixed`` design and kept as regression tests: a checkpoint record with a
wrong but well-formed ``pos_min``/``n_tokens`` made the next request abort in ``common_memory::seq_rm``
(baseline still does, as the C++ would); and checkpoints restored without their draft data
(``file_draft_dropped``) made the next checkpoint restore abort on a recurrent/hybrid draft, or left an
SWA draft garbage.

The campaign version (>= 100,000 inputs) is ``benchmarks/file1_campaign.py``.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pcspec.model.config import MemoryKind
from pcspec.model.slotfile import read_slot_file
from pcspec.properties.history import file_summary as summary
from pcspec.properties.state import state1_memory_matches_tokens
from tests.support.file1_setup import (
    SCKP_V1,
    SETUPS,
    VARIANTS,
    WITH_CHECKPOINTS,
    Base,
    build,
    judge,
    restore,
    set_field,
    setup_name,
    special_values,
    touched,
)

pytestmark = pytest.mark.slow  # a fuzz campaign: 95 tests of a few seconds each

# Deterministic: the same examples on every run, nothing stored between runs. Applied per test.
settings.register_profile(
    "file1-ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CI = settings.get_profile("file1-ci")
SETUP_PARAMS = [pytest.param(kind, draft, id=setup_name(kind, draft)) for kind, draft in SETUPS]


@st.composite
def mutated(draw: st.DrawFn, p: Base) -> bytes:
    """The model-written file after 1-3 mutations (the campaign draws the same kinds at random)."""
    buf = bytearray(p.data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "field", "append"]))
        if kind == "truncate":
            del buf[draw(st.integers(0, len(buf))) :]
        elif kind == "flip" and buf:
            buf[draw(st.integers(0, len(buf) - 1))] ^= 1 << draw(st.integers(0, 7))
        elif kind == "field":
            _, off, width = draw(st.sampled_from(p.fields))
            if off + width <= len(buf):
                fmt = "<I" if width == 4 else "<Q"
                (original,) = struct.unpack_from(fmt, buf, off)
                values = st.sampled_from(special_values(width, original)) | st.integers(0, 2 ** (8 * width) - 1)
                struct.pack_into(fmt, buf, off, draw(values))
        elif kind == "append":
            buf += draw(
                st.binary(min_size=1, max_size=32)
                | st.sampled_from([b"SCKP", SCKP_V1])
                | st.integers(1, 64).map(lambda n: p.data[-n:])
            )
    return bytes(buf)


# -- unmodified files: FILE-1 round trip and FILE-2 ----------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("kind", "draft"), SETUP_PARAMS)
@pytest.mark.parametrize("slot", [0, 1])
def test_unmodified_file_round_trips(kind: MemoryKind, draft: bool, variant: str, slot: int) -> None:
    p = build(kind, draft, variant)
    saver = p.fresh()
    saver.slot_action("save", 0, "again.bin")
    assert saver.files["again.bin"] == p.data  # saving is deterministic
    n_tokens = len(saver.slots[0].prompt.tokens)
    assert saver.last_result == {"n_saved": n_tokens, "n_written": len(p.data)}  # FILE-2: n_written is the size
    saved = summary(saver.slots[0])
    srv = p.fresh()
    events = restore(srv, slot, p.data)
    assert judge(p, srv, slot, p.data, events).messages == []
    assert srv.last_result == {"n_restored": n_tokens, "n_read": len(p.data)}  # FILE-2: n_read is the size
    got = srv.slots[slot].prompt
    assert summary(srv.slots[slot]) == saved  # tokens, checkpoint metadata and payloads
    assert len(got.checkpoints) == (3 if kind in WITH_CHECKPOINTS else 0)
    assert all(c.id_task == -1 for c in got.checkpoints)  # "came from a file"
    assert (b"SCKP" in p.data) == (kind in WITH_CHECKPOINTS)  # the appendix only with checkpoints
    assert srv.ctx_tgt.seqs[slot].is_state_of(got.tokens)
    if variant == "fixed":
        assert state1_memory_matches_tokens(srv, events) == []


# -- mutated files --------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("kind", "draft"), SETUP_PARAMS)
@settings(CI, max_examples=250)
@given(data=st.data())
def test_mutated_file_restores_or_is_rejected(kind: MemoryKind, draft: bool, variant: str, data: st.DataObject) -> None:
    p = build(kind, draft, variant)
    raw = data.draw(mutated(p), label="file")
    slot = data.draw(st.sampled_from([0, 1]), label="slot")
    srv = p.fresh()
    verdict = judge(p, srv, slot, raw, restore(srv, slot, raw))
    event(verdict.kind)  # --hypothesis-show-statistics
    if verdict.state1_judged:
        event("STATE-1 judged")
    if verdict.legacy_reading:
        event("baseline: legacy token reading installed")
    assert verdict.messages == []


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("kind", "draft"), SETUP_PARAMS)
def test_every_field_at_every_special_value(kind: MemoryKind, draft: bool, variant: str) -> None:
    """Exhaustive over the integer fields: huge, half, zero, one, +-1, over the count cap, 2**40."""
    p = build(kind, draft, variant)
    outcomes: set[str] = set()
    for name, off, width in p.fields:
        original = struct.unpack_from("<I" if width == 4 else "<Q", p.data, off)[0]
        for value in special_values(width, original):
            raw = set_field(p.data, off, width, value)
            srv = p.fresh()
            verdict = judge(p, srv, 1, raw, restore(srv, 1, raw))
            assert verdict.messages == [], (name, value)
            outcomes.add(verdict.kind)
    assert outcomes == {"rejected", "restored"}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kind", list(MemoryKind))
def test_truncation_at_every_length(kind: MemoryKind, variant: str) -> None:
    p = build(kind, False, variant)
    n_tokens = len(p.server.slots[0].prompt.tokens)
    state_at = 12 + 4 * struct.unpack_from("<I", p.data, 8)[0]
    end_of_state = state_at + struct.unpack_from("<I", p.data, state_at + 4)[0]
    restored = []
    for n in range(len(p.data) + 1):
        raw = p.data[:n]
        srv = p.fresh()
        verdict = judge(p, srv, 1, raw, restore(srv, 1, raw))
        assert verdict.messages == [], n
        if verdict.kind == "restored":
            restored.append(n)
            assert len(srv.slots[1].prompt.tokens) == n_tokens
            # a cut appendix is ignored as a whole: the tokens and the state still restore
            assert bool(srv.slots[1].prompt.checkpoints) == (n == len(p.data) and kind in WITH_CHECKPOINTS)
    assert restored == list(range(end_of_state, len(p.data) + 1))


def test_baseline_installs_a_legacy_token_reading_fixed_rejects_it() -> None:
    """The one slot inconsistency allowed on baseline. Bit 7 of byte 15 turns the packed marker -1 into
    0x7fffffff: the words then read as a legacy plain list (marker, version 1, count, the 74 tokens,
    media count 0: 78 tokens), which the C++ installs over the 74-token state without comparing.
    ``fixed`` compares the state's positions with the token count and rejects the file."""
    for variant in VARIANTS:
        p = build(MemoryKind.KV, False, variant)
        raw = bytearray(p.data)
        raw[15] ^= 0x80
        srv = p.fresh()
        verdict = judge(p, srv, 1, bytes(raw), restore(srv, 1, bytes(raw)))
        assert verdict.messages == []
        if variant == "baseline":
            assert verdict.kind == "restored" and verdict.legacy_reading
            assert (srv.ctx_tgt.seqs[1].n_tokens, len(srv.slots[1].prompt.tokens)) == (74, 78)
        else:
            assert verdict.kind == "rejected"
            assert srv.last_result == {"error": "the state holds 74 positions but the file has 78 tokens"}


# -- after the restore: the next request ---------------------------------------------------------------


@pytest.mark.parametrize(("kind", "draft"), SETUP_PARAMS)
@settings(CI, max_examples=100)
@given(data=st.data())
def test_follow_up_request_after_a_mutated_restore(kind: MemoryKind, draft: bool, data: st.DataObject) -> None:
    """fixed: a request on the restored slot (a prefix of its tokens plus new ones) never crashes, and
    leaves memory agreeing with the tokens whenever nothing semantic (identity bytes, checkpoint
    metadata that is still plausible) was touched. The two problems this test found are regression
    tests below: a checkpoint record with a wrong n_tokens/pos_min/pos_max, and restored checkpoints
    whose draft data was dropped (``file_draft_dropped``) with a draft that cannot roll back."""
    p = build(kind, draft, "fixed")
    raw = data.draw(mutated(p), label="file")
    slot = data.draw(st.sampled_from([0, 1]), label="slot")
    srv = p.fresh()
    events = restore(srv, slot, raw)
    assert judge(p, srv, slot, raw, events).messages == []
    tokens = srv.slots[slot].prompt.tokens
    cut = data.draw(st.integers(0, len(tokens)), label="prefix")
    srv.request((*tokens[:cut], 7, 8, 9), n_predict=2, id_slot=slot)
    srv.run()
    hit = touched(p.data, raw)
    assert srv.crash is None, srv.crash
    if not hit & (p.ckpt_meta | p.identity | p.ckpt_identity):
        event("STATE-1 judged after the follow-up")
        assert state1_memory_matches_tokens(srv, []) == []


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kind", [MemoryKind.RECURRENT, MemoryKind.HYBRID])
def test_a_checkpoint_record_with_a_wrong_pos_min(kind: MemoryKind, variant: str) -> None:
    """The file holds checkpoints n_tokens 36/42/68 with pos [35,35], [41,41], [67,67];
    checkpoint 1's pos_min is set to 0 (well-formed, wrong). baseline installs it as the C++ does;
    a request sharing 50 tokens then restores it (pos_next 50, the memory's pos_min 73 >= 50,
    checkpoint 1 is the newest with pos_max 41 <= 50), pos_next = min(50, max(0 + 1, 41)) = 41
    instead of 42, and seq_rm(41) must drop a position of a recurrent state that holds 42
    (n_rs_seq 0): refused, abort. fixed knows a recurrent checkpoint has pos_min == pos_max and
    ignores the appendix (as the reader does for any problem), so nothing crashes."""
    p = build(kind, False, variant)
    off, width = p.field("ckpt 1 pos_min")
    raw = set_field(p.data, off, width, 0)
    srv = p.fresh()
    assert judge(p, srv, 1, raw, restore(srv, 1, raw)).messages == []
    restored = [(c.n_tokens, c.pos_min, c.pos_max) for c in srv.slots[1].prompt.checkpoints]
    srv.request((*srv.slots[1].prompt.tokens[:50], 7, 8, 9), n_predict=2, id_slot=1)
    srv.run()
    if variant == "fixed":
        assert restored == []
        assert srv.crash is None, srv.crash
    else:
        assert restored == [(36, 35, 35), (42, 0, 41), (68, 67, 67)]
        assert srv.crash is not None and srv.crash.where == "common_memory::seq_rm"


@pytest.mark.parametrize("corrupt", [False, True], ids=["fault", "corrupt-draft-blob"])
@pytest.mark.parametrize("kind", WITH_CHECKPOINTS)
def test_fixed_draft_after_restoring_a_checkpoint_without_draft_data(kind: MemoryKind, corrupt: bool) -> None:
    """Minimal reproduction, with an unmodified file and one armed fault (``ckpt.write.dft``: the
    restore's test-load of the last checkpoint's draft data fails), or with that draft blob damaged
    (its magic ``PCSY`` -> ``QCSY``). Either way ``file_draft_dropped``: every restored checkpoint loses
    data_dft; fixed then re-decodes the 74 tokens into the draft. A request sharing 50 tokens restores
    checkpoint 1 (n_tokens 42) into the target only; seq_rm(42) on the draft (74 tokens, n_rs_seq 0)
    is refused for a recurrent/hybrid draft (abort); an SWA draft is cut below its window (garbage)."""
    p = build(kind, True, "fixed")
    raw = p.data
    srv = p.fresh()
    if corrupt:
        rec = read_slot_file(raw).checkpoint_offsets[-1]
        (n_tgt,) = struct.unpack_from("<Q", raw, rec + 16)
        at = rec + 16 + 8 + n_tgt + 8  # data_dft of the last checkpoint
        raw = raw[:at] + b"Q" + raw[at + 1 :]
    else:
        srv.inject("ckpt.write.dft")
    events = restore(srv, 1, raw)
    assert judge(p, srv, 1, raw, events).messages == []
    assert any(e.kind == "file_draft_dropped" for e in events)
    assert all(c.dft is None for c in srv.slots[1].prompt.checkpoints)
    srv.request((*srv.slots[1].prompt.tokens[:50], 7, 8, 9), n_predict=2, id_slot=1)
    srv.run()
    assert srv.crash is None, srv.crash
    assert state1_memory_matches_tokens(srv, []) == []


# -- the check can fail ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", WITH_CHECKPOINTS)
def test_trust_size_field_mutant_crashes_on_a_huge_blob_length(kind: MemoryKind) -> None:
    p = build(kind, False, "mutant:trust-size-field")
    off, width = p.field("ckpt 0 data_tgt length")
    raw = set_field(p.data, off, width, 2**64 - 1)
    srv = p.fresh()
    events = restore(srv, 1, raw)
    assert srv.crash is not None and "bad_alloc" in srv.crash.message
    verdict = judge(p, srv, 1, raw, events)
    assert any("crashed the server" in m for m in verdict.messages)
    # 2**40 fits the modelled host: no crash, but an allocation 2**40 bytes from a small file
    raw = set_field(p.data, off, width, 2**40)
    srv = p.fresh()
    verdict = judge(p, srv, 1, raw, restore(srv, 1, raw))
    assert srv.crash is None and any("model heap allocated 1099511627776" in m for m in verdict.messages)
    # the same bytes are harmless to fixed: the appendix is ignored as truncated
    fixed = build(kind, False, "fixed")
    srv = fixed.fresh()
    verdict = judge(fixed, srv, 1, raw, restore(srv, 1, raw))
    assert verdict.messages == [] and verdict.kind == "restored"


def test_the_fuzzer_finds_the_trust_size_field_mutant() -> None:
    p = build(MemoryKind.RECURRENT, False, "mutant:trust-size-field")

    @settings(CI, max_examples=300, report_multiple_bugs=False)
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        raw = data.draw(mutated(p), label="file")
        srv = p.fresh()
        assert judge(p, srv, 1, raw, restore(srv, 1, raw)).messages == []

    with pytest.raises(AssertionError, match=r"allocated|crashed"):
        fuzz()
