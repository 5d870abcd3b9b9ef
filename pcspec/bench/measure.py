"""Measuring a workload on a design's real server: per request the prompt cache update time (the
server's own ``prompt cache update took X ms`` line, server-context.cpp:1636 of 0c1e570), the
time to the first streamed token, the whole request's time, and the process's RSS and peak RSS
(``/proc/PID/status``: ``VmRSS``, ``VmHWM``; the peak is reset before each request by writing 5
to ``/proc/PID/clear_refs``, so each request's peak is its own). The server's log also gives what
its cache believes it holds (``- cache state: N prompts, X MiB``) and the checkpoints it created.

Each request is sent alone and answered before the next (one connection, ``stream: true``).
"""

from __future__ import annotations

import http.client
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcspec.bench.predict import flags
from pcspec.bench.workload import Request, Workload
from pcspec.live.client import completion_body
from pcspec.live.process import HOST, ServerProcess
from pcspec.logcheck import events as ev
from pcspec.logcheck import read_events

MIB = 1024 * 1024
# the lines of an entry leaving the cache but for a load (server-task.cpp:1742, 1753, 1873, 1887)
_EVICTIONS = (ev.CacheObsoleteRemoved, ev.CacheMakeRoom, ev.CacheLimitEvict, ev.CacheTokenEvict)


@dataclass
class Measured:
    index: int
    update_ms: float | None  # None: the request ran no cache update (or the log did not say)
    ttft_ms: float
    total_ms: float
    rss: int  # bytes, after the request
    peak_rss: int  # bytes, the most during the request
    cache_mib: float | None  # what the server's cache says it holds after the request
    cache_prompts: int | None
    checkpoints: int  # checkpoints created during the request
    ckpt_mib: float | None  # the size of the last one the request created
    evictions: int = 0  # entries the cache dropped (not counting loads)
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Run:
    design: str
    repeat: int
    idle_rss: int  # after start, before any request
    requests: list[Measured] = field(default_factory=list)
    log: str = ""


@dataclass(frozen=True)
class LogFigures:
    """What the server's log says of one request (``Measured``'s fields of the same names)."""

    update_ms: float | None
    cache_mib: float | None
    cache_prompts: int | None
    checkpoints: int
    ckpt_mib: float | None
    evictions: int

    @classmethod
    def of(cls, log: bytes) -> LogFigures:
        """The figures of the request's lines ``log``: every cache update's time summed, the
        last ``cache state`` line's, and the checkpoints created with their ``k of N`` (those
        the designs' builds print)."""
        events = read_events(log.decode("utf-8", errors="replace"))
        upd = [e.ms for e in events if isinstance(e, ev.CacheUpdateDone) and e.ms is not None]
        states = [e for e in events if isinstance(e, ev.CacheSummary)]
        ckpts = [e for e in events if isinstance(e, ev.CheckpointCreated) and e.index is not None]
        return cls(sum(upd) if upd else None, states[-1].total_mib if states else None,
                   states[-1].n_prompts if states else None, len(ckpts), ckpts[-1].size if ckpts else None,
                   sum(isinstance(e, _EVICTIONS) for e in events))


def _status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def _reset_peak(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _stream(port: int, body: dict[str, Any], timeout: float) -> tuple[float, float, str]:
    """POST /completion with ``stream``; (ms to the first token, ms to the end, error)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    t0 = time.monotonic()
    first: float | None = None
    try:
        conn.request("POST", "/completion", json.dumps({**body, "stream": True}),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return 0.0, (time.monotonic() - t0) * 1000, f"HTTP {resp.status}: {resp.read()[:200]!r}"
        while True:
            line = resp.readline()
            if not line:
                break
            if first is None and line.startswith(b"data: "):
                first = time.monotonic()
    except (OSError, http.client.HTTPException) as exc:
        return 0.0, (time.monotonic() - t0) * 1000, f"no answer: {exc}"
    finally:
        conn.close()
    end = time.monotonic()
    return ((first or end) - t0) * 1000, (end - t0) * 1000, ""


def measure_request(srv: ServerProcess, r: Request, w: Workload, timeout: float) -> Measured:
    assert srv.proc is not None
    pid = srv.proc.pid
    _reset_peak(pid)
    start = srv.log_size()
    body = completion_body(r.tokens, n_predict=w.n_predict, id_slot=r.id_slot)
    ttft, total, error = _stream(srv.port, body, timeout)
    time.sleep(0.05)  # the log lines of the release are written right after the last chunk
    st = _status(pid) if srv.alive() else {}
    log = LogFigures.of(srv.log_bytes(start))
    if not srv.alive():
        error = error or f"the server exited with {srv.returncode()}"
    return Measured(
        r.index, log.update_ms, ttft, total, st.get("VmRSS", 0), st.get("VmHWM", 0),
        log.cache_mib, log.cache_prompts, log.checkpoints, log.ckpt_mib, log.evictions, error,
    )


def run_design(binary: Path, model: Path, w: Workload, design: str, repeat: int, workdir: Path,
               timeout: float = 300.0) -> Run:
    """One server of ``design``, the workload's requests in order; the server is stopped after."""
    srv = ServerProcess(binary, model, flags(w), workdir, name=f"{design}-r{repeat}", start_timeout=120.0)
    with srv:
        assert srv.proc is not None
        time.sleep(0.2)
        run = Run(design, repeat, _status(srv.proc.pid).get("VmRSS", 0), log=str(srv.log))
        for r in w.requests():
            m = measure_request(srv, r, w, timeout)
            run.requests.append(m)
            if m.error:
                break
    return run


def load_average() -> float:
    """The one-minute load average (a measurement taken on a loaded machine says so)."""
    return os.getloadavg()[0]
