"""A mutation campaign over real logs: how many deviations does one wrong line cost?

``python -m pcspec.logcheck.mutate LOG [LOG ...] [--mutants N] [--seed S] [--option K=V]``
draws ``N`` one-line mutants (deterministic for a seed) of logs that check clean: one line that
the reader turns into an event is **deleted**, **duplicated** (the copy right after it), or
**edited** (one number of its message changed: an integer by +1, -1, x2 or +10, a decimal by
x2, /2 or +1). Each mutant is checked like the log (``check_events``) and its deviations are
counted. The report gives the distribution (median, p95, max), the share of mutants with at most
3 deviations, and the mutants that gave none (silently accepted), each with a reason category:

* ``not read``: the edited number is not one the checker reads (the line's event is unchanged);
* ``no rule``: no rule reads this kind of line (``pcspec.logcheck.needs``);
* ``not judged here``: a rule reads this kind of line, but not where it stands (a
  ``main/do_checkpoint`` not followed by a creation, a ``cached n_tokens`` after the first of its
  prompt);
* ``unreadable``: the edit made the line one the reader does not recognise (as if deleted);
* ``consistent``: the lines that follow agree with the mutated log as well (a real server could
  have written it), or the checker cannot tell from them.

A mutant on which the checker raises is listed as crashed (counted apart, never as 0).

Mutants are checked on the events, not the text: a deleted line leaves a gap in the line
numbers, a duplicate carries its original's number. ``--json`` prints the whole result.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pcspec.core.errors import PcspecError
from pcspec.logcheck import events as ev
from pcspec.logcheck.checker import check_events
from pcspec.logcheck.needs import NEEDS
from pcspec.logcheck.options import Options, parse_options
from pcspec.logcheck.reader import parse_lines, read_log

OPS = ("delete", "duplicate", "edit")
GOOD = 3  # the target: at most this many deviations for 95 % of the mutants
# where a message starts: after "srv  func: " or "slot func: id N | task T | ", else after the
# level letter (libllama and common lines)
_MESSAGE = re.compile(r"(?:.*?(?:srv|slot) +\S{1,12}: (?:id +-?\d+ \| task -?\d+ \| )?|"
                      r"(?:\d+\.\d\d\.\d\d\d\.\d\d\d )?(?:[A-Z] )?)")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_READ = {k for need in NEEDS.values() for k in (*need.lines, *need.state, *need.extra)}


@dataclass(slots=True)
class Log:
    source: str
    lines: list[str]
    events: list[ev.Event]
    options: Options


@dataclass(slots=True)
class Mutant:
    source: str
    line: int
    op: str
    kind: str
    deviations: int
    detail: str = ""  # the edit ("123 -> 124")
    category: str = ""  # for a silent mutant

    def show(self) -> str:
        edit = f" ({self.detail})" if self.detail else ""
        return f"{Path(self.source).name}:{self.line} {self.op} {self.kind}{edit}"


@dataclass(slots=True)
class Campaign:
    seed: int
    mutants: list[Mutant] = field(default_factory=list)

    def counts(self) -> list[int]:
        return sorted(m.deviations for m in self.mutants)

    def summary(self) -> dict[str, object]:
        c = self.counts()
        p95 = c[min(len(c) - 1, max(0, round(0.95 * len(c)) - 1))] if c else 0
        silent = [m for m in self.mutants if m.deviations == 0]
        crashed = [m for m in self.mutants if m.deviations < 0]
        return {
            "mutants": len(c), "seed": self.seed,
            "median": statistics.median(c) if c else 0, "p95": p95, "max": c[-1] if c else 0,
            "share_at_most_3": sum(x <= GOOD for x in c) / len(c) if c else 1.0,
            "by_op": {op: _stats([m.deviations for m in self.mutants if m.op == op]) for op in OPS},
            "silent": len(silent),
            "silent_by_category": dict(Counter(m.category for m in silent).most_common()),
            "crashed": len(crashed),
        }


def _stats(xs: list[int]) -> dict[str, object]:
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "median": statistics.median(xs), "max": xs[-1],
            "silent": sum(x == 0 for x in xs)}


def load(path: str | Path, options: Options) -> Log:
    read = read_log(path)
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    result = check_events(read.events, options)
    if result.n_deviations:
        raise PcspecError(f"the log itself gives {result.n_deviations} deviation(s): a campaign "
                          "needs a log that checks clean (--option to choose its rules)", str(path))
    return Log(read.source, text.split("\n"), read.events, options)


def _edit(line: str, rng: random.Random) -> tuple[str, str] | None:
    """``line`` with one number of its message changed, and what changed; None without one."""
    m = _MESSAGE.match(line)
    start = m.end() if m is not None else 0
    numbers = list(_NUMBER.finditer(line, start))
    if not numbers:
        return None
    n = rng.choice(numbers)
    old = n.group()
    if "." in old:
        decimals = len(old.split(".")[1])
        x = float(old)
        new = f"{rng.choice([x * 2, x / 2, x + 1]):.{decimals}f}"
    else:
        x_int = int(old)
        new = str(rng.choice([v for v in (x_int + 1, x_int - 1, x_int * 2, x_int + 10) if v >= 0 and v != x_int]))
    if new == old:
        new = old + "1"
    return line[:n.start()] + new + line[n.end():], f"{old} -> {new}"


def _reparse(text: str, line: int) -> ev.Event | None:
    out: list[ev.Event] = []
    parse_lines([text], line - 1, text, out)
    return out[0] if out else None


def _judged_here(events: list[ev.Event], index: int) -> bool:
    """Whether a rule reads the line at ``index`` where it stands: a ``main/do_checkpoint`` line
    only right before its slot's next creation (ckpt-position), a ``cached n_tokens`` line only
    as the first of its prompt (n-past, ckpt-position before a creation)."""
    e = events[index]
    if not isinstance(e, ev.DoCheckpoint | ev.CachedTokens):
        return True
    later = (x for x in events[index + 1:] if isinstance(x, ev.SlotEvent) and x.slot == e.slot)
    following = next(later, None)
    if isinstance(e, ev.DoCheckpoint):
        return isinstance(following, ev.CheckpointCreated)
    earlier = (x for x in reversed(events[:index]) if isinstance(x, ev.SlotEvent) and x.slot == e.slot
               and isinstance(x, ev.NewPrompt | ev.CachedTokens))
    before = next(earlier, None)
    return isinstance(before, ev.NewPrompt) or isinstance(following, ev.CheckpointCreated)


def mutate_one(log: Log, index: int, op: str, rng: random.Random) -> Mutant:
    """Mutant ``op`` of the ``index``-th event of ``log``, checked."""
    e = log.events[index]
    kind = e.kind
    events = list(log.events)
    detail = ""
    category = ""
    if op == "delete":
        del events[index]
    elif op == "duplicate":
        events.insert(index + 1, e)
    else:
        edited = _edit(log.lines[e.line - 1], rng)
        if edited is None:
            return mutate_one(log, index, "duplicate", rng)
        text, detail = edited
        new = _reparse(text, e.line)
        if new is None:
            del events[index]
            category = "unreadable"
        else:
            events[index] = new
            if new == e:
                category = "not read"
    try:
        n = check_events(events, log.options).n_deviations
    except Exception as exc:  # a checker crash is a finding of the campaign, not its end
        return Mutant(log.source, e.line, op, kind, -1, detail, f"crash: {type(exc).__name__}: {exc}")
    if n == 0 and not category:
        category = ("no rule" if type(e) not in _READ
                    else "not judged here" if not _judged_here(log.events, index) else "consistent")
    return Mutant(log.source, e.line, op, kind, n, detail, category if n == 0 else "")


def run(logs: Sequence[Log], n: int, seed: int) -> Campaign:
    rng = random.Random(seed)
    sites = [(log, i) for log in logs for i in range(len(log.events))]
    if not sites:
        raise PcspecError("no line of the logs is one the checker reads: nothing to mutate")
    camp = Campaign(seed)
    for _ in range(n):
        log, i = rng.choice(sites)
        camp.mutants.append(mutate_one(log, i, rng.choice(OPS), rng))
    return camp


def render(camp: Campaign, out: list[str]) -> None:
    s = camp.summary()
    share = s["share_at_most_3"]
    assert isinstance(share, float)
    out.append(f"{s['mutants']} mutants (seed {s['seed']}): deviations per mutant median {s['median']}, "
               f"p95 {s['p95']}, max {s['max']}; at most {GOOD}: {100 * share:.1f} %")
    by_op = s["by_op"]
    assert isinstance(by_op, dict)
    for op, st in by_op.items():
        out.append(f"  {op:9} {st}")
    out.append(f"silently accepted: {s['silent']} {s['silent_by_category']}")
    for m in camp.mutants:
        if m.deviations == 0:
            out.append(f"  [{m.category}] {m.show()}")
    for m in camp.mutants:
        if m.deviations < 0:
            out.append(f"checker crashed: {m.show()}: {m.category}")
    worst = sorted(camp.mutants, key=lambda m: -m.deviations)[:10]
    out.append("most deviations:")
    for m in worst:
        out.append(f"  {m.deviations:4} {m.show()}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pcspec.logcheck.mutate",
                                description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("logs", nargs="+", metavar="LOG", help="-v logs that check clean")
    p.add_argument("--mutants", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a rule variant for every log (as check-log --option)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        options = parse_options(args.option)
        logs = [load(path, options) for path in args.logs]
        camp = run(logs, args.mutants, args.seed)
    except PcspecError as exc:
        print(f"mutate: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"summary": camp.summary(), "mutants": [asdict(m) for m in camp.mutants]}, indent=1))
    else:
        out: list[str] = []
        render(camp, out)
        print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
