"""Where things are, for a test in any folder of tests/ (not relative to the test's own file)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
TESTS = ROOT / "tests"
DATA = TESTS / "data"  # logs, slot files, traces and workloads the tests read
