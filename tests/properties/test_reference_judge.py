"""The judge's shortcut tables (an event check skipped without its events, storage checks not
run again within a storage epoch, found messages carried over: ``properties/base.py``) rest on
what pcspec's own designs do. A design of one's own is judged by the reference judge instead,
every check after every operation (``Judge(reference=True)``). On every built-in design and
mutant, and on the designs of one's own of ``tests/tools/user_designs.py``, both judges give
the same verdicts: the same first violation of every property, at the same operation, with
the same message, over the same walks."""

from __future__ import annotations

import pytest

from pcspec.engines.walker import Walker
from pcspec.model.design import Design
from pcspec.model.designs import named
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.judge import is_pcspecs
from tests.tools import user_designs as ud

pytestmark = pytest.mark.slow

EXAMPLES = 6
DESIGNS: list[Design] = [v for v in named().values() if is_pcspecs(v)] + [c() for c in (*ud.BROKEN, *ud.CORRECT)]


def _firsts(design: Design, reference: bool) -> dict[str, tuple[int, str]]:
    w = Walker(design, CATALOGUE, reference=reference).walk(0, EXAMPLES)
    return {p: (f.violation.at, f.violation.message) for p, f in w.first.items()}


@pytest.mark.parametrize("design", DESIGNS, ids=lambda v: v.name)
def test_shortcuts_and_reference_give_the_same_verdicts(design: Design) -> None:
    assert _firsts(design, reference=False) == _firsts(design, reference=True)


def test_a_design_of_ones_own_with_an_effect_gets_the_reference_judge() -> None:
    from pcspec.model.config import Config
    from pcspec.model.server import Server
    from pcspec.properties.judge import Judge

    assert Judge(Server(Config(), ud.PublishBeforeFill())).reference  # its own prompt_save, an effect
    assert Judge(Server(Config(), ud.LruByUse())).reference  # its own on_contained
    assert not Judge(Server(Config(), ud.LargestFirst())).reference  # a decision of its own only
    assert not Judge(Server(Config(), named()["fixed"])).reference
