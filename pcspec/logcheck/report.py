"""The check-log report: JSON (``--json``) and a readable text form.

The text form uses rich tables when the output is a terminal and plain lines otherwise (so that
pipes, files and CI logs get stable text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from pcspec.logcheck.checker import CheckResult
from pcspec.logcheck.rules import RULES
from pcspec.logcheck.stats import Stats

MAX_TEXT_DEVIATIONS = 100  # the text report lists this many; --json lists all
NOTHING_TO_CHECK = ("nothing to check: the log has server lines, but none about the prompt cache "
                    "or checkpoints (start-up lines at most), so no rule was checked")


def to_json(results: Sequence[CheckResult]) -> dict[str, Any]:
    """One log: its object. Several: their sums at the top level and each under ``logs``."""
    if len(results) == 1:
        return results[0].as_dict()
    stats = Stats()
    for r in results:
        stats.merge(r.stats)
    return {
        "schema": 1,
        "lines": sum(r.n_lines for r in results),
        "events": stats.event_counts(),
        "deviation_count": sum(r.n_deviations for r in results),
        "knock_on_suppressed": sum(r.n_knock_on for r in results),
        "deviations": [dict(d.to_json(), file=r.source) for r in results for d in r.deviations],
        "stats": stats.as_dict(),
        "logs": [r.as_dict() for r in results],
    }


def _summary_lines(r: CheckResult) -> list[str]:
    s = r.stats.as_dict()
    ck, fr, ca, un = s["checkpoints"], s["full_reprocess"], s["cache"], s["unique_accounting"]
    er = ck["erased"]
    hit = f"{ca['hit_rate'] * 100:.1f} %" if ca["hit_rate"] is not None else "n/a"
    ev = ca["evictions"]
    out = [
        f"requests            {s['requests']}",
        f"checkpoints         created {ck['created']}, restored {ck['restored']}; erased: "
        f"invalidated {er['invalidated']}, old {er['old']}, too close {er['too_close']}, "
        f"superseded {er['superseded']}, cleared {er['cleared']}",
        f"                    erased after being restored, by the same task: "
        f"{ck['erased_after_restore_by_same_task']}; slot-file restores "
        f"{s['slots']['file_restores']}",
        f"full re-processing  forced {fr['forced']} (no usable checkpoint "
        f"{fr['no_usable_checkpoint']}, no checkpoints {fr['no_checkpoints']}); "
        f"cache miss {fr['cache_miss']}",
        f"prompt cache        lookups {ca['lookups']}, loads {ca['loads']} (hit rate {hit}), "
        f"load failures {ca['load_failed']}",
        f"                    saves {ca['saves']} (skipped: already cached "
        f"{ca['skipped_already_cached']}, oversize {ca['skipped_oversize']}; failed "
        f"{ca['save_failed'] + ca['alloc_failed']})",
        f"                    evictions {ev['total']} (making room {ev['make_room']}, byte "
        f"limit {ev['limit_bytes']}, token limit {ev['limit_tokens']}), obsolete removed "
        f"{ca['obsolete_removed']}",
        f"                    peak {ca['peak_mib']:.3f} MiB with {ca['peak_prompts']} prompt(s)"
        + (f" (line {ca['peak_line']})" if ca["peak_line"] else ""),
        f"unique accounting   largest saving {un['max_saving_mib']:.3f} MiB"
        + (f" (line {un['max_saving_line']}: {un['accounted_mib_there']:.3f} accounted, "
           f"{un['unique_mib_there']:.3f} unique)" if un["max_saving_line"] else "")
        + f"; shared with slots up to {un['shared_with_slots_max_mib']:.3f} MiB; evictions it "
        f"would have avoided {un['evictions_avoidable']} "
        f"({un['evictions_avoidable_mib']:.3f} MiB)",
    ]
    for item in ck["erased_after_restore"][:10]:
        out.append(" " * 20 + f"restored line {item['restored_line']}, erased line "
                   f"{item['erased_line']} ({item['reason']}) by task {item['task']}: "
                   f"{item['checkpoint']}")
    return out


def _rules_line(r: CheckResult) -> list[str]:
    """One line per stretch of runs with the same rules (a log repeated or restarted many times
    gives one line, not one per restart)."""
    out: list[str] = []
    i = 0
    while i < len(r.runs):
        run = r.runs[i]
        j = i + 1
        while j < len(r.runs) and r.runs[j].as_dict() == run.as_dict():
            j += 1
        tag = ""
        if len(r.runs) > 1:
            tag = f"run {i + 1}: " if j == i + 1 else f"runs {i + 1}-{j}: "
        build = f"; build {run.build} ({run.build_evidence})" if run.era == "current" else ""
        inval = run.invalidation
        if run.invalidation_evidence:
            inval += f" ({run.invalidation_evidence})"
        out.append(f"{tag}build era {run.era} ({run.era_evidence}){build}; sweep={run.sweep} "
                   f"invalidation={inval} supersede={'on' if run.supersede else 'off'}"
                   f" positions={run.positions} restored-owner={run.restored_owner}"
                   + (f" pos-min={run.pos_min}" if run.pos_min != "memory" else "")
                   + (f" accounting={run.accounting}" if run.accounting != "per-holder" else "")
                   + (f"; verbosity {run.verbosity} ({run.verbosity_evidence})" if run.verbosity < 5 else ""))
        i = j
    return out


def _knock_on(r: CheckResult) -> str:
    if not r.n_knock_on:
        return ""
    return (f"; {r.n_knock_on} knock-on disagreement(s) suppressed (after a deviation the "
            "checker adopts what the log shows)")


def _notes(r: CheckResult, weakened: str) -> list[str]:
    """Weakened checks, then one line per rule the log's verbosity did not let the checker judge
    in full (skipped or weakened, and why), then the notes."""
    pad = " " * max(0, len(weakened) - len("not judged "))
    return ([f"{weakened}{v} x {k}" for k, v in sorted(r.weakened.items())]
            + [f"not judged {pad}{rule}: {why}" for rule, why in r.not_judged.items()]
            + [f"note: {note}" for note in r.notes])


def render_plain(results: Sequence[CheckResult], out: TextIO) -> None:
    for r in results:
        out.write(f"== {r.source}: {r.n_lines} lines, {r.n_events} events\n")
        for line in [*_rules_line(r), *_summary_lines(r), *_notes(r, "weakened check      ")]:
            out.write(line + "\n")
        if r.n_deviations:
            out.write(f"{r.n_deviations} deviation(s){_knock_on(r)}:\n")
            for d in r.deviations[:MAX_TEXT_DEVIATIONS]:
                out.write(f"  line {d.line}: [{d.rule}] {d.message}\n")
            if r.n_deviations > MAX_TEXT_DEVIATIONS:
                out.write(f"  ... {r.n_deviations - MAX_TEXT_DEVIATIONS} more (see --json)\n")
        elif r.nothing_to_check:
            out.write(NOTHING_TO_CHECK + "\n")
        else:
            out.write("no deviations: the log shows behaviour the spec allows\n")


def render_rich(results: Sequence[CheckResult], out: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out)
    for r in results:
        console.rule(f"{r.source}: {r.n_lines} lines, {r.n_events} events")
        for line in _rules_line(r):
            console.print(line, highlight=False, markup=False)
        counts = Table(title="events", show_header=True)
        counts.add_column("event")
        counts.add_column("count", justify="right")
        for k, v in r.stats.event_counts().items():
            counts.add_row(k, str(v))
        console.print(counts)
        summary = Table(title="statistics", show_header=False)
        summary.add_column("what", style="bold")
        summary.add_column("figures")
        for line in _summary_lines(r):
            # the plain lines put the label in the first 20 columns
            summary.add_row(line[:20].strip(), line[20:].strip())
        console.print(summary)
        for line in _notes(r, "weakened check: "):
            console.print(line, highlight=False, markup=False)
        if r.n_deviations:
            table = Table(title=f"{r.n_deviations} deviation(s){_knock_on(r)}", show_lines=False)
            table.add_column("line", justify="right")
            table.add_column("rule")
            table.add_column("message")
            for d in r.deviations[:MAX_TEXT_DEVIATIONS]:
                table.add_row(str(d.line), d.rule, d.message)
            console.print(table)
        elif r.nothing_to_check:
            console.print(NOTHING_TO_CHECK, highlight=False, markup=False)
        else:
            console.print("[green]no deviations[/green]: the log shows behaviour the spec allows")


def rules_help() -> str:
    return "\n".join(f"  {k:18} {v}" for k, v in RULES.items())
