"""``pcspec decision``: drive a newer tree's decision endpoint (``/v1/systemone``) and check that
the server's log shows each step of its path (``pcspec.live.decision``; docs/LIVE.md). The
options are the module's own, which ``python -m pcspec.live.decision`` reads too."""

from __future__ import annotations

from typing import Any

from pcspec.live import decision


def register(sub: Any) -> None:
    p = sub.add_parser(
        "decision",
        help="drive a newer tree's decision endpoint and check its log",
        description="Send a decision request (POST /v1/systemone) to a server started with -np 2 on a tiny "
        "decision model, and check that its log shows each step of the decision path: the parent task, "
        "its children, the shared prompt copied to them. Exit 1 when a request failed or a line is missing.",
    )
    decision.add_arguments(p)
    p.set_defaults(func=decision.command)
