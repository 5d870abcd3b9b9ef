"""``pcspec build``: build ``llama-server`` from a llama.cpp tree, or a design's tree and patches
(``pcspec.live.build``; docs/LIVE.md, docs/DESIGNS.md). The options are the module's own, which
``python -m pcspec.live.build`` reads too."""

from __future__ import annotations

from typing import Any

from pcspec.live import build


def register(sub: Any) -> None:
    p = sub.add_parser(
        "build",
        help="build llama-server from a llama.cpp tree or a design (cached)",
        description=build.__doc__.split("\n\n")[0] if build.__doc__ else None,
    )
    build.add_arguments(p)
    p.set_defaults(func=build.command)
