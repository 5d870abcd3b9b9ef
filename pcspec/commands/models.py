"""``pcspec models``: write one of the tiny generated GGUF models the live checker runs
(``pcspec.live.models``; docs/LIVE.md), to run a server by hand. The arguments are the module's
own, which ``python -m pcspec.live.models`` reads too."""

from __future__ import annotations

from typing import Any

from pcspec.live import models


def register(sub: Any) -> None:
    p = sub.add_parser(
        "models",
        help="write a tiny generated GGUF model of a memory kind",
        description=models.__doc__.split("\n\n")[0] if models.__doc__ else None,
    )
    models.add_arguments(p)
    p.set_defaults(func=models.command)
