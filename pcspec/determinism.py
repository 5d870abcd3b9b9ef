"""Make what Hypothesis generates a function of the seed alone.

With an explicit seed Hypothesis draws every choice from ``Random(seed)``, with one exception
that made ``pcspec verify`` give different verdicts on different installs of the same commit:
about one draw in twenty is replaced by a *constant mined from the source code of the modules
it considers local* (``hypothesis.internal.conjecture.providers._get_local_constants``). A
module is local when its file lies outside site-packages and the standard library, so

* ``pip install -e .`` (pcspec's files in the checkout: local, their integer literals mined)
  and ``pip install .`` (pcspec in site-packages: nothing mined) generate different examples
  from the same seed -- measured: ``pr27451 CKPT-1`` held after 61,828 steps on the first and
  was violated after 80,269 steps on the second;
* the pool also grows with every module imported during the run, and with whatever local
  code the caller happens to have loaded (a user's test module, a script in the current
  directory), so even one install does not pin it.

That mining is a heuristic for finding boundary values in *user* code; pcspec's machine draws
from small explicit ranges, so it loses nothing by turning it off. While a pcspec run is
inside :func:`seed_only_generation`, the pool of local constants is empty and the cache of
permitted constants is cleared on entry and exit (it would otherwise keep values computed
from the mined pool). Hypothesis is pinned (pyproject.toml); should a new version move these
internals, this module refuses to run rather than silently letting the verdicts drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis.internal.conjecture import providers as _providers


def _no_local_constants() -> Any:  # hypothesis's Constants (not part of its typed API)
    return _providers.Constants()  # type: ignore[attr-defined]


def _check_internals() -> None:
    missing = [
        name for name in ("_get_local_constants", "CONSTANTS_CACHE", "Constants") if not hasattr(_providers, name)
    ]
    if missing:
        raise RuntimeError(
            "pcspec cannot make this Hypothesis version deterministic (its providers module lacks "
            f"{', '.join(missing)}); install the version pyproject.toml pins"
        )


@contextmanager
def seed_only_generation() -> Iterator[None]:
    """Within the block, Hypothesis's choices depend on the seed only (see the module doc)."""
    _check_internals()
    saved = _providers._get_local_constants
    _providers._get_local_constants = _no_local_constants
    _providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        _providers._get_local_constants = saved
        _providers.CONSTANTS_CACHE.cache.clear()
