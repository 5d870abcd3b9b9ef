"""Log checker throughput: lines per second for reading + parsing + checking a log.

The two real sample logs (tests/data/real) are concatenated and repeated to about 1M lines
(each copy is a separate server run for the checker, as a restart would be), written to a
temporary file, and checked end to end with ``pcspec.logcheck.check_log``: file read, UTF-8
decoding, prefix stripping, event building, replay and statistics. The best of ``--repeat``
runs is reported. Target (docs/PERFORMANCE.md, "Targets"): at least 100,000 lines/s.

    python benchmarks/logcheck_speed.py [--lines 1000000] [--repeat 3] [--logs DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from pcspec.logcheck import check_log

DEFAULT_LOGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "real"
TARGET = 100_000


def build(logs_dir: Path, n_lines: int) -> tuple[bytes, int]:
    parts = [(logs_dir / name).read_bytes() for name in ("01-growing.log", "03-eviction.log")]
    for p in parts:
        if not p.endswith(b"\n"):
            raise SystemExit("sample logs must end with a newline")
    unit = b"".join(parts)
    per_unit = unit.count(b"\n")
    copies = max(1, round(n_lines / per_unit))
    return unit * copies, per_unit * copies


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="approximate log length")
    ap.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS, help="folder of the sample logs")
    args = ap.parse_args(argv)
    data, n_lines = build(args.logs, args.lines)
    fd, name = tempfile.mkstemp(suffix=".log")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        best = float("inf")
        result = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            result = check_log(name)
            best = min(best, time.perf_counter() - t0)
    finally:
        os.unlink(name)
    assert result is not None
    rate = n_lines / best
    print(f"log checker: {n_lines} lines ({len(data) / 1e6:.1f} MB, {result.n_events} events, "
          f"{len(result.runs)} server runs) in {best:.3f} s = {rate:,.0f} lines/s "
          f"(target {TARGET:,}); deviations: {result.n_deviations}")
    return 0 if rate >= TARGET and not result.n_deviations else 1


if __name__ == "__main__":
    sys.exit(main())
