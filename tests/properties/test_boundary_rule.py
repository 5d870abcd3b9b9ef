"""The boundary-directed rule ``cut_at_boundary``: prompts cut at, one before and one after
each landmark of the restore rule (a checkpoint's n_tokens, pos_min, pos_max, the threshold's
meeting point with a pos_min, and the zero threshold)."""

from __future__ import annotations

import pytest

from pcspec.core.ops import Request
from pcspec.model.designs import DESIGNS
from pcspec.properties.rules import RULES, Fuzz
from tests.support.common import SWA_SLOT


def _fuzz() -> Fuzz:
    f = Fuzz(DESIGNS["baseline"], props=())
    f.setup(SWA_SLOT, ["ckpt.alloc"])
    f.do(Request(tuple(range(1, 13)), 1, spans=(4,)))
    f.run()
    assert f.srv is not None
    assert [(c.n_tokens, c.pos_min, c.pos_max) for c in f.srv.slots[0].prompt.checkpoints] == [(4, 0, 3), (8, 0, 7)]
    assert f.srv.ctx_tgt.seqs[0].pos_range() == (4, 11)
    return f


# (landmark, pick, diverge) -> the landmark's point: pick 0 is checkpoint [0, 3] (n_tokens 4) and
# the live memory for the threshold; pick 1 is checkpoint [0, 7] (n_tokens 8) and its own pos_min.
CASES = [
    ("n_tokens", 0, True, 4),
    ("n_tokens", 1, False, 8),
    ("pos_min", 1, True, 0),
    ("pos_max", 1, True, 7),
    ("thold", 0, True, 4 + 4),  # the live pos_min 4 + n_swa: the threshold is 4 there
    ("thold", 0, False, 4 + 4 + 1),  # without new tokens the threshold is one lower
    ("thold", 1, True, 0 + 4),  # checkpoint [0, 7]'s pos_min 0 + n_swa
    ("zero", 0, True, 4),  # the last shared prefix with a threshold of 0
    ("zero", 0, False, 5),
]


@pytest.mark.parametrize(("landmark", "pick", "diverge", "at"), CASES)
@pytest.mark.parametrize("plus", [-1, 0, 1])
def test_cut_lies_at_the_landmark(landmark: str, pick: int, diverge: bool, at: int, plus: int) -> None:
    f = _fuzz()
    f.cut_at_boundary(pick, landmark, plus, diverge, 3, -1)
    op = f.trace[-1]
    assert isinstance(op, Request)
    cut = max(1, min(at + plus, 12))
    tokens = list(range(1, 13))
    if diverge:
        assert list(op.tokens[:cut]) == tokens[:cut] and len(op.tokens) == cut + 3
        assert op.tokens[cut] not in tokens
    else:
        assert list(op.tokens) == tokens[:cut]


def test_the_rule_is_drawn_by_both_engines() -> None:
    assert "cut_at_boundary" in {r.name for r in RULES}
