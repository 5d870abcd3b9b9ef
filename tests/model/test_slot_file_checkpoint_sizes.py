"""A checkpoint read back from a slot file has the size it had when it was written.

In a real file a checkpoint record's payload is the state as the context wrote it, and the
restore allocates it by its length field; the model's file carries a compact encoding of the
state instead, so the restore takes the size from the state (``SeqMemory.image_size``). The
prompt cache counts these bytes: with the encoding's length instead, a slot restored from a file
and then saved to a cache with a byte limit made room for too small an entry (seen on
``fixed@november``'s build, hybrid model, ``--cache-ram 1``: the server evicted two entries
where the model evicted one).
"""

from __future__ import annotations

import pytest

from pcspec.live import calibrate
from pcspec.live.process import Flags
from pcspec.live.schedule import ServerFacts
from pcspec.model.designs import get_design
from pcspec.model.server import Server

# the live models' sizes (pcspec.live.models), one slot, a checkpoint every 8 tokens
FLAGS = Flags(n_slots=1, n_ctx=512, n_batch=64, n_ubatch=64, cache_ram_mib=0, ctx_checkpoints=4,
              checkpoint_min_step=8)


@pytest.mark.parametrize("kind", ["recurrent", "hybrid", "swa"])
def test_a_restored_checkpoint_keeps_its_size(kind: str) -> None:
    design = get_design("pr30137@november")
    cfg = calibrate.model_config(kind, FLAGS, ServerFacts(1, 512, None),
                                 state_seq_version=design.rules.state_seq_version)
    srv = Server(cfg, design)
    srv.request(tuple(range(100, 160)), n_predict=3)
    srv.run()
    written = [(c.n_tokens, c.tgt.size) for c in srv.slots[0].prompt.checkpoints if c.tgt is not None]
    assert written and all(size > 64 for _, size in written)
    srv.slot_action("save", 0, "a.bin")
    srv.request((7, 8, 9), n_predict=3)
    srv.run()
    srv.slot_action("restore", 0, "a.bin")
    restored = [(c.n_tokens, c.tgt.size) for c in srv.slots[0].prompt.checkpoints if c.tgt is not None]
    assert restored == written[-cfg.n_ctx_checkpoints:]
