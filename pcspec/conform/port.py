"""Running a port: one child process, JSON lines in and out, several traces per process.

Each trace is sent whole (``begin``, then its operations) and its answers are read afterwards;
a reader thread drains the port's output as it comes, so neither side ever blocks the other,
and the port can work on one trace while the kit prepares the next. A port that exits, stalls
(no answer within ``timeout`` seconds) or answers something that is not a JSON object ends
the session with a ``PortError`` naming what happened and the tail of its standard error.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import threading
from collections import deque
from typing import IO, Any

from pcspec.conform.protocol import SCHEMA
from pcspec.core.errors import PcspecError

OBS_KEYS = ("events", "slots", "ckpts", "entries", "accounted", "unique", "limit")


class PortError(Exception):
    """The port died, stalled, or broke the protocol."""


def check_answer(answer: Any) -> str | None:
    """Why an answer is not an observation (or an ``error`` line), or None."""
    if not isinstance(answer, dict):
        return "an answer must be a JSON object"
    if "error" in answer:
        return None
    missing = [k for k in OBS_KEYS if k not in answer]
    if missing:
        return f"the observation lacks {', '.join(missing)}"
    if not all(isinstance(answer[k], list) for k in ("events", "slots", "ckpts", "entries")):
        return "events, slots, ckpts and entries must be arrays"
    return None


class Port:
    def __init__(self, cmd: str, timeout: float = 20.0, env: dict[str, str] | None = None) -> None:
        self.cmd = cmd
        self.timeout = timeout
        argv = shlex.split(cmd)
        if not argv:
            raise PcspecError("--cmd is empty")
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
                env={**os.environ, **(env or {})},
            )
        except OSError as exc:
            raise PcspecError(f"cannot start the port {cmd!r}: {exc.strerror or exc}") from None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: deque[str] = deque(maxlen=40)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._drain, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._drain, args=(self.proc.stderr, False), daemon=True).start()
        self.pending = 0  # answers owed for lines already sent
        self.input_closed = False  # a write found the port's input closed (see send)

    def _drain(self, stream: IO[str], out: bool) -> None:
        for line in stream:
            if out:
                self.lines.put(line)
            else:
                self.stderr.append(line.rstrip("\n"))
        if out:
            self.lines.put(None)

    def send(self, lines: list[dict[str, Any]]) -> None:
        """Send lines without waiting for their answers.

        A port that has closed its input (it exited) is not an error here: what it printed
        before it went is read, and judged, by ``receive``, which then reports the exit. Raising
        at the write would hide that answer (a port that answers ``{"schema": 2}`` and exits
        is refused for its schema, not for exiting), and whether the write or the exit comes
        first is a race the machine's load decides."""
        assert self.proc.stdin is not None
        self.pending += len(lines)
        if self.input_closed:
            return
        text = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines)
        try:
            self.proc.stdin.write(text)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.input_closed = True

    def receive(self, n: int, handshake: bool = False) -> list[dict[str, Any]]:
        """The next ``n`` answers (observations, or the answer to ``begin``)."""
        out: list[dict[str, Any]] = []
        for _ in range(n):
            try:
                line = self.lines.get(timeout=self.timeout)
            except queue.Empty:
                raise PortError(f"the port gave no answer within {self.timeout:g} s{self._tail()}") from None
            if line is None:
                self.lines.put(None)
                raise PortError(self._died(f"after {len(out)} of {n} answers"))
            try:
                answer = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PortError(f"the port answered a line that is not JSON ({exc.msg}): {line[:200]!r}") from None
            why = ("the answer to begin must be a JSON object" if not isinstance(answer, dict) else None) \
                if handshake else check_answer(answer)
            if why is not None:
                raise PortError(f"the port broke the protocol: {why}: {line[:300]!r}")
            out.append(answer)
        self.pending -= n
        return out

    def begin(self, line: dict[str, Any], ops: list[dict[str, Any]]) -> None:
        self.send([line, *ops])

    def answers(self, n_ops: int) -> list[dict[str, Any]]:
        """The answers of a trace sent with ``begin``: the handshake, then one per operation."""
        ready = self.receive(1, handshake=True)[0]
        if ready.get("schema") != SCHEMA and "error" not in ready:
            raise PortError(f"the port speaks schema {ready.get('schema')!r}, not {SCHEMA}")
        if "error" in ready:
            raise PortError(f"the port refused the trace: {ready['error']}")
        return self.receive(n_ops)

    def _died(self, when: str) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        return f"the port exited ({'code ' + str(code) if code is not None else 'still running'}) {when}{self._tail()}"

    def _tail(self) -> str:
        if not self.stderr:
            return ""
        return "; its standard error ends with:\n    " + "\n    ".join(list(self.stderr)[-12:])

    def kill(self) -> None:
        """End a port that failed (it may be stalled: no waiting for it)."""
        self.proc.kill()
        self.proc.wait()

    def tail(self) -> str:
        return self._tail()

    def close(self) -> int | None:
        """Close its input and wait for it; its exit status (None: it had to be killed)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            return self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
            return None

    def __enter__(self) -> Port:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
