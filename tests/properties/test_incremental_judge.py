"""The incremental judge finds what a judge computing everything afresh finds: on seeded walks
of designs and mutants, both judge the same server after every model operation and must report
the same violations, message for message. And the comparison can fail: a judge whose carried
findings are made stale on purpose (the storage epoch never ends; CKPT-2 reusing a slot's
findings whatever its tokens became) is caught by it."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from pcspec.core.results import Finding
from pcspec.engines.walker import Walker
from pcspec.properties import checkpoints, rules
from pcspec.properties.judge import Judge
from tests.support.common import ALL

# (variant, walk seed, examples): the designs, whose violations come and go with the storage
# (baseline's accounting, CKPT-2 after a bad_alloc), fixed, which should find nothing, and the
# mutant whose checkpoint CKPT-2 must see once its tokens are cut.
WALKS = [
    ("baseline", 0, 40),
    ("pr30137", 1, 40),
    ("pr27451", 2, 30),
    ("fixed", 3, 40),
    ("mutant:keep-invalidated", 0, 40),
    ("b11549", 4, 40),  # (decision groups: shared-prefix children and their copies)
    ("november", 5, 40),
]


class Twin(Judge):
    """The incremental judge, and beside it on the same server a judge that computes afresh
    (``incremental=False``, the same shortcuts): every judgement of both is recorded."""

    runs: ClassVar[list[tuple[list[Finding], list[Finding]]]] = []

    def __init__(self, srv: Any, *a: Any, **kw: Any) -> None:
        super().__init__(srv, *a, **kw)
        self.fresh = Judge(srv, self.props, incremental=False)

    def __call__(self) -> list[Finding]:
        got = super().__call__()
        type(self).runs.append((got, self.fresh()))
        return got


def _walk(monkeypatch: pytest.MonkeyPatch, variant: str, seed: int, examples: int) -> list[tuple[int, Any, Any]]:
    """The judgements where the two judges disagree: (index, incremental, afresh)."""
    monkeypatch.setattr(rules, "Judge", Twin)
    Twin.runs = []
    Walker(ALL[variant]).walk(seed, examples)
    assert len(Twin.runs) > 500
    return [(i, a, b) for i, (a, b) in enumerate(Twin.runs) if a != b]


@pytest.mark.parametrize(("variant", "seed", "examples"), WALKS)
def test_the_incremental_judge_finds_what_a_fresh_one_finds(
    monkeypatch: pytest.MonkeyPatch, variant: str, seed: int, examples: int
) -> None:
    assert _walk(monkeypatch, variant, seed, examples) == []
    if variant != "fixed":
        assert any(a for a, _ in Twin.runs), "the walk found no violation: the comparison would show nothing"


def test_a_storage_epoch_that_never_ends_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every operation counted storage-neutral: the storage checks report what they found at
    their first run for ever, and the fresh judge disagrees."""
    real = Judge._plan_for

    def stale(self: Judge, kinds: frozenset[str]) -> Any:
        _neutral, crashed, plan = real(self, kinds)
        return True, crashed, plan

    monkeypatch.setattr(Judge, "_plan_for", stale)
    assert _walk(monkeypatch, "baseline", 0, 40) != []


def test_ckpt2_reusing_a_slot_whatever_its_tokens_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """CKPT-2 keeping a slot's empty findings though its tokens were cut below a checkpoint
    (mutant keep-invalidated: a prompt start keeps a checkpoint past the new prompt)."""
    monkeypatch.setattr(checkpoints, "_keeps_prefix", lambda _k, _tokens: True)
    differ = _walk(monkeypatch, "mutant:keep-invalidated", 0, 40)
    assert differ != []
    assert all(f.rule == "CKPT-2" for _, a, b in differ for f in [*a, *b] if (f in a) != (f in b))
