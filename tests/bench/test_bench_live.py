"""``pcspec bench`` on real servers (skipped without the builds: pcspec build
--design NAME): the server's own cache accounting is the model's to the rounding of its log line,
the checkpoints it creates are the model's, and the process's RSS grows by what the model holds,
within the allocator's slack (docs/BENCH.md, "Model and process")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pcspec.bench.run import bench, binary_of, measured_figures
from pcspec.bench.workload import PRESETS

pytestmark = [pytest.mark.live, pytest.mark.slow]

pytest.importorskip("gguf")


def _built(*designs: str) -> None:
    for d in designs:
        if binary_of(d)[0] is None:
            pytest.skip(f"{d} is not built (pcspec build --design {d})")


@pytest.mark.parametrize("name", ["grown", "alternating"])
def test_the_server_and_the_model_agree_on_the_bytes(name: str, tmp_path: Path) -> None:
    _built("baseline", "pr30137")
    w = replace(PRESETS[name], turns=4, repeats=1)
    res = bench(w, ["baseline", "pr30137"], model_only=False, workdir=tmp_path)
    for d in res.designs:
        (run,) = d.runs
        assert not any(m.error for m in run.requests), [m.error for m in run.requests]
        for m, p in zip(run.requests, d.predicted, strict=True):
            # the server's "cache state" line rounds to the KiB
            assert m.cache_mib is not None and abs(m.cache_mib - p.accounted / 2**20) < 0.01
        assert [m.checkpoints for m in run.requests] == [p.created for p in d.predicted]
        assert [m.evictions for m in run.requests] == [p.evictions for p in d.predicted]
        # the RSS over the idle server is at least what the model holds after the request (the
        # process holds it too) and at most its peak plus the allocator's slack
        last, p = run.requests[-1], d.predicted[-1]
        growth = (last.rss - run.idle_rss) / 2**20
        assert growth >= 0.9 * p.physical / 2**20 - 16, (d.design, growth, p.physical / 2**20)
        assert growth <= 1.6 * p.peak / 2**20 + 128, (d.design, growth, p.peak / 2**20)
    baseline, shared = (measured_figures(d) for d in res.designs)
    # the seeds' direction: a shared save keeps the RSS down
    assert shared["peak_rss_mib"].mid < baseline["peak_rss_mib"].mid  # type: ignore[union-attr]
