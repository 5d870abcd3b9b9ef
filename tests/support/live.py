"""Replaying a saved live workload on a real llama-server (the live tests' one helper for it).

Imported by the live test modules after they skip without the ``gguf`` package.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pcspec.live import calibrate
from pcspec.live.build import TREES, find_server
from pcspec.live.calibrate import DEFAULT_VARIANT
from pcspec.live.campaign import References
from pcspec.live.designs import design_of, with_faults
from pcspec.live.explain import explain
from pcspec.live.models import ensure_model
from pcspec.live.process import Flags
from pcspec.live.report import read_workload
from pcspec.live.schedule import ServerFacts
from pcspec.live.session import Outcome, Target, execute
from pcspec.model.server import Server
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import Judge
from tests.support import paths

Found = list[tuple[str, str | None]]


def build_or_skip(name: str, faults: bool = False) -> Path:
    """The cached server of a design (``faults``: its fault-point build) or of a tree (``b11549``),
    else the test skips, naming the command that builds it."""
    if name in TREES:
        found, how = find_server(name), f"--tree {name}"
    else:
        d = design_of(name)
        patches, flags = with_faults(d) if faults else (d.patch_paths(), d.flags)
        found, how = find_server(d.tree, patches, flags), f"--design {name}" + (" --faults" if faults else "")
    if found is None:
        pytest.skip(f"not built: pcspec build {how}")
    return found


def replay(binary: Path, name: str, models: Path, tmp_path: Path, *, timeout: float = 15,
           variant: str = DEFAULT_VARIANT) -> Outcome:
    """``tests/data/live/NAME`` run once on ``binary`` beside its uncached reference, compared
    with the model under ``variant``'s rules."""
    kind, flags, _seed, ops = read_workload(paths.DATA / "live" / name)
    model = ensure_model(kind, models)
    refs = References(binary, model, tmp_path, timeout, kind)
    try:
        return execute(Target(binary, model, kind, flags), tmp_path / "run", refs.get(flags), ops=ops,
                       timeout=timeout, variant=variant)
    finally:
        refs.close()


def explained(out: Outcome) -> Found:
    """Each finding's class and its explanation (None: unexplained)."""
    return [(f.rule, explain(f, out)) for f in out.analysis.findings]


# The builds a scenario test runs on, and the rule set of each one's model (None: the design's
# own rules on 0c1e570, calibrate.design_rules).
BUILD_RULES: dict[str, str | None] = {"baseline": "october", "pr30137": None, "pr27451": None, "b11549": "b11549",
                                      "fixed": None}


def model_of(build: str, kind: str, flags: Flags, facts: ServerFacts, prompts: Sequence[Sequence[int]],
             pids: Sequence[str]) -> tuple[Server, list[str]]:
    """The model of ``build`` (BUILD_RULES) run on ``prompts`` (3 tokens each, one after the
    other), and the violations of ``pids`` it shows, as ``"PID: message"``."""
    rules = BUILD_RULES[build] or calibrate.design_rules(build, "0c1e570")
    variant = calibrate.variant(rules)
    srv = Server(calibrate.model_config(kind, flags, facts, state_seq_version=variant.rules.state_seq_version), variant)
    judge = Judge(srv, [get_property(p) for p in pids])
    found = []
    for tokens in prompts:
        srv.request(tuple(tokens), n_predict=3)
        srv.run()
        found += judge()
    return srv, [f"{v.rule}: {v.message}" for v in found]


def close_logprobs(a: list[list[tuple[int, float]]], b: list[list[tuple[int, float]]]) -> bool:
    """The same top tokens, their log-probabilities within 1e-3 (a batch of another shape sums
    in another order: differences of about 1e-5 were seen)."""
    return len(a) == len(b) and all(
        [t for t, _ in x] == [t for t, _ in y] and all(abs(p - q) < 1e-3 for (_, p), (_, q) in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True))
