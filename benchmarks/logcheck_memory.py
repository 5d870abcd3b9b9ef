"""Log checker memory: the peak RSS of ``pcspec check-log`` on logs of two sizes, side by side.

Each log is the two real sample logs (tests/data/real, docs/SOURCES.md) repeated until it
reaches the size asked for. Every copy begins with the server's start-up lines, so the checker
sees a server restart between copies (the only way to repeat request blocks and keep the log
valid: a request's lines depend on everything the slot and the cache held before it). The logs
are written to a temporary folder, streamed so this script itself stays small, and deleted
afterwards. Each check runs as its own process; its peak RSS is read from ``os.wait4``'s
``ru_maxrss`` for that process alone.

The checker reads a log in blocks, twice, side by side (a first pass at most one server run
ahead of the replay), so its peak RSS should not depend on the log's size.

    python benchmarks/logcheck_memory.py [--sizes-mb 100 1000] [--tmp DIR] [--python-path DIR]

``--python-path`` runs the checker from another source tree (for example a ``git archive`` of
an older commit) to compare.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_LOGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "real"


def write_log(path: Path, unit: bytes, size: int) -> tuple[int, int]:
    """Write whole copies of ``unit`` until ``size`` bytes; (bytes, copies). One copy at a time:
    this process must stay small, because Linux carries the high-water RSS a child had before
    ``exec`` (that is, this process's) into the child's ``ru_maxrss``."""
    copies = max(1, round(size / len(unit)))
    with open(path, "wb") as f:
        for _ in range(copies):
            f.write(unit)
    return copies * len(unit), copies


def peak_rss(log: Path, python_path: str | None) -> tuple[int, float, int]:
    """(peak RSS in KiB, seconds, exit code) of one ``pcspec check-log --json`` process."""
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    t0 = time.perf_counter()
    # cwd: "python -m" puts the working directory first on sys.path, before PYTHONPATH
    proc = subprocess.Popen([sys.executable, "-m", "pcspec", "check-log", "--json", str(log)],
                            stdout=subprocess.DEVNULL, env=env, cwd=log.parent)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss, time.perf_counter() - t0, proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[100, 1000],
                    help="log sizes in MB (10^6 bytes)")
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS, help="folder of the sample logs")
    ap.add_argument("--tmp", type=Path, default=None, help="where to write the logs")
    ap.add_argument("--python-path", default=None, help="PYTHONPATH for the checker process")
    args = ap.parse_args(argv)
    parts = [(args.logs / name).read_bytes() for name in ("01-growing.log", "03-eviction.log")]
    if not all(p.endswith(b"\n") for p in parts):
        raise SystemExit("sample logs must end with a newline")
    unit = b"".join(parts)
    unit_lines = unit.count(b"\n")
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for mb in args.sizes_mb:
            path = Path(tmp) / f"log-{mb:g}MB.log"
            size, copies = write_log(path, unit, int(mb * 1e6))
            rss, secs, code = peak_rss(path, args.python_path)
            path.unlink()
            rows.append((size, copies * unit_lines, copies * 2, rss, secs, code))
    print(f"{'log size':>10} {'lines':>12} {'runs':>7} {'peak RSS':>10} {'RSS/size':>9} "
          f"{'time':>8} {'lines/s':>10}  exit")
    for size, lines, runs, rss, secs, code in rows:
        print(f"{size / 1e6:>7.0f} MB {lines:>12,} {runs:>7,} {rss / 1024:>6.1f} MiB "
              f"{rss * 1024 / size:>9.3f} {secs:>7.1f}s {lines / secs:>10,.0f}  {code}")
    return 0 if all(r[5] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
