"""Model cost independent of modelled sizes (docs/PERFORMANCE.md, "Targets").

Runs the same workload -- two growing chat conversations of ``--turns`` turns, one per slot,
with idle-slot caching and a prompt-cache limit that forces evictions -- with 1 KiB and with
~330 MiB checkpoints (``cell_bytes``, ``rs_bytes`` and ``cache_ram`` scaled together), for a
recurrent and an SWA model. It asserts that both runs make exactly the same decisions (the
same event kinds, reasons, positions and tokens; every byte count scaled), then times them
side by side, interleaved, and prints the step-time ratio (330 MiB over 1 KiB; target <= 1.05).

Sizes: a checkpoint is STATE_HEADER (16 bytes) + 1008 * scale bytes (recurrent: rs_bytes;
SWA: n_swa 16 cells of 63 * scale bytes). scale 1 gives 1024 bytes; scale 343284 gives
346030288 bytes (330.0002 MiB). The 16-byte header does not scale, so a byte count ``b`` of
the large run must equal ``f * a - 16 * h * (f - 1)`` for the small run's ``a``, where ``h``
is the number of state blobs summed into it.

Usage:  python benchmarks/size_independence.py [--reps N] [--turns T] [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence

from pcspec.model.config import MIB, Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.model.events import Event
from pcspec.model.server import Server

HEADER = 16  # pcspec.model.config.STATE_HEADER: bytes of a state blob that do not scale
SMALL = 1  # 16 + 1008 = 1024 bytes per checkpoint
LARGE = 343_284  # 16 + 1008 * 343284 = 346030288 bytes = 330.0002 MiB per checkpoint
TARGET = 1.05
MEMORIES = (MemoryKind.RECURRENT, MemoryKind.SWA)
VARIANTS = ("baseline", "pr30137", "pr27451", "fixed")
# The byte limit in "checkpoint units" (1008 * scale bytes): small enough that the second
# half of the conversations evicts (make room), not on a boundary where the unscaled headers
# would tip a comparison differently in the two runs (the decision check would say so).
LIMIT_UNITS = 41
# Eight tokens per reply (seven decoded): with 20 SWA cells the window of 16 then no longer
# covers a divergence at the end of the previous prompt (fixed resumes from live memory while
# the cells the next token needs are there: with six it still could), so the SWA run restores
# checkpoints too.
N_PREDICT = 8


def config(memory: MemoryKind, scale: int, limit_units: int = LIMIT_UNITS) -> Config:
    return Config(
        n_slots=2,
        n_ctx_slot=2048,
        n_batch=16,
        n_ubatch=4,
        memory=memory,
        n_swa=16,
        swa_cells=20,
        cell_bytes=63 * scale,
        rs_bytes=1008 * scale,
        n_ctx_checkpoints=4,
        checkpoint_min_step=8,
        cache_ram=limit_units * 1008 * scale,
    )


def checkpoint_bytes(memory: MemoryKind, scale: int) -> int:
    cfg = config(memory, scale)
    return HEADER + (cfg.rs_bytes if memory == MemoryKind.RECURRENT else cfg.n_swa * cfg.cell_bytes)


def workload(
    memory: MemoryKind, scale: int, variant: str, turns: int, limit_units: int = LIMIT_UNITS
) -> Server:
    """Two conversations, A pinned to slot 0 and B to slot 1, alternating turns. Each launch
    saves the other (idle) slot to the cache. On odd turns the client sends the reply back
    exactly (the slot extends its live state); on even turns it re-renders the reply (the slot
    restores a checkpoint and the saves share checkpoints)."""
    srv = Server(config(memory, scale, limit_units), DESIGNS[variant])
    prompts = {0: tuple(range(1, 25)), 1: tuple(range(5001, 5031))}
    for k in range(1, turns + 1):
        for slot, base in ((0, 10_000), (1, 30_000)):
            if k > 1:
                s = srv.slots[slot]
                prev = prompts[slot]
                if k % 2 == 1 and s.prompt.tokens[: len(prev)] == prev:
                    reply = (*s.prompt.tokens[len(prev) :], s.next_token)
                else:
                    reply = tuple(range(base + 100 * k, base + 100 * k + 3 + k % 3))
                user = tuple(range(base + 100 * k + 50, base + 100 * k + 50 + 12 + 3 * (k % 4)))
                prompts[slot] = prev + reply + user
            srv.request(prompts[slot], n_predict=N_PREDICT, id_slot=slot)
            srv.run()
    return srv


# -- decision comparison ------------------------------------------------------------------------


def scaled(a: int, b: int, f: int) -> bool:
    """``b`` is ``a`` with its scaled part multiplied by ``f`` and ``h >= 0`` headers kept."""
    if a == b:
        return True
    d = f * a - b
    step = HEADER * (f - 1)
    return d >= 0 and d % step == 0 and HEADER * (d // step) <= a


def mismatch(a: object, b: object, f: int, path: str) -> str | None:
    """Where ``a`` (small run) and ``b`` (large run) differ other than by scaled sizes."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, bool | str | float | enum.Enum) or a is None:
        return None if a == b else f"{path}: {a!r} vs {b!r}"
    if isinstance(a, int):
        assert isinstance(b, int)
        return None if scaled(a, b, f) else f"{path}: {a} vs {b} (not a scaled size)"
    if isinstance(a, tuple | list):
        assert isinstance(b, tuple | list)
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if (m := mismatch(x, y, f, f"{path}[{i}]")) is not None:
                return m
        return None
    if isinstance(a, dict):
        assert isinstance(b, dict)
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for key in a:
            if (m := mismatch(a[key], b[key], f, f"{path}.{key}")) is not None:
                return m
        return None
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for fld in dataclasses.fields(a):
            if (
                m := mismatch(getattr(a, fld.name), getattr(b, fld.name), f, f"{path}.{fld.name}")
            ) is not None:
                return m
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def decisions_mismatch(small: Server, large: Server, f: int) -> str | None:
    """None when the two runs made the same decisions; else where they first differ."""
    if len(small.heap.events) != len(large.heap.events):
        return f"{len(small.heap.events)} events vs {len(large.heap.events)}"
    for i, (a, b) in enumerate(zip(small.heap.events, large.heap.events, strict=True)):
        if (a.op, a.kind) != (b.op, b.kind):
            return f"event {i}: {a.op}/{a.kind} vs {b.op}/{b.kind}"
        if (m := mismatch(a, b, f, f"event {i} ({a.kind})")) is not None:
            return m
    state_a = [(s.prompt.tokens, [c.n_tokens for c in s.prompt.checkpoints]) for s in small.slots]
    state_b = [(s.prompt.tokens, [c.n_tokens for c in s.prompt.checkpoints]) for s in large.slots]
    if state_a != state_b:
        return "final slot state differs"
    if (small.crash is None) != (large.crash is None):
        return "only one run crashed"
    for name in ("accounted_bytes", "unique_bytes", "physical_bytes"):
        if not scaled(getattr(small, name), getattr(large, name), f):
            return f"{name}: {getattr(small, name)} vs {getattr(large, name)}"
    return None


def cases() -> Iterator[tuple[MemoryKind, str]]:
    for memory in MEMORIES:
        for variant in VARIANTS:
            yield memory, variant


def check_decisions(turns: int) -> list[tuple[MemoryKind, str, Server, Server]]:
    """Run every case at both scales; raise AssertionError on any difference."""
    out = []
    for memory, variant in cases():
        small = workload(memory, SMALL, variant, turns)
        large = workload(memory, LARGE, variant, turns)
        where = decisions_mismatch(small, large, LARGE)
        assert where is None, f"{memory}/{variant}: decisions differ at {where}"
        out.append((memory, variant, small, large))
    return out


def summary(events: Sequence[Event]) -> Counter[str]:
    keys: Counter[str] = Counter()
    for e in events:
        reason = getattr(e, "reason", None)
        keys[f"{e.kind}:{reason}" if isinstance(reason, str) else e.kind] += 1
    return keys


# -- timing ---------------------------------------------------------------------------------------


def time_once(scale: int, turns: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    ops = 0
    for memory, variant in cases():
        ops += workload(memory, scale, variant, turns).heap.op
    return time.perf_counter() - t0, ops


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30, help="interleaved repetitions (default 30)")
    ap.add_argument("--turns", type=int, default=10, help="turns per conversation (default 10)")
    ap.add_argument("--check", action="store_true", help=f"exit 1 if the ratio exceeds {TARGET}")
    args = ap.parse_args(argv)

    runs = check_decisions(args.turns)
    print(
        f"checkpoint size: {checkpoint_bytes(MemoryKind.RECURRENT, SMALL)} B vs "
        f"{checkpoint_bytes(MemoryKind.RECURRENT, LARGE) / MIB:.4f} MiB (scale x{LARGE})"
    )
    for memory, variant, small, large in runs:
        counts = summary(small.heap.events)
        interesting = ", ".join(
            f"{k} {counts[k]}"
            for k in sorted(counts)
            if k.startswith(
                ("entry_evict", "ckpt_restore", "ckpt_erase", "ckpt_create", "entry_insert", "copy")
            )
        )
        print(
            f"  {memory!s:9} {variant:8} same decisions: {len(small.heap.events)} events, "
            f"{small.heap.op} ops; cache {small.accounted_bytes} B vs "
            f"{large.accounted_bytes / MIB:.1f} MiB; {interesting}"
        )

    time_once(SMALL, args.turns)  # warm-up
    time_once(LARGE, args.turns)
    small_t: list[float] = []
    large_t: list[float] = []
    ops = 0
    for rep in range(args.reps):
        order = (SMALL, LARGE) if rep % 2 == 0 else (LARGE, SMALL)
        for scale in order:
            t, ops = time_once(scale, args.turns)
            (small_t if scale == SMALL else large_t).append(t)
    ratio = statistics.median(large_t) / statistics.median(small_t)
    per_rep = [b / a for a, b in zip(small_t, large_t, strict=True)]
    print(
        f"step time: 1 KiB {statistics.median(small_t) / ops * 1e6:.1f} us/op, "
        f"330 MiB {statistics.median(large_t) / ops * 1e6:.1f} us/op ({ops} ops per run, "
        f"{args.reps} interleaved reps)"
    )
    verdict = "OK" if ratio <= TARGET else "ABOVE TARGET"
    print(
        f"ratio 330 MiB / 1 KiB: {ratio:.3f} (median of per-rep ratios "
        f"{statistics.median(per_rep):.3f}; target <= {TARGET}): {verdict}"
    )
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
