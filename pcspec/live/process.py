"""A ``llama-server`` process: started on 127.0.0.1 on a free port, stopped by its own PID.

The server writes stdout and stderr to one log file (``-v``: DEBUG and TRACE lines, what the log
checker reads). ``ServerProcess`` is a context manager: leaving it stops the process (SIGTERM,
then SIGKILL after a grace period; the livelock of F1 in docs/FINDINGS.md ignores the first
SIGTERM), whatever happened inside.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Flags:
    """The server flags a live run draws (the rest are fixed: ``-t 2``, ``-v``, the host)."""

    n_slots: int = 1  # -np
    n_ctx: int = 4096  # -c (all slots together)
    n_batch: int = 64  # -b
    n_ubatch: int = 64  # -ub
    cache_ram_mib: int = 64  # --cache-ram (MiB; 0 disables, -1 no limit)
    ctx_checkpoints: int = 8  # --ctx-checkpoints
    checkpoint_min_step: int = 64  # -cms
    slot_prompt_similarity: float = 0.1  # -sps
    kv_unified: bool = False  # --kv-unified
    extra: tuple[str, ...] = field(default=())

    def argv(self) -> list[str]:
        out = [
            "-np", str(self.n_slots), "-c", str(self.n_ctx), "-b", str(self.n_batch),
            "-ub", str(self.n_ubatch), "--cache-ram", str(self.cache_ram_mib),
            "--ctx-checkpoints", str(self.ctx_checkpoints), "-cms", str(self.checkpoint_min_step),
            "-sps", f"{self.slot_prompt_similarity:g}",
        ]
        if self.kv_unified:
            out.append("--kv-unified")
        else:
            out.append("--no-kv-unified")
        return out + list(self.extra)

    def to_json(self) -> dict[str, object]:
        return {
            "n_slots": self.n_slots, "n_ctx": self.n_ctx, "n_batch": self.n_batch,
            "n_ubatch": self.n_ubatch, "cache_ram_mib": self.cache_ram_mib,
            "ctx_checkpoints": self.ctx_checkpoints, "checkpoint_min_step": self.checkpoint_min_step,
            "slot_prompt_similarity": self.slot_prompt_similarity, "kv_unified": self.kv_unified,
            "extra": list(self.extra),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Flags:
        kw = dict(d)
        kw["extra"] = tuple(kw.get("extra") or ())
        return cls(**kw)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


class ServerDied(Exception):
    """The server process exited (a crash, a GGML_ASSERT, a failed start). ``log``: its log file."""

    def __init__(self, message: str, log: Path | None = None) -> None:
        super().__init__(message)
        self.log = log


class ServerProcess:
    """One running server. ``url`` is its base URL; ``log`` its log file."""

    def __init__(self, binary: Path, model: Path, flags: Flags, workdir: Path, *,
                 name: str = "server", start_timeout: float = 60.0, kv_debug: bool = False,
                 env: dict[str, str] | None = None) -> None:
        self.binary = binary
        self.model = model
        self.flags = flags
        self.workdir = workdir
        self.name = name
        self.start_timeout = start_timeout
        self.kv_debug = kv_debug
        self.extra_env = dict(env or {})  # e.g. LLAMA_FAULTS for a build with fault points
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"{name}.log"
        self.slot_dir = workdir / f"{name}-slots"
        self.argv: list[str] = []

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> ServerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.slot_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.argv = [
            str(self.binary), "-m", str(self.model), "-t", "1", "--host", HOST, "--port", str(self.port),
            "-v", "--seed", "42", "--slot-save-path", str(self.slot_dir) + "/", "--no-webui",
            *self.flags.argv(),
        ]
        env = {**os.environ, **self.extra_env}
        if self.kv_debug:
            env["LLAMA_KV_CACHE_DEBUG"] = "1"
        logf = self.log.open("wb")
        try:
            self.proc = subprocess.Popen(self.argv, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        finally:
            logf.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ServerDied(f"{self.name} exited with {self.proc.returncode} while starting; "
                                 f"log tail:\n{self.log_tail()}", self.log)
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200 and json.loads(r.read() or b"{}").get("status") == "ok":
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.1)
        self.stop()
        raise ServerDied(f"{self.name} did not become ready within {self.start_timeout:.0f} s; "
                         f"log tail:\n{self.log_tail()}", self.log)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code. Only this
        process (by its PID) is signalled."""
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=grace)
        return p.returncode

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- the log ----------------------------------------------------------------------------

    def log_size(self) -> int:
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def log_bytes(self, start: int = 0, end: int | None = None) -> bytes:
        try:
            with self.log.open("rb") as f:
                f.seek(start)
                return f.read() if end is None else f.read(max(0, end - start))
        except OSError:
            return b""

    def log_tail(self, n: int = 30) -> str:
        data = self.log_bytes(max(0, self.log_size() - 16384))
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:])
