"""The judge's shortcuts change no verdict: on fuzzed states of every design and mutant, the
judge (event checks skipped without their events, values shared within a judgement) finds
exactly what every check finds when run on its own, each computing everything afresh from the
plain list of events (and the judge's history of the same operation); an operation whose
events are all storage-neutral (``base.STORAGE_NEUTRAL_KINDS``, which the incremental judge's
storage epochs rest on) leaves the whole storage as it was; and the fingerprints and byte
counts written for speed equal their plain definitions on the same states."""

from __future__ import annotations

from typing import Any

import pytest

from pcspec.core.results import Finding, violation
from pcspec.engines.walker import Walker
from pcspec.model import events
from pcspec.model.cache import unique_bytes
from pcspec.model.design import runs
from pcspec.model.designs import Fixed
from pcspec.model.server import Server
from pcspec.properties import coverage, rules
from pcspec.properties import judge as judge_module
from pcspec.properties.base import (
    DECODE_STEP_KINDS,
    STORAGE_NEUTRAL_KINDS,
    event_kinds,
    held_checkpoints,
    reads_storage_only,
)
from pcspec.properties.history import checkpoint_fingerprint, entry_fingerprint
from pcspec.properties.judge import Judge
from tests.support.common import ALL

pytestmark = pytest.mark.slow  # fuzzed states of every design and mutant, seconds a test

EXAMPLES = 25  # per design: enough for violations of most properties on the designs and mutants


class CheckedJudge(Judge):
    """The judge, then every property again the long way on the same state."""

    judgements = 0
    decode_skips = 0

    neutral = 0

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.storage: dict[str, list[str]] = {}  # each storage check's last findings
        self.stored = storage(self.srv)  # the whole storage as of the last judgement

    def _judge(self) -> list[Finding]:
        # (``_judge``: the judgement itself, before the history drops the operation's records)
        start = self.seen
        got = super()._judge()
        srv = self.srv
        new = srv.heap.events[start:]
        now = storage(srv)
        kinds = {e.kind for e in new}
        if kinds <= STORAGE_NEUTRAL_KINDS:
            # a storage epoch goes on: the storage must be as it was (base.STORAGE_NEUTRAL_KINDS)
            assert now == self.stored, f"a storage-neutral operation {sorted(kinds)} changed the storage"
            type(self).neutral += 1
        self.stored = now
        if len(new) == 1 and new[0].kind == "op":
            assert got == []
            return got
        crashed = any(e.kind == "crash" for e in new)
        if srv.crash is not None and not crashed:
            assert got == []
            return got
        want: list[Finding] = []
        kinds = {e.kind for e in new}
        decode_step = kinds <= DECODE_STEP_KINDS
        for p in self.props:
            if crashed and not p.after_crash:
                continue
            msgs = p.check(srv, _Plain(new, self.history))  # no index, no shared values
            needs = event_kinds(p.check)
            if needs is not None and needs.isdisjoint(kinds):
                assert msgs == [], f"{p.id} found something without its events {sorted(needs)}: {msgs}"
            if reads_storage_only(p.check):
                if decode_step:
                    # skipped by the judge: what it finds must be what it found before
                    assert msgs == self.storage.get(p.id, []), f"{p.id} changed in a decode step: {msgs}"
                    type(self).decode_skips += 1
                    continue
                self.storage[p.id] = msgs
            want += [violation(p.id, srv.heap.op, m) for m in msgs]
        assert got == want
        _same_as_the_plain_definitions(srv)
        type(self).judgements += 1
        return got


def _buffer(b: Any) -> tuple[Any, ...] | None:
    if b is None:
        return None
    return (b.id, b.size, b.role, b.zeroed, b.filled, b.content, b.refs, b.freed, b.version)


def _ckpt(ck: Any) -> tuple[Any, ...]:
    return (ck.id, ck.n_tokens, ck.id_task, ck.pos_min, ck.pos_max, ck.refs, _buffer(ck.tgt), _buffer(ck.dft),
            _buffer(ck.spec))


def storage(srv: Server) -> tuple[Any, ...]:
    """Everything ``on_storage`` names, spelled out: every live buffer, every holder's
    checkpoints, the cache's entries (tokens, data, checkpoints) and limits, the flags."""
    cache = srv.cache
    entries = None if cache is None else (
        cache.limit_size,
        cache.limit_tokens,
        tuple((e.id, e.prompt.tokens, _buffer(e.main), _buffer(e.drft), tuple(map(_ckpt, e.prompt.checkpoints)))
              for e in cache.entries),
    )
    return (
        tuple(_buffer(b) for _, b in sorted(srv.heap.live.items())),
        tuple(tuple(map(_ckpt, s.prompt.checkpoints)) for s in srv.slots),
        entries,
        srv.cfg,
    )


class _Plain(list[events.Event]):
    """The operation's events as a plain list, with the judge's history (what a check that
    declares ``needs`` reads)."""

    def __init__(self, new: list[events.Event], history: Any) -> None:
        super().__init__(new)
        self.history = history


def _fp(b: Any) -> tuple[int, int, int]:
    return (b.id, b.size, b.version)


def _same_as_the_plain_definitions(srv: Server) -> None:
    """The fingerprints and byte counts, written for speed, against their plain definitions
    (``buffers()`` lists, generators)."""
    for ck, _names in held_checkpoints(srv, []).values():
        assert checkpoint_fingerprint(ck) == (ck.n_tokens, ck.pos_min, ck.pos_max, tuple(_fp(b) for b in ck.buffers()))
    if srv.cache is None:
        return
    entries = srv.cache.entries
    for e in entries:
        assert entry_fingerprint(e) == (
            e.prompt.tokens,
            tuple(_fp(b) for b in e.data_buffers()),
            tuple(checkpoint_fingerprint(ck) for ck in e.prompt.checkpoints),
        )
    assert unique_bytes(entries) == sum({b.id: b.size for e in entries for b in e.buffers()}.values())
    if runs(srv.design, "entry_sizes", Fixed):  # fixed's unique accounting
        seen: set[int] = set()
        sizes = []
        for e in reversed(entries):
            sizes.append(sum(b.size for b in e.buffers() if b.id not in seen and not seen.add(b.id)))  # type: ignore[func-returns-value]
        assert srv.cache.accounted_sizes() == sizes[::-1]


@pytest.mark.parametrize("variant", sorted(ALL))
def test_the_judge_finds_what_each_check_finds(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules, "Judge", CheckedJudge)
    CheckedJudge.judgements = CheckedJudge.decode_skips = CheckedJudge.neutral = 0
    walk = Walker(ALL[variant]).walk(0, EXAMPLES)
    assert walk.examples == EXAMPLES
    assert CheckedJudge.judgements > 100
    assert CheckedJudge.decode_skips > 100
    assert CheckedJudge.neutral > 100


def test_a_storage_change_in_a_neutral_operation_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison of the storage can fail: with ``alloc`` counted storage-neutral, a
    checkpoint's creation (its buffers allocated, filled, the slot's list longer) is one."""
    wider = STORAGE_NEUTRAL_KINDS | {"alloc", "fill", "publish_ckpt", "ckpt_create"}
    monkeypatch.setitem(globals(), "STORAGE_NEUTRAL_KINDS", wider)
    monkeypatch.setattr(judge_module, "STORAGE_NEUTRAL_KINDS", wider)
    monkeypatch.setattr(rules, "Judge", CheckedJudge)
    with pytest.raises(AssertionError, match="storage-neutral operation"):
        Walker(ALL["fixed"]).walk(0, EXAMPLES)


def test_coverage_decides_by_event_classes_of_the_vocabulary() -> None:
    """``count`` and ``decisions_of`` share one table by event class (a kind without an entry
    records no decision and is passed over with one look-up): its kinds are the vocabulary's."""
    assert set(events.BY_KIND) >= coverage.DECIDING_KINDS
    assert coverage.decisions_of(events.Free(buf=1, size=2)) == ()
