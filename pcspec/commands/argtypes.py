"""Argument types shared by the sub-commands: each refuses what the option cannot mean.

argparse calls them with the option's text; an ``argparse.ArgumentTypeError`` becomes the
one-line usage error ``pcspec CMD: error: argument --OPTION: <why>`` (exit 2), so the option is
named by argparse and the message here says what would be accepted.
"""

from __future__ import annotations

import argparse
import math

SHOWN = 40  # characters of a refused value echoed back (an argument can be any length)


def _shown(text: str) -> str:
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def seconds(text: str) -> float:
    """A time budget (``--hunt-seconds``, ``--survey-seconds``): a finite number above 0.

    ``float`` alone takes ``-1``, ``nan`` and ``inf``: a negative budget ends every run before
    its first example (every verdict ``unknown``), ``nan`` compares false with every clock
    reading so it never ends a run, and ``inf`` removes the cap the option exists for.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {_shown(text)}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds above 0, got {_shown(text)}")
    return value


def count(text: str) -> int:
    """A non-negative integer (``--n-ctx-checkpoints``, ``--state-size``, ``--slot``).

    ``int`` alone takes ``-1``; for ``--n-ctx-checkpoints`` the reader would then keep every
    checkpoint (a negative cap converts to a huge ``size_t`` in the C++), which is never what
    a user asking for a cap meant.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {_shown(text)}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 0, got {_shown(text)}")
    return value


def positive(text: str) -> int:
    """A whole number of at least 1 (``--workers``, ``--proof-timeout``, ``--entries``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {_shown(text)}") from None
    if value < 1:  # (count's own check would say "at least 0" of a negative value)
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {_shown(text)}")
    return value
