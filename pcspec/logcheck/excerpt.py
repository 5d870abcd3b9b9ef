"""The checkpoint and prompt-cache lines of a log, as text: what two builds' logs are compared on
(``pcspec.live.smoke``: a design's patches change how checkpoints are held, not what a healthy
run logs).

Text, not events: the comparison must also see the lines no table of the reader knows, those a
design's patch adds (fixed's ``keeping the restored context checkpoint ...``), since they are
what it is to show. A line is kept when it names a context checkpoint or the cache's saves,
loads, state or removals; its time stamp goes, and so does any address (``0x...``), which
differs from run to run.
"""

from __future__ import annotations

import re

_KEPT = re.compile(r"context checkpoint|saving prompt|found better prompt|cache state|removing|erased|erasing")
_ADDRESS = re.compile(r"0x[0-9a-f]+")


def cache_lines(text: str) -> list[str]:
    """The checkpoint and cache lines of ``text``, in order, without time stamps and addresses."""
    return [_ADDRESS.sub("0x", line.split(" ", 1)[-1]) for line in text.splitlines() if _KEPT.search(line)]
