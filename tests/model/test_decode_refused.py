"""The decoder refuses a batch whose positions do not go on from a sequence's memory
(``Context.refused_start``, ``Server._decode_refused``; docs/FINDINGS.md, M9, F8, F9): the model
scenarios of the two ways the binaries reach it, without a binary.

* the target context: a slot file whose tokens marker was changed installs four more tokens
  than its state holds; the next extension is answered ``Invalid input batch.``, the slot
  released and cleared, and the checkpoint taken just before the batch (created and dropped in
  the same operation) is still judged by CKPT-1;
* the draft context: a slot restore leaves the draft behind; the extension is answered
  ``decode() failed: failed to process speculative batch`` and the slot is not cleared, so the
  next extension fails too.

``fixed`` refuses the file (``file_restore_refuses``) and re-decodes the draft
(``sync_draft``): nothing is refused.
"""

from __future__ import annotations

from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.design import Design
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS, Fixed
from pcspec.model.server import Server
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import Judge

RECURRENT = Config(n_slots=1, n_ctx_slot=512, n_batch=64, n_ubatch=64, memory=MemoryKind.RECURRENT,
                   n_ctx_checkpoints=4, checkpoint_min_step=8, cache_ram=0).validate()
KV_DRAFT = Config(n_slots=1, n_ctx_slot=512, n_batch=64, n_ubatch=64, memory=MemoryKind.KV,
                  cache_ram=0, has_draft=True, draft_memory=MemoryKind.KV).validate()
A40 = tuple(range(100, 140))
FAILED = "decode() failed: failed to process speculative batch"
FIXED, OCTOBER = DESIGNS["fixed"], RULE_SET_MODELS["october"]


class FixedWithoutDraftSync(Fixed):
    """fixed without the draft's resynchronisation after a file restore, and without its own resume."""

    name = "fixed-without-the-draft-seam"
    sync_draft = Design.sync_draft
    resume = Design.resume


def _marker_run(variant: Design) -> tuple[Server, list[str]]:
    srv = Server(RECURRENT, variant)
    judge = Judge(srv, [get_property("CKPT-1")])
    srv.request(A40, n_predict=3)
    srv.run()
    srv.slot_action("save", 0, "a.bin")
    srv.corrupt_file("a.bin", 0, b"", field="tokens marker", value=0)
    srv.slot_action("restore", 0, "a.bin")
    judge()
    srv.request((*srv.slots[0].prompt.tokens, 77, 78), n_predict=3)
    srv.run()
    return srv, [v.message for v in judge()]


def test_a_batch_past_the_memory_is_refused_and_the_slot_cleared() -> None:
    srv, ckpt1 = _marker_run(OCTOBER)
    refused = [e for e in srv.heap.events if isinstance(e, ev.DecodeRefused)]
    assert [(e.context, e.pos_max, e.start) for e in refused] == [("tgt", 41, 46)]
    release = [e for e in srv.heap.events if isinstance(e, ev.Release)][-1]
    assert release.error == "Invalid input batch." and release.token is None
    after = srv.heap.events[srv.heap.events.index(release):]
    assert any(isinstance(e, ev.PromptClear) for e in after)
    assert srv.slots[0].prompt.tokens == () and srv.slots[0].prompt.checkpoints == []
    assert srv.ctx_tgt.seqs[0].n_tokens == 0
    # the checkpoint of the refused batch's start: gone from the list, still CKPT-1's
    assert ckpt1 == ["slot 0: ckpt#3(n_tokens=46, pos=[41,41]) was created breaking pos_min <= pos_max = n_tokens - 1"]


def test_fixed_refuses_the_file_instead() -> None:
    srv, ckpt1 = _marker_run(FIXED)
    assert not any(isinstance(e, ev.DecodeRefused) for e in srv.heap.events)
    assert [e.reason for e in srv.heap.events if isinstance(e, ev.FileRestoreFailed)] == [
        "the state holds 42 positions but the file has 46 tokens"]
    assert ckpt1 == []


def _draft_run(variant: Design) -> Server:
    srv = Server(KV_DRAFT, variant)
    srv.request(tuple(range(100, 130)), n_predict=3)
    srv.run()
    srv.slot_action("save", 0, "f.bin")
    srv.request(tuple(range(200, 205)), n_predict=3)
    srv.run()
    srv.slot_action("restore", 0, "f.bin")
    for more in ((50, 51, 52), (60, 61)):
        srv.request((*range(100, 130), *more), n_predict=3)
        srv.run()
    return srv


def test_a_draft_left_behind_refuses_every_extension() -> None:
    srv = _draft_run(OCTOBER)
    refused = [(e.context, e.pos_max, e.start) for e in srv.heap.events if isinstance(e, ev.DecodeRefused)]
    assert refused == [("dft", 6, 30), ("dft", 6, 30)]
    errors = [e.error for e in srv.heap.events if isinstance(e, ev.Release)]
    assert errors == [None, None, FAILED, FAILED]
    # abort_all_slots releases without clearing: the slot keeps the batch the target decoded
    assert not any(isinstance(e, ev.PromptClear) for e in srv.heap.events[-8:])
    assert srv.slots[0].prompt.n_tokens == srv.ctx_tgt.seqs[0].n_tokens == 32


def test_fixed_resynchronises_the_draft() -> None:
    srv = _draft_run(FIXED)
    assert not any(isinstance(e, ev.DecodeRefused) for e in srv.heap.events)
    assert [e.error for e in srv.heap.events if isinstance(e, ev.Release)] == [None] * 4
    # without its sync_draft (and without fixed's own resume, which finds that the draft's memory serves
    # no resume and processes the first extension from 0) the draft is left behind, as on the
    # build of fixed, which ports neither
    build = _draft_run(FixedWithoutDraftSync())
    assert [e.error for e in build.heap.events if isinstance(e, ev.Release)][-2:] == [FAILED, FAILED]
