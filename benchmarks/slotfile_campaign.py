"""Mutation campaign against the slot file reader (pcspec.model.slotfile.read_slot_file).

Builds valid slot files of several shapes (plus the real ``mamba-a.bin`` when it is found),
mutates them with a seeded ``random.Random`` (truncations, bit flips, integer fields set to huge,
off-by-one, over-the-cap or random values, appended junk and appendices, spliced and deleted
bytes, a stretch of the file appended again) and reads every input twice: by scanning, and with
the original state size. A *crash* is any exception other than ``PcspecError``, or a read that
created an object sized by a length field larger than the file (``ReadStats.max_alloc``).

    python benchmarks/slotfile_campaign.py [--inputs 100000] [--seed 0] [--real PATH]

Exit status 1 when there is a crash.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from pcspec.core.errors import PcspecError
from pcspec.model.slotfile import (
    SLOT_CKPT_MAX_COUNT,
    FileCheckpoint,
    ReadStats,
    encode_appendix,
    field_map,
    read_slot_file,
    write_slot_file,
)

DEFAULT_REAL = Path(__file__).resolve().parents[1] / "tests" / "data" / "real" / "mamba-a.bin"


def base_files(rng: random.Random, real: Path | None) -> list[tuple[bytes, int]]:
    """(file bytes, state size) of the valid files the mutations start from."""

    def blob(lo: int, hi: int) -> bytes:
        return rng.randbytes(rng.randint(lo, hi)).replace(b"SCKP", b"SCKQ")

    def ckpt(i: int) -> FileCheckpoint:
        return FileCheckpoint(
            10 * i + 4, 2 * i, 10 * i + 3, blob(1, 40), blob(0, 20) * rng.randint(0, 1), blob(0, 8)
        )

    out = []
    for shape in range(12):
        tokens = [rng.randint(0, 200_000) for _ in range(rng.randint(0, 40))]
        state = blob(4, 200)
        checkpoints = [ckpt(i) for i in range(shape % 5)]
        data = write_slot_file(
            tokens, state, checkpoints, state_version=2 + shape % 2, packed=shape % 3 != 0
        )
        out.append((data, len(state)))
    if real is not None and real.is_file():
        data = real.read_bytes()
        state_size = read_slot_file(data).state_bytes
        out.append((data, state_size))
        out.append((data + encode_appendix([ckpt(1), ckpt(2)]), state_size))
    return out


def mutate(rng: random.Random, data: bytes, fields: list[tuple[str, int, int]]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(
            ["truncate", "flip", "field", "field", "append", "insert", "delete", "dup"]
        )
        if kind == "truncate":
            del buf[rng.randint(0, len(buf)) :]
        elif kind == "flip" and buf:
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif kind == "field":
            _, off, width = rng.choice(fields)
            if off + width <= len(buf):
                fmt = "<I" if width == 4 else "<Q"
                top = 2 ** (8 * width) - 1
                original = struct.unpack_from(fmt, buf, off)[0]
                value = rng.choice(
                    [
                        0,
                        1,
                        top,
                        top // 2,
                        (original + 1) & top,
                        (original - 1) & top,
                        SLOT_CKPT_MAX_COUNT + 1,
                        2**40 & top,
                        rng.randint(0, top),
                    ]
                )
                struct.pack_into(fmt, buf, off, value)
        elif kind == "append":
            buf += rng.choice(
                [
                    rng.randbytes(rng.randint(1, 16)),
                    b"SCKP",
                    b"SCKP\x01\x00\x00\x00",
                    encode_appendix([FileCheckpoint(1, 0, 0, b"t", b"", b"")]),
                ]
            )
        elif kind == "insert":
            at = rng.randint(0, len(buf))
            buf[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == "delete" and buf:
            at = rng.randrange(len(buf))
            del buf[at : at + rng.randint(1, 8)]
        elif kind == "dup" and buf:
            buf += buf[rng.randrange(len(buf)) :]
    return bytes(buf)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="mutated inputs to try")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--real", type=Path, default=DEFAULT_REAL, help="a real slot file")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    bases = [(d, s, field_map(read_slot_file(d))) for d, s in base_files(rng, args.real)]
    outcomes: Counter[str] = Counter()
    crashes = 0
    worst_ratio, worst = 0.0, (0, 0)  # largest allocation / file size, and (allocation, size)
    biggest_file = 0
    start = time.perf_counter()
    for _ in range(args.inputs):
        base, state_size, fields = rng.choice(bases)
        data = mutate(rng, base, fields)
        biggest_file = max(biggest_file, len(data))
        cap = rng.choice([None, None, -1, 0, 1, 2, 32])
        for size in (None, state_size):
            stats = ReadStats()
            try:
                f = read_slot_file(data, "campaign", cap, state_size=size, stats=stats)
                outcomes[f.appendix_status] += 1
            except PcspecError:
                outcomes["rejected (PcspecError)"] += 1
            except Exception:  # the campaign's subject: anything else is a crash
                crashes += 1
                if crashes <= 3:
                    traceback.print_exc()
            if len(data) and stats.max_alloc / len(data) > worst_ratio:
                worst_ratio, worst = stats.max_alloc / len(data), (stats.max_alloc, len(data))
            if stats.max_alloc > len(data):
                crashes += 1
                print(f"allocation {stats.max_alloc} > file size {len(data)}", file=sys.stderr)
    elapsed = time.perf_counter() - start

    reads = sum(outcomes.values()) + crashes
    print(f"seed {args.seed}, {len(bases)} base files, largest mutated input {biggest_file} bytes")
    print(f"inputs tried      {args.inputs} ({reads} reads: by scanning and with the state size)")
    print(f"crashes           {crashes}")
    print(
        f"largest allocation vs file size: {worst_ratio:.4f} "
        f"({worst[0]} of {worst[1]} bytes; bound 1.0)"
    )
    for name, n in sorted(outcomes.items()):
        print(f"  {name:<24} {n}")
    print(f"time              {elapsed:.1f} s ({args.inputs / elapsed:,.0f} inputs/s)")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
