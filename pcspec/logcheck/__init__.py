"""The log checker (``pcspec check-log``): read a real llama-server log, replay its prompt-cache
and checkpoint lines against the model's rules (``pcspec.model.policy``), and count what people
ask about.

Modules, in data-flow order:

* ``reader``   bytes -> lines -> prefix; ``messages`` message text -> typed ``events``;
* ``options``  rule variants that changed between server builds, and the build era a log shows;
* ``checker``  splits a log into server runs and replays each with ``slots`` (checkpoints and
  prompt starts) and ``cache`` (alloc, load, update) over the state in ``state``, with sizes as
  ``mib.Approx`` intervals; deviations use the ids in ``rules``;
* ``stats``    counters and the unique-accounting estimate; ``report`` JSON and text;
  ``trace``    the events as a JSON-lines trace.

Public API::

    read_log(path) -> LogRead                     # raises PcspecError for unreadable input
    check_events(events, options) -> CheckResult
    check_log(path, options) -> CheckResult       # both of the above
    parse_options(["sweep=always", ...]) -> Options
    write_trace(path, [(source, events)]), load_trace(path)
    RULES: dict[rule id, description]
"""

from __future__ import annotations

from pathlib import Path

from pcspec.logcheck.checker import CheckResult, check_events
from pcspec.logcheck.options import Options, Rules, parse_options
from pcspec.logcheck.reader import LogRead, parse_bytes, parse_text, read_log
from pcspec.logcheck.rules import RULES, Deviation
from pcspec.logcheck.trace import load_trace, write_trace


def check_log(path: str | Path, options: Options | None = None) -> CheckResult:
    """Read and check one log file."""
    read = read_log(path)
    return check_events(read.events, options, source=str(path), n_lines=read.n_lines,
                        notes=read.notes)


__all__ = [
    "RULES",
    "CheckResult",
    "Deviation",
    "LogRead",
    "Options",
    "Rules",
    "check_events",
    "check_log",
    "load_trace",
    "parse_bytes",
    "parse_options",
    "parse_text",
    "read_log",
    "write_trace",
]
