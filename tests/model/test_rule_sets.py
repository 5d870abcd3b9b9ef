"""The rule sets of real builds (october, b11434, b11549, november): each is its parent with the
fields its tree changed, and each changed field shows in what the model does (of baseline under
that rule set, the model of the build)."""

from __future__ import annotations

import struct

import pytest

from pcspec.core.loop import replay
from pcspec.core.trace import load
from pcspec.model.config import Config
from pcspec.model.designs import DESIGNS, RULE_SET_MODELS
from pcspec.model.errors import PcspecError
from pcspec.model.rulesets import NEWEST, NOVEMBER, PARENTS, RULE_SETS, SPEC, differences, get_rule_set
from pcspec.model.server import Server
from pcspec.model.state_versions import RESTORE_LOAD_FAILED
from tests.support.paths import DATA

# What each tree changed, field by field (docs/RULESETS.md cites the lines); october's parent is
# ``spec``, the rule set the designs run under.
EXPECTED = {
    "october": {"invalidate_n_prefix": (True, False), "slot_file_appendix": (True, False),
                "checkpoint_load_checked": (True, False)},
    "b11434": {"state_seq_version": (3, 4), "decision_tasks": (False, True)},
    "b11549": {"slot_file_appendix": (False, True), "checkpoint_load_checked": (False, True),
               "spans_from_chat_only": (False, True)},
    "november": {"invalidate_n_prefix": (False, True)},
}


def test_each_rule_set_is_its_parent_with_the_fields_its_tree_changed() -> None:
    assert list(RULE_SETS) == list(PARENTS) == list(EXPECTED) == list(RULE_SET_MODELS)
    assert list(RULE_SETS)[-1] == NEWEST
    assert PARENTS["october"] == SPEC.name
    for name in RULE_SETS:
        assert differences(name) == EXPECTED[name], name
        # the model of the build: baseline's code under the build's rule set, no mutant
        model = RULE_SET_MODELS[name]
        assert model.rules is RULE_SETS[name] and model.name == name, name
        assert type(model) is type(DESIGNS["baseline"]) and not model.mutant, name
    # the November code is the baseline design but for the version of its slot files and what its
    # server offers clients, which the designs keep as the October tree they are built on has them
    assert DESIGNS["baseline"].rules is SPEC
    assert NOVEMBER.differences(DESIGNS["baseline"].rules) == {
        "state_seq_version": (3, 4), "decision_tasks": (False, True), "spans_from_chat_only": (False, True)}


def test_an_unknown_rule_set_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(PcspecError) as got:
        get_rule_set("baseline")
    assert str(got.value) == "unknown rule set 'baseline'; known rule sets: october, b11434, b11549, november"


def saved_by(rule_set: str) -> tuple[bytes, int]:
    srv = Server(Config(n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1), RULE_SET_MODELS[rule_set])
    srv.request(tuple(range(1, 20)), n_predict=1)
    srv.run()
    srv.slot_action("save", 0, "f.bin")
    assert srv.crash is None
    return srv.files["f.bin"], srv.slots[0].prompt.n_tokens


@pytest.mark.parametrize("writer", list(RULE_SETS))
@pytest.mark.parametrize("reader", list(RULE_SETS))
def test_a_slot_file_is_restored_by_a_build_of_its_version_only(writer: str, reader: str) -> None:
    data, n_tokens = saved_by(writer)
    version = RULE_SETS[writer].state_seq_version
    assert struct.unpack_from("<I", data, 4) == (version,)
    srv = Server(Config(n_slots=1, n_ctx_slot=64, n_batch=16, n_ubatch=4, cache_ram=-1), RULE_SET_MODELS[reader])
    srv.files["f.bin"] = data
    srv.slot_action("restore", 0, "f.bin")
    if RULE_SETS[reader].state_seq_version == version:
        assert srv.slots[0].prompt.n_tokens == n_tokens
    else:
        assert srv.slots[0].prompt.n_tokens == 0
        error = str(srv.last_result["error"])
        assert f"but this build reads {RULE_SETS[reader].state_seq_version}" in error
        assert RESTORE_LOAD_FAILED in error


def test_only_the_builds_with_the_appendix_keep_checkpoints_across_a_file() -> None:
    cfg = Config(n_slots=1, n_ctx_slot=96, n_batch=8, n_ubatch=4, cache_ram=-1, checkpoint_min_step=2)
    for name, variant in RULE_SET_MODELS.items():
        srv = Server(cfg, variant)
        srv.request(tuple(range(1, 40)), spans=(0, 20), n_predict=1)
        srv.run()
        assert srv.slots[0].prompt.checkpoints, name
        srv.slot_action("save", 0, "f.bin")
        srv.slot_action("restore", 0, "f.bin")
        kept = srv.slots[0].prompt.checkpoints
        assert bool(kept) == variant.rules.slot_file_appendix, name
        assert all(c.id_task == -1 for c in kept)


ROUTE = DATA / "routes" / "baseline__NOABORT-1__checkpoint-load-fails__ckpt.write.tgt.jsonl"


@pytest.mark.parametrize("rule_set", list(RULE_SETS))
def test_where_a_checkpoint_that_fails_to_load_aborts(rule_set: str) -> None:
    """0c1e570 and b11434 abort inside load_tgt (common/common.cpp:2338 at 0c1e570, 2399 of
    b11434); b11549 and November return false, and the prompt start aborts for a checkpoint of
    this process (server-context.cpp:3747-3749 of b11549)."""
    result = replay(load(ROUTE, variant=rule_set), lambda srv: (lambda: []))
    crash = result.server.crash
    assert crash is not None
    if RULE_SETS[rule_set].checkpoint_load_checked:
        assert (crash.where, crash.message) == ("update_slots", "failed to restore context checkpoint")
    else:
        assert (crash.where, crash.message) == ("common_prompt_checkpoint::load_tgt", "checkpoint size mismatch")
