"""What ``pcspec bench`` prints: a table per workload, designs as columns, each measured figure as
``median (min-max)`` over the repeats, the model's prediction beside it, and the ratios of each
design to ``baseline`` (the upstream code before #30137); and the plot (matplotlib, the ``bench`` extra).
"""

from __future__ import annotations

from pathlib import Path

from pcspec.bench.measure import MIB
from pcspec.bench.run import BenchResult, DesignResult, Spread, measured_figures, predicted_figures
from pcspec.core.errors import PcspecError

MEASURED_ROWS = (
    ("update_ms_last", "cache update, last request (ms)"),
    ("update_ms_sum", "cache update, all requests (ms)"),
    ("ttft_ms_last", "time to first token, last request (ms)"),
    ("request_s_sum", "request time, all requests (s)"),
    ("peak_rss_mib", "peak RSS (MiB)"),
    ("rss_growth_mib", "RSS growth over the idle server (MiB)"),
    ("cache_mib_end", "cache size as the server counts it, end (MiB)"),
    ("checkpoints", "checkpoints created"),
    ("evictions", "cache entries evicted"),
)
PREDICTED_ROWS = (
    ("accounted_mib_end", "model: cache size as the design counts it, end (MiB)"),
    ("unique_mib_end", "model: cache's unique bytes, end (MiB)"),
    ("physical_mib_end", "model: bytes held (slots and cache), end (MiB)"),
    ("peak_physical_mib", "model: peak bytes held (MiB)"),
    ("copied_mib_last_save", "model: payload copied by the last save (MiB)"),
    ("copied_mib_total", "model: payload copied, all requests (MiB)"),
    ("saves", "model: saves"),
    ("evictions", "model: evictions"),
    ("slot_checkpoints_end", "model: checkpoints in the slot, end"),
)
RATIOS = ("update_ms_last", "ttft_ms_last", "peak_rss_mib", "rss_growth_mib")


def _num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _spread(s: Spread | None, repeats: int) -> str:
    if s is None:
        return "-"
    if repeats <= 1 or s.lo == s.hi:
        return _num(s.mid)
    return f"{_num(s.mid)} ({_num(s.lo)}-{_num(s.hi)})"


def table(res: BenchResult) -> str:
    w = res.workload
    cols = [d.design for d in res.designs]
    rows: list[list[str]] = []
    measured = {d.design: measured_figures(d) for d in res.designs}
    predicted = {d.design: predicted_figures(d) for d in res.designs}
    if not res.model_only:
        for key, label in MEASURED_ROWS:
            row = [label]
            for d in res.designs:
                row.append("not built" if d.not_built else _spread(measured[d.design][key], len(d.runs)))
            rows.append(row)
        # the ratios are to the code before #30137: baseline, or its November build (baseline@november)
        base_name = next((d.design for d in res.designs if d.design.split("@")[0] == "baseline"), None)
        base = measured.get(base_name) if base_name is not None else None
        if base is not None:
            for key in RATIOS:
                b = base[key]
                if b is None or b.mid == 0:
                    continue
                row = [f"  vs {base_name}: {dict(MEASURED_ROWS)[key].split(' (')[0]}"]
                for d in res.designs:
                    s = measured[d.design][key]
                    row.append("-" if s is None else f"{s.mid / b.mid:.2f}x ({(s.mid / b.mid - 1) * 100:+.0f} %)")
                rows.append(row)
    for key, label in PREDICTED_ROWS:
        row = [label]
        for d in res.designs:
            v = predicted[d.design][key]
            row.append("-" if v is None else _num(v))
        rows.append(row)
    width = [max(len(r[i]) for r in [["", *cols], *rows]) for i in range(len(cols) + 1)]
    lines = [f"workload {w.name} ({w.shape}, {w.model}): {w.n_requests} requests, {w.turns} turns of "
             f"{w.turn_tokens}+{w.reply_tokens} tokens after {w.first_tokens}; --ctx-checkpoints "
             f"{w.ctx_checkpoints}, -cms {w.checkpoint_min_step}, --cache-ram {w.cache_ram_mib}, -c {w.n_ctx}, "
             f"-b/-ub {w.n_batch}/{w.n_ubatch}, -sps {w.sps:g}"
             + (", --cache-idle-slots" if w.cache_idle_slots else "")]
    if res.model_only:
        secs = ", ".join(f"{d.design} {d.model_seconds:.1f} s" for d in res.designs)
        lines.append(f"model only ({secs})")
    else:
        lines.append(f"measured: median (min-max) over {w.repeats} run(s) per design, started {res.started}, "
                     f"{res.seconds:.0f} s in all")
        loads = [x for d in res.designs for x in d.load]
        if res.loaded:
            lines.append(f"LOADED MACHINE: one-minute load average {min(loads):.1f} to {max(loads):.1f} during the "
                         "runs (2 cores): times are inflated, compare designs within this run only")
    lines.append("  ".join(c.ljust(width[0]) if i == 0 else c.rjust(width[i])
                           for i, c in enumerate(["", *cols])))
    for r in rows:
        lines.append("  ".join(c.ljust(width[0]) if i == 0 else c.rjust(width[i]) for i, c in enumerate(r)))
    for d in res.designs:
        if d.not_built:
            lines.append(f"{d.design}: {d.not_built}")
        errors = [m.error for r in d.runs for m in r.requests if m.error]
        if errors:
            lines.append(f"{d.design}: {len(errors)} failed request(s): {errors[0]}")
    return "\n".join(lines)


def _median_per_request(d: DesignResult, attr: str) -> list[float]:
    runs = [r for r in d.runs if r.requests]
    if not runs:
        return []
    n = min(len(r.requests) for r in runs)
    out = []
    for i in range(n):
        vals = sorted(float(getattr(r.requests[i], attr) or 0) for r in runs)
        out.append(vals[len(vals) // 2])
    return out


def plot(results: list[BenchResult], path: Path) -> None:
    """RSS and cache bytes over the requests, one line per design, a column per workload."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PcspecError("--plot needs matplotlib: pip install 'pcspec[bench]'") from None
    fig, axes = plt.subplots(2, len(results), figsize=(6 * len(results), 7), squeeze=False)
    for col, res in enumerate(results):
        top, bottom = axes[0][col], axes[1][col]
        for d in res.designs:
            if not res.model_only and d.runs:
                rss = _median_per_request(d, "rss")
                idle = sorted(r.idle_rss for r in d.runs)[len(d.runs) // 2]
                top.plot(range(1, len(rss) + 1), [(x - idle) / MIB for x in rss], marker="o", label=f"{d.design}")
                cache = _median_per_request(d, "cache_mib")
                bottom.plot(range(1, len(cache) + 1), cache, marker="o", label=f"{d.design} (server)")
            phys = [p.physical / MIB for p in d.predicted]
            acc = [p.accounted / MIB for p in d.predicted]
            top.plot(range(1, len(phys) + 1), phys, linestyle="--", label=f"{d.design} (model: bytes held)")
            bottom.plot(range(1, len(acc) + 1), acc, linestyle="--", label=f"{d.design} (model: accounted)")
        top.set_title(f"{res.workload.name}: RSS over the idle server (MiB)")
        bottom.set_title(f"{res.workload.name}: cache size as counted (MiB)")
        for ax in (top, bottom):
            ax.set_xlabel("request")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise PcspecError(f"--plot: cannot write {path}: {exc.strerror}") from None
    finally:
        plt.close(fig)
