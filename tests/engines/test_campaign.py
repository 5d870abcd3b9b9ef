"""``pcspec campaign``: disjoint seed blocks per worker, and a merged result that does not
depend on how the range was split (one process, two processes, two separate runs merged)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pcspec.cli import main
from pcspec.core.campaign import blocks
from pcspec.core.errors import PcspecError
from pcspec.engines import campaign

MUTANT = "mutant:undercount"  # violates ACC-1, ACC-2 and LIMIT-1 within a few examples
PROPS = ["ACC-1", "LIMIT-1", "REF-1"]


def test_blocks_are_disjoint_and_cover_the_range() -> None:
    assert blocks(10, 21, 3) == [(10, 14), (14, 18), (18, 21)]
    assert blocks(0, 2, 4) == [(0, 1), (1, 2)]


def _campaign(tmp: Path, *args: str) -> dict[str, Any]:
    props = [x for p in PROPS for x in ("--property", p)]
    code = main(["campaign", "--variant", MUTANT, *props, "--out", str(tmp), *args])
    assert code in (0, 1, 3)
    data: dict[str, Any] = json.loads((tmp / "campaign.json").read_text())
    data["exit"] = code
    return data


def _merge(tmp: Path) -> int:
    """``pcspec campaign --merge`` of the records in ``tmp/a`` and ``tmp/b`` into ``tmp/m``."""
    return main(["campaign", "--merge", str(tmp / "a/campaign.json"), str(tmp / "b/campaign.json"),
                 "--out", str(tmp / "m")])


def _comparable(data: dict[str, Any]) -> Any:
    """The record without timings and output paths."""
    rows = [{k: v for k, v in r.items() if k != "trace"} for r in data["results"]]
    return {k: v for k, v in data.items() if k not in ("seconds", "results", "exit")} | {"results": rows}


@pytest.mark.slow
def test_one_process_two_processes_and_a_merge_agree(tmp_path: Path) -> None:
    one = _campaign(tmp_path / "one", "--seeds", "0:24")
    two = _campaign(tmp_path / "two", "--seeds", "0:24", "--workers", "2")
    a = _campaign(tmp_path / "a", "--seeds", "0:10")
    b = _campaign(tmp_path / "b", "--seeds", "10:24")
    assert _merge(tmp_path) == one["exit"]
    merged = json.loads((tmp_path / "m/campaign.json").read_text())
    assert _comparable(one) == _comparable(two) == _comparable(merged)
    assert a["seeds"]["covered"] == [[0, 10]] and b["seeds"]["covered"] == [[10, 24]]
    verdicts = {r["property"]: r["verdict"] for r in one["results"]}
    assert verdicts == {"ACC-1": "violated", "LIMIT-1": "violated", "REF-1": "holds"}
    assert one["exit"] == 0  # every verdict as the oracle expects for the mutant (REF-1: no expectation)
    for r in one["results"]:
        if r["verdict"] == "violated":
            assert main(["replay", r["trace"], "--json"]) == 0
            assert r["length"] <= 8


def test_overlapping_records_are_not_merged(tmp_path: Path) -> None:
    _campaign(tmp_path / "a", "--seeds", "0:4")
    _campaign(tmp_path / "b", "--seeds", "3:6")
    with pytest.raises(PcspecError, match="overlap"):
        spec, _req, part = campaign.from_json(json.loads((tmp_path / "a/campaign.json").read_text()), "a")
        _s, _r, other = campaign.from_json(json.loads((tmp_path / "b/campaign.json").read_text()), "b")
        part.absorb(other, spec.keep)
    assert _merge(tmp_path) == 2


def test_a_time_cap_gives_unknown_never_holds(tmp_path: Path) -> None:
    part = campaign.run(campaign.Spec.of("fixed", ["REF-1"]), 0, 10**9, 1, 0.5)
    assert part.covered and part.covered[0][1] < 10**9
    [v] = campaign.verdicts(campaign.Spec.of("fixed", ["REF-1"]), part, (0, 10**9))
    assert v.verdict == "unknown"


def test_bad_seed_ranges_are_refused() -> None:
    for bad in ("5:5", "x", "3", "-1:4", "4:2"):
        assert main(["campaign", "--seeds", bad]) == 2


def test_a_lost_block_is_named_in_the_record_and_never_a_pass() -> None:
    """A block whose worker died (pcspec/core/pool.py) covers nothing: the record names it, a
    merge keeps it, and no property holds over the range it leaves out."""
    spec = campaign.Spec.of(MUTANT, ["REF-1"])
    part = campaign.Part(covered=[(0, 4)], examples=4)
    part.absorb(campaign.Part(lost=["lost unit seeds 4:8: its worker process died (killed by SIGKILL)"]), spec.keep)
    record = campaign.to_json(spec, (0, 8), part)
    assert record["lost"] == part.lost
    _spec, _req, back = campaign.from_json(json.loads(json.dumps(record)), "record")
    assert back.lost == part.lost
    assert [v.verdict for v in campaign.verdicts(spec, back, (0, 8))] == ["unknown"]
    assert "lost" not in campaign.to_json(spec, (0, 4), campaign.Part(covered=[(0, 4)]))  # (a whole run's record)
