"""The log checker (``pcspec check-log``): read a real llama-server log, replay its prompt-cache
and checkpoint lines against the model's rules (``pcspec.model.policy``), and count what people
ask about.

Modules, in data-flow order:

* ``source``   a log file as newline-terminated blocks in bounded memory; ``reader`` blocks ->
  lines -> prefix; ``messages`` message text -> typed ``events``;
* ``scan``     the first pass: what each server run shows (``RunSummary``); ``builds`` the format
  era and the build it shows; ``options`` rule variants that changed between server builds and
  their resolution for a run;
* ``checker``  the second pass: replays each run with ``selection`` (slot picks), ``slots``
  (checkpoints, prompt starts, slot-file restores) and ``cache`` (alloc, load, update) over the
  state in ``state`` and ``context``, with sizes as ``mib.Approx`` intervals; deviations use the
  ids in ``rules``;
* ``levels``   the C++ log level of each line kind; ``needs`` the lines each rule needs, and
  what a run's verbosity lets it judge; ``cut`` a ``-v`` log cut to a lower verbosity
  (``python -m pcspec.logcheck.cut``); ``mutate`` the one-line mutation campaign
  (``python -m pcspec.logcheck.mutate``);
* ``stats``    counters and the unique-accounting estimate; ``report`` JSON and text;
  ``trace``    the events as a JSON-lines trace;
* ``logged``   the events as the records of ``pcspec.model.logged``, the vocabulary the
  model's events share (what ``pcspec live`` compares);
* ``tasks``    the lines of how the server runs its tasks (the queue, decision tasks), which the
  checker does not replay, and ``read_events``: every event of a log, the one way ``pcspec
  live`` and ``pcspec bench`` read one; ``excerpt`` a log's checkpoint and cache lines as text
  (two builds' logs compared).

Every llama-server line pcspec reads is recognised in this package and nowhere else
(``tests/project/test_log_lines.py``).

``check_log`` reads the file twice, side by side (the first pass at most one server run ahead),
so its memory does not depend on the log's length.

Public API::

    check_log(path, options, trace=None) -> CheckResult  # raises PcspecError for bad input
    check_events(events, options) -> CheckResult         # events held in memory
    read_log(path) -> LogRead                            # all events in memory (tests, tools)
    read_events(text) -> list[Event]                     # also the task lines (live, bench)
    parse_options(["sweep=always", ...]) -> Options
    TraceWriter(path), load_trace(path)
    RULES: dict[rule id, description]
"""

from __future__ import annotations

from pathlib import Path

from pcspec.core.errors import PcspecError
from pcspec.logcheck.checker import CheckResult, LogChecker, check_events
from pcspec.logcheck.options import Options, Rules, parse_options
from pcspec.logcheck.reader import LogRead, ReadInfo, parse_bytes, parse_text, read_log, stream_events
from pcspec.logcheck.rules import RULES
from pcspec.logcheck.scan import scan_runs
from pcspec.logcheck.source import LogFile
from pcspec.logcheck.tasks import read_events
from pcspec.logcheck.trace import TraceWriter, load_trace


def check_log(path: str | Path, options: Options | None = None,
              trace: TraceWriter | None = None) -> CheckResult:
    """Read and check one log file, writing its events to ``trace`` if given. Raises
    ``PcspecError`` (one line, naming the file) for input that is not a log: empty, binary
    data, or text without a single llama-server line."""
    with LogFile(path) as log:
        if log.looks_binary and next(stream_events(log), None) is None:
            raise PcspecError("binary data, not a llama-server log", log.source)
        info = ReadInfo()
        checker = LogChecker(options, scan_runs(stream_events(log)), log.source)
        if trace is not None:
            trace.begin(log.source)
        for e in stream_events(log, info):
            checker.feed(e)
            if trace is not None:
                trace.write(e)
        if info.n_server_lines == 0:
            raise PcspecError("no llama-server line in it (no line with the server's 'srv' or "
                              "'slot' log prefix): not a llama-server log", log.source)
        return checker.finish(info.n_lines, info.notes)


__all__ = [
    "RULES",
    "CheckResult",
    "LogRead",
    "Options",
    "Rules",
    "TraceWriter",
    "check_events",
    "check_log",
    "load_trace",
    "parse_bytes",
    "parse_options",
    "parse_text",
    "read_events",
    "read_log",
]
