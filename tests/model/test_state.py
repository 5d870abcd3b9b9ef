"""The server's state as model/state.py declares it: the type invariant holds after every
operation of fuzzed runs of every design and mutant, every variable is declared with what it
is, and a variable the state does not declare (a checker's history put back into the model,
say) breaks the invariant."""

from __future__ import annotations

import dataclasses

import pytest

from pcspec.engines.walker import Walker
from pcspec.model import checkpoint
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.model.server import Server
from pcspec.model.state import VARIABLES, type_invariant
from pcspec.properties import rules
from tests.support.common import ALL


@pytest.mark.parametrize("variant", sorted(ALL))
def test_the_type_invariant_holds_after_every_operation(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    broken: list[str] = []
    judged = rules.Fuzz._judged

    def check_then_judge(self: rules.Fuzz) -> list:  # type: ignore[type-arg]
        assert self.srv is not None
        broken.extend(type_invariant(self.srv))
        return judged(self)

    monkeypatch.setattr(rules.Fuzz, "_judged", check_then_judge)
    walk = Walker(ALL[variant], props=()).walk(0, 15)
    assert walk.steps > 100
    assert broken == []


def test_every_variable_is_declared_with_what_it_is() -> None:
    for cls, names in VARIABLES.items():
        assert all(text.strip() for text in names.values()), cls.__name__
        if dataclasses.is_dataclass(cls):
            assert {f.name for f in dataclasses.fields(cls)} == set(names), cls.__name__


def _server() -> Server:
    srv = Server(Config(memory=MemoryKind.RECURRENT, checkpoint_min_step=4, n_ctx_checkpoints=3), DESIGNS["fixed"])
    srv.request(tuple(range(1, 40)), spans=(8,), n_predict=2)
    srv.run()
    return srv


def test_a_history_variable_put_back_breaks_the_invariant(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model once sealed each published checkpoint with a fingerprint for IMM-1; that is
    the judge's to keep now. Put it back into the model, and the invariant names it."""
    assert type_invariant(_server()) == []
    hold = checkpoint.hold

    def sealing_hold(heap, prompt, ck) -> None:  # type: ignore[no-untyped-def]
        ck.sealed = (ck.n_tokens, ck.pos_min, ck.pos_max)
        hold(heap, prompt, ck)

    monkeypatch.setattr(checkpoint, "hold", sealing_hold)
    monkeypatch.setattr("pcspec.model.processing.hold", sealing_hold)
    msgs = type_invariant(_server())
    assert msgs and all("Checkpoint.sealed is not a declared variable" in m for m in msgs)


def test_a_value_out_of_its_type_breaks_the_invariant() -> None:
    srv = _server()
    srv.slots[0].prompt.tokens = (1, -2)
    assert any("not a tuple of token ids" in m for m in type_invariant(srv))
