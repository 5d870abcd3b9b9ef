"""The model compiled with mypyc against the model as written, side by side in one run.

The walker's throughput is bounded by the model: walking ``fixed`` with no property judged
(``Walker(fixed, [])``) is more than half of a judged walk (docs/PERFORMANCE.md, "Fuzzing
speed": "walker, model only"). The model is
typed (``mypy --strict``), so mypyc can compile it to a C extension without a change of
language. This script measures what that would give, and checks that it changes nothing:

1. copies the ``pcspec`` package (links resolved) into a temporary folder;
2. compiles every module of ``pcspec.model`` there with mypyc, except ``events`` and ``logged``
   (``events.stamp`` sets a slot through the class's ``__dict__``, which a compiled class does
   not have; neither module is on the hot path);
3. runs the same walks in child processes, interleaved, once on the checkout (interpreted) and
   once on the copy (compiled): ``fixed`` judged by the whole catalogue, ``fixed`` with no
   property (the model alone), and a hunt (one property judged, as ``pcspec verify`` hunts);
4. requires both to produce the same walks (rules, operations, first violations, decision
   coverage, the hunt's find): the compiled model must be the same model.

Needs a C compiler and mypy (the ``dev`` extra). Nothing is installed or left behind.

    python benchmarks/compiled_speed.py            # 300 examples, 3 interleaved repetitions
    python benchmarks/compiled_speed.py --examples 600 --reps 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTERPRETED_ONLY = {"events.py", "logged.py"}

# The child: one measurement, printed as one JSON line.
CHILD = r"""
import json, sys, time
import pcspec.model.server as server
from pcspec.model.designs import named
from pcspec.properties.catalogue import get_property
from pcspec.engines.walker import Walker
what, examples = sys.argv[1], int(sys.argv[2])
if what == "hunt":
    w = Walker(named()["pr30137"], [get_property("CKPT-1")], ["CKPT-1"])
else:
    w = Walker(named()["fixed"]) if what == "judged" else Walker(named()["fixed"], [])
w.walk(1, 10)  # warm up (imports, first allocations)
t0 = time.perf_counter()
r = w.walk(0, examples)
dt = time.perf_counter() - t0
hit = None if r.hit is None else [r.hit.example_seed, r.hit.violation.message, len(r.hit.ops)]
print(json.dumps({
    "compiled": server.__file__.endswith((".so", ".pyd")),
    "seconds": dt, "rules": r.rules, "steps": r.steps, "examples": r.examples,
    "first": sorted(r.first), "coverage": sorted(r.coverage.items()), "hit": hit,
}))
"""


def compile_copy(dest: Path) -> None:
    shutil.copytree(ROOT / "pcspec", dest / "pcspec", symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest)  # mypy's settings (stub-less libraries), which mypyc reads
    model = dest / "pcspec" / "model"
    files = sorted(str(p.relative_to(dest)) for p in model.glob("*.py") if p.name not in INTERPRETED_ONLY)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mypyc", *files], cwd=dest, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"mypyc failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    print(f"compiled {len(files)} modules of pcspec.model with mypyc in {time.perf_counter() - t0:.0f} s")


def measure(path: Path, what: str, examples: int) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(path), PYTHONHASHSEED="0")
    # cwd: ``python -c`` puts the current folder first on sys.path, before PYTHONPATH
    done = subprocess.run(
        [sys.executable, "-c", CHILD, what, str(examples)],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"the {what} walk failed on {path}:\n{done.stderr[-4000:]}")
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=300, help="examples per walk")
    ap.add_argument("--hunt-examples", type=int, default=4000, help="budget of the hunt (verify's)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pcspec-mypyc-") as tmp:
        compiled = Path(tmp)
        compile_copy(compiled)
        runs = {"interpreted": ROOT, "compiled": compiled}
        walks = {"judged": args.examples, "model": args.examples, "hunt": args.hunt_examples}
        seen: dict[tuple[str, str], list[dict[str, object]]] = {}
        for _rep in range(args.reps):  # interleaved: a change of the machine's load hits both
            for what, n in walks.items():
                for name, path in runs.items():
                    got = measure(path, what, n)
                    if got["compiled"] != (name == "compiled"):
                        sys.exit(f"the {name} run imported the wrong model (PYTHONPATH={path})")
                    seen.setdefault((what, name), []).append(got)
    print(f"{args.reps} interleaved repetitions, medians:")
    print(f"  {'walk':34s} {'interpreted':>12s} {'compiled':>12s} {'ratio':>6s}")
    labels = {
        "judged": f"fixed, every property, {args.examples} ex",
        "model": f"fixed, no property, {args.examples} ex",
        "hunt": "pr30137 CKPT-1 hunt, walk seed 0",
    }
    same = True
    for what in walks:
        a, b = seen[(what, "interpreted")], seen[(what, "compiled")]
        keys = ("rules", "steps", "examples", "first", "coverage", "hit")
        if any(x[k] != y[k] for x in a for y in b for k in keys):
            same = False
            print(f"  DIFFERENT walks for {what}: the compiled model is not the same model")
        if what == "hunt":
            ta = statistics.median(float(str(x["seconds"])) for x in a)
            tb = statistics.median(float(str(x["seconds"])) for x in b)
            print(f"  {labels[what]:34s} {ta:10.2f} s {tb:10.2f} s {ta / tb:6.2f}")
        else:
            ra = statistics.median(int(str(x["rules"])) / float(str(x["seconds"])) for x in a)
            rb = statistics.median(int(str(x["rules"])) / float(str(x["seconds"])) for x in b)
            print(f"  {labels[what]:34s} {ra:8,.0f} r/s {rb:8,.0f} r/s {rb / ra:6.2f}")
    print("same walks (rules, operations, first violations, coverage, hunt find):", "yes" if same else "NO")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
