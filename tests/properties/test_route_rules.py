"""The route rules: ``checkpoint_fails_beside`` (a checkpoint allocation failing beside a busy
slot, the one way its empty checkpoint outlives the failure), ``restore_changed_marker`` (a slot
file whose tokens marker was changed, restored, then a prompt on what it installed) and
``back_to_a_busy_slot`` (a conversation resent, pinned, to the slot now busy with another) and
``restore_into_fewer`` (a slot file restored after a restart that allows fewer checkpoints).
Each takes, in one rule, a route that the other rules take only by a rare meeting of several
draws; each shows its violations on the designs whose routes they are and none on ``fixed``."""

from __future__ import annotations

import pytest

from pcspec.model.config import Config, MemoryKind
from pcspec.properties.catalogue import get_property
from pcspec.properties.rules import RULES, Fuzz
from tests.support.common import ALL

WATCHED = ("FILE-1", "CKPT-1", "CKPT-2", "RESTORE-1", "STATE-1", "NOABORT-1", "PROGRESS-1")

# Two slots of a recurrent memory, no draft, a cache of a few entries.
RECURRENT_2 = Config(
    n_slots=2, n_ctx_slot=128, n_batch=8, n_ubatch=4, kv_unified=True, memory=MemoryKind.RECURRENT,
    n_ctx_checkpoints=2, checkpoint_min_step=8, cache_ram=400, ctx_shift=True,
)  # fmt: skip
# One slot of a hybrid memory, unlimited cache, no similarity threshold.
HYBRID_1 = Config(
    n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=2, memory=MemoryKind.HYBRID, n_ctx_checkpoints=4,
    checkpoint_min_step=8, cache_ram=-1, cache_idle_slots=False, slot_prompt_similarity=0.0, ctx_shift=True,
)  # fmt: skip


def _violated(variant: str, cfg: Config, body: str, *args: object) -> set[str]:
    f = Fuzz(ALL[variant], props=[get_property(p) for p in WATCHED])
    f.setup(cfg, ["ckpt.alloc"])
    if body == "restore_changed_marker":  # (something to save: a conversation of two turns)
        f.new_prompt(0, 30, -1, True, -1)
        f.run()
        f.extend(0, 8, -1, -1)
        f.run()
    getattr(f, body)(*args)
    return set(f.first)


def test_the_rules_are_drawn_by_both_engines() -> None:
    names = {
        "checkpoint_fails_beside",
        "restore_changed_marker",
        "back_to_a_busy_slot",
        "restore_into_fewer",
    }
    assert names <= {r.name for r in RULES}


@pytest.mark.parametrize("variant", ["baseline", "pr27451"])
def test_a_checkpoint_failing_beside_a_busy_slot_rides_into_the_slot_file(variant: str) -> None:
    # other=0 sends 1 token, k=1 sends 5 with ckpt.alloc armed; k's slot is saved and restored:
    # its appendix carries the empty record, which the reader refuses with the whole appendix.
    args = (0, 1, 0, 1, 5, "file", True)
    assert {"FILE-1", "CKPT-2"} <= _violated(variant, RECURRENT_2, "checkpoint_fails_beside", *args)
    assert _violated("fixed", RECURRENT_2, "checkpoint_fails_beside", *args) == set()


def test_the_empty_checkpoint_restored_at_the_next_prompt_start() -> None:
    # the same failure, then the conversation goes on: restoring the empty checkpoint is a no-op.
    args = (0, 1, 0, 1, 5, "extend", True)
    assert "CKPT-2" in _violated("baseline", RECURRENT_2, "checkpoint_fails_beside", *args)
    assert _violated("fixed", RECURRENT_2, "checkpoint_fails_beside", *args) == set()


@pytest.mark.parametrize("marker", [0, 1, 2])
def test_a_changed_tokens_marker_installs_the_packed_words(marker: int) -> None:
    # pr30137 installs the packed words and the appendix checkpoints over them; the prompt cut
    # at a checkpoint keeps one that is the state of no prefix of it.
    args = (0, marker, 3, 0, 1)
    assert {"RESTORE-1", "STATE-1"} <= _violated("pr30137", HYBRID_1, "restore_changed_marker", *args)
    assert _violated("fixed", HYBRID_1, "restore_changed_marker", *args) == set()


# Two slots of a plain KV memory, a cache of a few entries, batches of 8 tokens, the similarity
# pass on (without it the C++ never consults the cache for a pinned task).
KV_2 = Config(
    n_slots=2, n_ctx_slot=64, n_batch=8, n_ubatch=4, memory=MemoryKind.KV, n_swa=4, swa_cells=8, cell_bytes=8,
    rs_bytes=64, n_ctx_checkpoints=2, checkpoint_min_step=2, cache_ram=1200, cache_idle_slots=False,
)  # fmt: skip


@pytest.mark.parametrize("variant", ["baseline", "pr30137", "pr27451", "b11549"])
def test_a_conversation_resent_to_its_busy_slot_loads_its_longer_entry_there(variant: str) -> None:
    # conversation 0 (20 tokens) runs; conversation 1 (17 tokens) is pinned to its slot, which
    # caches conversation 0; one step later (17 tokens are three batches of 8) conversation 0
    # is resent, pinned there: its entry of 23 tokens is loaded into the busy slot (F1).
    args = (0, 20, 1, 3, 1, False)
    assert "PROGRESS-1" in _violated(variant, KV_2, "back_to_a_busy_slot", *args)
    assert _violated("fixed", KV_2, "back_to_a_busy_slot", *args) == set()


def _restored_into_fewer(variant: str) -> tuple[set[str], int]:
    """A chat leaves two checkpoints on the one slot; the file saved from it is restored after a
    restart that allows one: what is violated, and how many checkpoints the slot then holds."""
    cfg = Config(
        n_slots=1, n_ctx_slot=96, n_batch=8, n_ubatch=2, memory=MemoryKind.SWA, n_swa=4, swa_cells=8, cell_bytes=8,
        rs_bytes=64, n_ctx_checkpoints=3, checkpoint_min_step=2, cache_ram=-1, slot_prompt_similarity=0.0,
    )  # fmt: skip
    f = Fuzz(ALL[variant])
    f.setup(cfg, ["ckpt.alloc"])
    f.new_prompt(0, 30, -1, True, -1)
    f.run()
    assert f.srv is not None and len(f.srv.slots[0].prompt.checkpoints) == 2
    f.restore_into_fewer(1, 1, "a.bin")
    return set(f.first), len(f.srv.slots[0].prompt.checkpoints)


def test_a_file_restored_into_a_smaller_cap_keeps_the_cap() -> None:
    # fixed's reader keeps the newest checkpoint up to the new cap of 1; the mutant that reads
    # the whole appendix installs both, over the cap (CKPT-1)
    assert _restored_into_fewer("fixed") == (set(), 1)
    found, held = _restored_into_fewer("mutant:restore-uncapped")
    assert "CKPT-1" in found and held == 2
