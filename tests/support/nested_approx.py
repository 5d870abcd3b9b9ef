"""pytest.approx does not compare nested sequences (pytest >= 9.1 rejects them): flatten."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def flat(x: Any) -> list[float]:
    if isinstance(x, Iterable) and not isinstance(x, str | bytes):
        return [v for item in x for v in flat(item)]
    return [x]


def approx_flat(expected: Any) -> Any:
    import pytest

    return pytest.approx(flat(expected))
