"""``pcspec bench``: a workload on every design's real server and through the model, side by side.

Per design: its cached build (``pcspec.live.designs``; a design without one is reported as not
built and still predicted), ``repeats`` runs of the workload (the designs take turns within each
repeat, so a load that comes and goes on the machine falls on all of them), and the model's
prediction. ``summarise`` turns the runs into the figures of the table (min/median/max over the
repeats).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcspec.bench.measure import MIB, Run, load_average, run_design
from pcspec.bench.predict import Predicted, predict, variant
from pcspec.bench.workload import LIVE_LIMITS, MODEL_LIMITS, Workload
from pcspec.core.errors import PcspecError
from pcspec.live import build as live_build
from pcspec.live.designs import DESIGNS as LIVE_DESIGNS
from pcspec.live.designs import DesignUnavailable, design_of
from pcspec.live.models import ensure_model
from pcspec.model.designs import renamed_error

DESIGNS = ("baseline", "pr30137", "pr27451", "fixed")
# one-minute load average above which a measurement is marked as taken on a loaded machine
# (the machine has 2 cores; the server runs on one thread)
LOADED = 1.5


def check_design(name: str) -> None:
    """``--design NAME``: one of ``DESIGNS``; PcspecError otherwise, which for an old name
    (``master``) says what it is called now."""
    renamed = renamed_error(name)
    if renamed is not None:
        raise PcspecError(renamed.why, "--design")
    if name not in DESIGNS:
        try:  # any other design with a build: the November builds (pr30137@november, ...)
            design_of(name)
        except DesignUnavailable:
            raise PcspecError(f"--design: unknown design {name!r}; designs: {', '.join(DESIGNS)} "
                              f"(and the November builds: {', '.join(n for n in LIVE_DESIGNS if '@' in n)})") from None


def binary_of(design: str) -> tuple[Path | None, str]:
    """The design's cached build, or None and why not."""
    try:
        d = design_of(design)
    except DesignUnavailable as exc:
        return None, f"not built: {exc}"
    found = live_build.find_server(d.tree, d.patch_paths(), d.flags)
    if found is None:
        return None, f"not built: run pcspec build --design {design}"
    return found, ""


@dataclass(frozen=True)
class Server:
    """A server of one's own to measure: its column's name, the binary, and the model it is
    predicted by (a design's name, ``DESIGN@RULES``, or a rule set's model)."""

    name: str
    binary: Path
    model: str


@dataclass
class DesignResult:
    design: str
    binary: str = ""
    model: str = ""  # what predicts it (a built-in design's column: the design on the October tree)
    not_built: str = ""
    runs: list[Run] = field(default_factory=list)
    predicted: list[Predicted] = field(default_factory=list)
    model_seconds: float = 0.0
    load: list[float] = field(default_factory=list)  # the load average at each run's start and end


@dataclass
class BenchResult:
    workload: Workload
    model_only: bool
    designs: list[DesignResult]
    started: str = ""
    seconds: float = 0.0

    @property
    def loaded(self) -> bool:
        return any(x > LOADED for d in self.designs for x in d.load)


def bench(w: Workload, designs: list[str], *, model_only: bool, workdir: Path,
          model_dir: Path | None = None, progress: Any = None, servers: list[Server] | None = None) -> BenchResult:
    """The workload on each design's build and on each server of one's own (``servers``), each
    beside its model's prediction."""
    w.validate(MODEL_LIMITS if model_only else LIVE_LIMITS)
    for name in designs:
        check_design(name)
    t0 = time.monotonic()
    out = BenchResult(w, model_only, [DesignResult(d, model=variant(d).name) for d in designs],
                      started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    out.designs += [DesignResult(s.name, str(s.binary), model=s.model) for s in servers or ()]
    for d in out.designs:
        d.predicted, d.model_seconds = predict(w, d.model)
        if not model_only and not d.binary:
            b, why = binary_of(d.design)
            d.binary, d.not_built = (str(b) if b else ""), why
    if not model_only and any(d.binary for d in out.designs):
        model = ensure_model(w.model, model_dir or live_build.cache_root() / "models", w.seed)
        for rep in range(w.repeats):
            for d in out.designs:
                if not d.binary:
                    continue
                if progress is not None:
                    progress(f"{w.name}: {d.design}, run {rep + 1} of {w.repeats}")
                d.load.append(load_average())
                d.runs.append(run_design(Path(d.binary), model, w, d.design, rep, workdir / w.name))
                d.load.append(load_average())
    out.seconds = time.monotonic() - t0
    return out


# -- the figures ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    lo: float
    mid: float
    hi: float

    @classmethod
    def of(cls, xs: list[float]) -> Spread | None:
        return cls(min(xs), statistics.median(xs), max(xs)) if xs else None

    def to_json(self) -> dict[str, float]:
        return {"min": round(self.lo, 3), "median": round(self.mid, 3), "max": round(self.hi, 3)}


def measured_figures(d: DesignResult) -> dict[str, Spread | None]:
    """Per design, over its repeats (each run gives one value)."""
    runs = [r for r in d.runs if r.requests and not any(m.error for m in r.requests)]

    def per_run(f: Any) -> Spread | None:
        vals = [v for v in (f(r) for r in runs) if v is not None]
        return Spread.of([float(v) for v in vals])

    return {
        "update_ms_last": per_run(lambda r: r.requests[-1].update_ms),
        "update_ms_sum": per_run(lambda r: sum(m.update_ms or 0.0 for m in r.requests)
                                 if any(m.update_ms is not None for m in r.requests) else None),
        "ttft_ms_last": per_run(lambda r: r.requests[-1].ttft_ms),
        "request_s_sum": per_run(lambda r: sum(m.total_ms for m in r.requests) / 1000),
        "peak_rss_mib": per_run(lambda r: max(m.peak_rss for m in r.requests) / MIB),
        "rss_mib_end": per_run(lambda r: r.requests[-1].rss / MIB),
        "rss_growth_mib": per_run(lambda r: (r.requests[-1].rss - r.idle_rss) / MIB),
        "cache_mib_end": per_run(lambda r: r.requests[-1].cache_mib),
        "checkpoints": per_run(lambda r: sum(m.checkpoints for m in r.requests)),
        "evictions": per_run(lambda r: sum(m.evictions for m in r.requests)),
    }


def predicted_figures(d: DesignResult) -> dict[str, float | None]:
    p = d.predicted
    saves = [c for x in p for c in x.copied_per_save]
    return {
        "accounted_mib_end": p[-1].accounted / MIB if p else None,
        "unique_mib_end": p[-1].unique / MIB if p else None,
        "physical_mib_end": p[-1].physical / MIB if p else None,
        "peak_physical_mib": max(x.peak for x in p) / MIB if p else None,
        "copied_mib_last_save": saves[-1] / MIB if saves else None,
        "copied_mib_total": sum(x.copied for x in p) / MIB if p else None,
        "saves": float(sum(x.saves for x in p)),
        "evictions": float(sum(x.evictions for x in p)),
        "slot_checkpoints_end": float(p[-1].slot_checkpoints) if p else None,
    }


def to_json(res: BenchResult) -> dict[str, Any]:
    designs = []
    for d in res.designs:
        designs.append({
            "design": d.design, "binary": d.binary, "not_built": d.not_built,
            "load_average": [round(x, 2) for x in d.load],
            "measured": {k: (v.to_json() if v else None) for k, v in measured_figures(d).items()},
            "predicted": {k: (round(v, 3) if v is not None else None) for k, v in predicted_figures(d).items()},
            "model_seconds": round(d.model_seconds, 3),
            "runs": [{"repeat": r.repeat, "idle_rss": r.idle_rss, "log": r.log,
                      "requests": [m.to_json() for m in r.requests]} for r in d.runs],
            "predictions": [p.to_json() for p in d.predicted],
        })
    return {"workload": res.workload.to_json(), "model_only": res.model_only, "started": res.started,
            "seconds": round(res.seconds, 1), "loaded": res.loaded, "designs": designs}
