"""Run live operations against a server and record what it did, op by op.

Each operation gets an ``Observation``: the prompt as sent, the HTTP reply, and the byte range
of the server's log written while it ran (from its send to the next operation's send, after
the log settled). Async requests run on threads; ``wait`` joins them. A request that gets no
answer within the bound, or a server that dies, stops the run (``Observation.fatal``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pcspec.live.client import Client, Reply, generated
from pcspec.live.ops import LiveOp, resolve
from pcspec.live.process import ServerProcess
from pcspec.live.slotfiles import FileView, read_view


@dataclass
class Observation:
    index: int
    op: LiveOp
    tokens: list[int] = field(default_factory=list)  # the prompt as sent (requests)
    reply: Reply | None = None
    log_start: int = 0
    log_end: int = 0
    fatal: str = ""  # "timeout" | "crash": the run cannot go on
    file: FileView | str | None = None  # a save's file as written (read before a later op can change it)


@dataclass
class Run:
    observations: list[Observation] = field(default_factory=list)
    prompts: dict[int, list[int]] = field(default_factory=dict)
    replies: dict[int, list[int]] = field(default_factory=dict)
    fatal: Observation | None = None
    seconds: float = 0.0

    @property
    def n_requests(self) -> int:
        return sum(1 for o in self.observations if o.op.op == "request")


def settle(server: ServerProcess, quiet_s: float = 0.03, limit_s: float = 0.5) -> int:
    """The log's size once it stopped growing for ``quiet_s`` (at most ``limit_s``)."""
    t_end = time.monotonic() + limit_s
    size = server.log_size()
    while time.monotonic() < t_end:
        time.sleep(quiet_s)
        now = server.log_size()
        if now == size:
            return size
        size = now
    return size


class Driver:
    def __init__(self, server: ServerProcess, timeout: float = 30.0) -> None:
        self.server = server
        self.client = Client(server.url, timeout)
        self.timeout = timeout
        self.pending: list[tuple[Observation, threading.Thread]] = []

    def _send(self, obs: Observation) -> None:
        op = obs.op
        obs.reply = self.client.completion(obs.tokens, n_predict=op.n_predict, id_slot=op.id_slot,
                                           cache_prompt=op.cache_prompt)

    def _join(self, run: Run) -> Observation | None:
        bad: Observation | None = None
        for obs, th in self.pending:
            th.join(self.timeout + 5)
            self._record_reply(run, obs)
            if bad is None and obs.fatal:
                bad = obs
        end = settle(self.server)
        for obs, _ in self.pending:
            obs.log_end = end  # the group's log: from its first send to the last answer
        self.pending.clear()
        return bad

    def _record_reply(self, run: Run, obs: Observation) -> None:
        r = obs.reply
        if r is None or r.timed_out:
            obs.fatal = "timeout"
        elif r.status == 0 and not self.server.alive():
            obs.fatal = "crash"
        if r is not None and r.ok:
            run.replies[obs.op.id] = generated(r)

    def execute(self, run: Run, ops: list[LiveOp]) -> bool:
        """Run ``ops`` (appending to ``run``); False once the run cannot go on."""
        t0 = time.monotonic()
        try:
            return all(self._one(run, op) for op in ops)
        finally:
            run.seconds += time.monotonic() - t0

    def finish(self, run: Run) -> None:
        """Join what is still running; close every observation's log range."""
        if run.fatal is None and self.pending:
            bad = self._join(run)
            if bad is not None:
                run.fatal = bad
        end = settle(self.server)
        for obs in run.observations:
            if obs.log_end == 0:
                obs.log_end = end

    def run(self, ops: list[LiveOp], deadline: float | None = None) -> Run:
        run = Run()
        for op in ops:
            if deadline is not None and time.monotonic() > deadline:
                break
            if not self.execute(run, [op]):
                break
        self.finish(run)
        return run

    def _one(self, run: Run, op: LiveOp) -> bool:
        i = len(run.observations)
        obs = Observation(i, op, log_start=settle(self.server) if not self.pending else self.server.log_size())
        run.observations.append(obs)
        if op.op == "request":
            if op.delay_ms:
                time.sleep(op.delay_ms / 1000)
                obs.log_start = self.server.log_size()
            obs.tokens = resolve(op, run.prompts, run.replies)
            run.prompts[op.id] = obs.tokens
            if op.is_async:
                th = threading.Thread(target=self._send, args=(obs,), daemon=True)
                th.start()
                self.pending.append((obs, th))
                return True
            self._send(obs)
            self._record_reply(run, obs)
        elif op.op == "wait":
            bad = self._join(run)
            if bad is not None:
                obs.log_end = self.server.log_size()
                run.fatal = bad
                return False
        elif op.op in ("slot_save", "slot_restore"):
            obs.reply = self.client.slot_action(op.id_slot, op.op[5:], op.filename)
            if op.op == "slot_save" and obs.reply.ok:
                obs.file = read_file(self.server.slot_dir / op.filename)
        elif op.op == "slot_erase":
            obs.reply = self.client.slot_action(op.id_slot, "erase")
        elif op.op == "corrupt_file":
            corrupt(self.server.slot_dir / op.filename, op)
        if obs.reply is not None and obs.reply.status == 0 and not obs.fatal:
            obs.fatal = "crash" if not self.server.alive() else "timeout"
        obs.log_end = settle(self.server) if not self.pending else self.server.log_size()
        if obs.fatal:
            run.fatal = obs
            return False
        return True


def read_file(path: Path) -> FileView | str:
    try:
        return read_view(path.read_bytes(), path.name)
    except OSError as e:
        return f"cannot read {path.name}: {e.strerror}"


def corrupt(path: Path, op: LiveOp) -> None:
    """The fault model's hand on the disk (``pcspec.core.ops`` ``corrupt_file``)."""
    try:
        raw = bytearray(path.read_bytes())
    except OSError:
        return
    if op.truncate is not None:
        raw = raw[: op.truncate]
    else:
        for i, b in enumerate(op.data):
            if op.offset + i < len(raw):
                raw[op.offset + i] = b
    path.write_bytes(bytes(raw))
