"""A live campaign for one model kind: runs with drawn flags until a request count or a time
budget, every finding shrunk (once per class) and written, explained or not. The requests are a
range covered by the one campaign runner (``pcspec.core.campaign``, which the model's walker
campaigns use too), as one block in this process: one server run at a time.

Each run is a fresh server with flags drawn from the seed (``draw_flags``) and a fuzzed
workload; the uncached answers come from one reference server per batch geometry, kept for the
campaign. A finding that is not an observation stops its run (the analysis still judges all of
it); the campaign goes on with the next run, so one campaign meets every class it can.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pcspec.core.campaign import cover, run_blocks
from pcspec.core.results import Finding
from pcspec.live import calibrate
from pcspec.live.analyze import is_observation, to_json
from pcspec.live.client import Client
from pcspec.live.explain import explain
from pcspec.live.fuzz import Fuzzer
from pcspec.live.models import ensure_model
from pcspec.live.ops import LiveOp
from pcspec.live.process import Flags, ServerProcess
from pcspec.live.report import write_finding
from pcspec.live.session import Outcome, Target, execute
from pcspec.live.shrink import literal_ok, same_class, shrink
from pcspec.live.transparency import TOLERANCE, TOLERANCES, Reference


def draw_flags(rng: random.Random, kind: str) -> Flags:
    n_slots = rng.choice((1, 1, 2, 2, 3))
    n_batch = rng.choice((32, 64, 128))
    n_ubatch = rng.choice([u for u in (16, 32, 64) if u <= n_batch])
    return Flags(
        n_slots=n_slots,
        n_ctx=n_slots * rng.choice((1024, 2048)),
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        cache_ram_mib=rng.choice((0, 1, 1, 2, 8, 64, -1)),
        ctx_checkpoints=rng.choice((0, 2, 4, 8, 8)) if kind != "kv" else 8,
        checkpoint_min_step=rng.choice((0, 16, 64, 256)),
        slot_prompt_similarity=rng.choice((0.0, 0.1, 0.1, 0.5)),
        kv_unified=rng.random() < 0.3,
    )


@dataclass
class Reported:
    finding: Finding
    directory: Path | None
    explanation: str | None
    shrunk_ops: int = 0
    original_ops: int = 0


@dataclass
class KindReport:
    kind: str
    runs: int = 0
    requests: int = 0
    seconds: float = 0.0
    live_seconds: float = 0.0  # time spent sending requests (requests/s)
    transparency_checks: int = 0
    max_logprob_diff: float = 0.0
    compared_segments: int = 0
    reported: list[Reported] = field(default_factory=list)
    classes_seen: dict[str, int] = field(default_factory=dict)

    @property
    def unexplained(self) -> list[Reported]:
        return [r for r in self.reported if r.explanation is None and not is_observation(r.finding)]

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind, "runs": self.runs, "requests": self.requests,
            "seconds": round(self.seconds, 1), "live_seconds": round(self.live_seconds, 1),
            "requests_per_second": round(self.requests / self.live_seconds, 2) if self.live_seconds else None,
            "transparency_checks": self.transparency_checks,
            "max_logprob_diff": round(self.max_logprob_diff, 4),
            "compared_segments": self.compared_segments,
            "classes_seen": self.classes_seen,
            "findings": [
                {**to_json(r.finding), "directory": str(r.directory) if r.directory else None,
                 "explanation": r.explanation, "shrunk_ops": r.shrunk_ops, "original_ops": r.original_ops}
                for r in self.reported
            ],
            "unexplained": len(self.unexplained),
        }


class References:
    """One reference server per (n_batch, n_ubatch), cache off, kept for the campaign."""

    def __init__(self, binary: Path, model: Path, workdir: Path, timeout: float, kind: str = "") -> None:
        self.binary, self.model, self.workdir, self.timeout = binary, model, workdir, timeout
        self.kind = kind
        self.servers: dict[tuple[int, int], tuple[ServerProcess, Reference]] = {}

    def get(self, flags: Flags) -> Reference:
        key = (flags.n_batch, flags.n_ubatch)
        if key not in self.servers:
            rf = Flags(n_slots=1, n_ctx=4096, n_batch=flags.n_batch, n_ubatch=flags.n_ubatch, cache_ram_mib=0,
                       ctx_checkpoints=0)
            p = ServerProcess(self.binary, self.model, rf, self.workdir, name=f"reference-b{key[0]}-ub{key[1]}")
            p.start()
            self.servers[key] = (p, Reference(Client(p.url, self.timeout), TOLERANCES.get(self.kind, TOLERANCE)))
        return self.servers[key][1]

    def close(self) -> None:
        for p, _ in self.servers.values():
            p.stop()
        self.servers.clear()


def model_trace(out: Outcome) -> str | None:
    p = out.analysis.predictor
    return None if p is None else p.trace().dumps()


def campaign(binary: Path, kind: str, models_dir: Path, out_dir: Path, *, seed: int = 0, requests: int = 200,
             seconds: float = 600.0, run_requests: int = 50, timeout: float = 20.0, do_shrink: bool = True,
             shrink_seconds: float = 180.0, variant: str = calibrate.DEFAULT_VARIANT,
             flags: Flags | None = None, concurrency: bool = True,
             log: Callable[[str], None] | None = None) -> KindReport:
    say = log or (lambda _m: None)
    model = ensure_model(kind, models_dir)
    rep = KindReport(kind)
    rng = random.Random(f"{seed}:{kind}")
    refs = References(binary, model, out_dir / kind / "work", timeout, kind)
    t0 = time.monotonic()

    def one_run(done: int, stop: int, deadline: float) -> int:
        """One server run with drawn flags: the requests it sent are covered."""
        f = flags or draw_flags(rng, kind)
        run_seed = rng.randrange(1 << 30)
        target = Target(binary, model, kind, f)
        fuzzer = Fuzzer(run_seed, f.n_slots, f.n_ctx // f.n_slots, concurrency=concurrency)
        workdir = out_dir / kind / "work" / f"run-{rep.runs:03d}"
        out = execute(target, workdir, refs.get(f), fuzzer=fuzzer,
                      max_requests=min(run_requests, stop - done), seconds=max(10.0, deadline - time.time()),
                      timeout=timeout, variant=variant)
        rep.runs += 1
        rep.requests += out.n_requests
        rep.live_seconds += out.run.seconds
        rep.transparency_checks += out.analysis.n_checked
        rep.max_logprob_diff = max(rep.max_logprob_diff, out.analysis.max_logprob_diff)
        rep.compared_segments += out.analysis.n_compared
        say(f"[{kind}] run {rep.runs}: {out.n_requests} requests, flags {' '.join(f.argv())}, "
            f"findings: {', '.join(sorted({x.rule for x in out.analysis.findings})) or 'none'}")
        for fd in out.analysis.findings:
            rep.classes_seen[fd.rule] = rep.classes_seen.get(fd.rule, 0) + 1
        # the run's first divergence (what stops it) and each observation class are shrunk;
        # the other classes of the run are written as they are (consequences, most often)
        primary = out.analysis.first()
        for fd in _firsts(out.analysis.findings):
            if any(r.finding.rule == fd.rule for r in rep.reported):
                continue
            shrink_it = do_shrink and (fd is primary or is_observation(fd))
            rep.reported.append(_report(fd, out, target, run_seed, out_dir, refs, shrink_it, shrink_seconds,
                                        timeout, variant, say))
        return done + out.n_requests

    def runs(start: int, stop: int, deadline: float) -> KindReport:
        cover(start, stop, deadline, lambda done: one_run(done, stop, deadline))
        return rep

    try:
        # the requests [0, requests) as one block, in this process: one server run at a time
        run_blocks(runs, 0, requests, 1, seconds, what="request")
    finally:
        refs.close()
        rep.seconds = time.monotonic() - t0
    return rep


def _firsts(findings: list[Finding]) -> list[Finding]:
    """The first finding of each class."""
    first: dict[str, Finding] = {}
    for f in findings:
        first.setdefault(f.rule, f)
    return list(first.values())


def _report(fd: Finding, out: Outcome, target: Target, seed: int, out_dir: Path, refs: References,
            do_shrink: bool, shrink_seconds: float, timeout: float, variant: str,
            say: Callable[[str], None]) -> Reported:
    ops: list[LiveOp] = out.ops
    best, attempts, finding = out, 0, fd
    safe = fd.rule.replace(":", "-")
    directory = out_dir / target.kind / safe
    if do_shrink:
        say(f"[{target.kind}] shrinking {fd.rule} ({len(ops)} ops)")

        def runner(cand: list[LiveOp], wd: Path) -> Outcome:
            return execute(target, wd, refs.get(target.flags), ops=cand, timeout=timeout, variant=variant)

        small, got, attempts = shrink(ops, runner, same_class(fd.rule), directory / "shrink", seconds=shrink_seconds,
                                       upto=fd.op, sent=out.run.observations if literal_ok(fd) else None)
        if got is not None:
            best = got
            finding = same_class(fd.rule)(got) or fd
            ops = small
    write_finding(directory, finding, best, seed=seed, original_ops=len(out.ops), attempts=attempts,
                  model_trace=model_trace(best))
    why = explain(finding, best)
    say(f"[{target.kind}] {finding.rule}: {len(out.ops)} -> {len(best.ops)} ops; "
        f"{'explained: ' + why if why else 'UNEXPLAINED'}; {directory}")
    return Reported(finding, directory, why, len(best.ops), len(out.ops))
