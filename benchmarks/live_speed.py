"""pcspec live timings: model generation, server start, requests per second of a live session.

For each model kind: generate the model file (fresh, into a temporary folder), then one fuzzed
session of ``--requests`` requests on one server with fixed flags, and report the wall time of
the requests (HTTP only), of the judgement (the reference answers, the model following the log,
the log checker) and the requests per second of the live part. The build time is the cached
build's (``build.log``) or, with ``--build``, a fresh build into ``$PCSPEC_CACHE``.

    python benchmarks/live_speed.py [--requests 60] [--kinds kv,swa,recurrent,hybrid]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from pcspec.live import build
from pcspec.live.campaign import References
from pcspec.live.fuzz import Fuzzer
from pcspec.live.models import KINDS, write_model
from pcspec.live.process import Flags, ServerProcess
from pcspec.live.session import Target, execute


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--build", action="store_true", help="time a build (into $PCSPEC_CACHE)")
    args = ap.parse_args(argv)
    if args.build:
        res = build.build()
        print(f"build: {res.seconds:.0f} s (sdist {res.download_seconds:.0f} s, configure "
              f"{res.configure_seconds:.1f} s){' (cached)' if res.cached else ''}")
    binary = build.find_server()
    if binary is None:
        print("no llama-server: python -m pcspec.live.build", file=sys.stderr)
        return 2
    flags = Flags(n_slots=2, n_ctx=4096, n_batch=64, n_ubatch=64, cache_ram_mib=8, ctx_checkpoints=8,
                  checkpoint_min_step=64)
    print(f"{'kind':10} {'gen ms':>7} {'start s':>7} {'requests':>8} {'http s':>7} {'req/s':>6} {'judge s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            t0 = time.perf_counter()
            model = write_model(kind, Path(tmp) / f"{kind}.gguf", seed=0)
            gen_ms = (time.perf_counter() - t0) * 1000
            t1 = time.perf_counter()
            with ServerProcess(binary, model, flags, Path(tmp) / f"start-{kind}"):
                start_s = time.perf_counter() - t1
            refs = References(binary, model, Path(tmp) / kind, 20.0, kind)
            try:
                t2 = time.perf_counter()
                out = execute(Target(binary, model, kind, flags), Path(tmp) / kind / "run", refs.get(flags),
                              fuzzer=Fuzzer(args.seed, flags.n_slots, flags.n_ctx // flags.n_slots),
                              max_requests=args.requests, seconds=600)
                total = time.perf_counter() - t2
            finally:
                refs.close()
            http = out.run.seconds
            print(f"{kind:10} {gen_ms:7.0f} {start_s:7.2f} {out.n_requests:8d} {http:7.1f} "
                  f"{out.n_requests / http:6.1f} {total - http:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
