"""``pcspec smoke``: a quick check that a built server runs the code a design's patches change: a
completion, the prompt cache, a slot save (``pcspec.live.smoke``; docs/DESIGNS.md). The options
are the module's own, which ``python -m pcspec.live.smoke`` reads too."""

from __future__ import annotations

from typing import Any

from pcspec.live import smoke


def register(sub: Any) -> None:
    p = sub.add_parser(
        "smoke",
        help="smoke-test a built server: a completion, the cache, a slot save",
        description=smoke.__doc__.split("\n\n")[0] if smoke.__doc__ else None,
    )
    smoke.add_arguments(p)
    p.set_defaults(func=smoke.command)
