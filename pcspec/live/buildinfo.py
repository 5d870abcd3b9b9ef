"""Which rule set a ``llama-server`` binary follows, from the build it names.

``pcspec live`` compares a server with the model's rule set of its build (docs/RULESETS.md).
The build is asked of the binary before any server run: ``llama-server --version`` prints
``version: V (build N, commit C)`` (common/build-info.cpp.in:33, the same in the October tree,
b11434 and b11549), from the same ``llama_build_number()`` and ``llama_commit()`` as the build
line its log opens with (``common_params_print_info: build N (C) with ...``,
common/common.cpp:402 at 0c1e570, 406 of b11434 and b11549). ``pcspec.logcheck.builds`` reads
both forms and chooses the rule set the same way as ``pcspec check-log``: a known commit or
build number names one, a build newer than every known one gets the newest with a warning.

A binary that names nothing (``build 0, commit unknown``: built from a source archive without
``LLAMA_BUILD_NUMBER``, which pcspec's own recipe passes, ``pcspec.live.build``) cannot be told
apart before it runs: it gets the October rule set, the one of the tree pcspec builds by
default, and a warning offering ``--rules``.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pcspec.logcheck.builds import choose, parse_build

FALLBACK = "october"  # the rule set of the tree pcspec live builds by default (pcspec.live.build)
PROBE_SECONDS = 30.0


@dataclass(frozen=True)
class ServerRules:
    """The rule set chosen for a binary, why, and a one-line warning (empty when none)."""

    rule_set: str
    evidence: str
    warning: str = ""


def probe(binary: Path, seconds: float = PROBE_SECONDS) -> str:
    """What ``binary --version`` prints (stdout and stderr: build-info prints to stderr)."""
    try:
        # (absolute: a bare relative name would be looked up on PATH)
        proc = subprocess.run([os.path.abspath(binary), "--version"], capture_output=True, timeout=seconds,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"<no answer to --version: {exc}>"
    return (proc.stdout + proc.stderr).decode("utf-8", "replace")


def rules_for_text(text: str) -> ServerRules:
    """The rule set for what a binary printed of its build (``--version``, or a log's head)."""
    named = parse_build(text)
    if named is None:
        return ServerRules(FALLBACK, "the binary names no build",
                           f"the server names no build: compared with the {FALLBACK} rule set "
                           f"(--rules NAME to choose another)")
    got = choose(*named)
    if len(got.candidates) == 1:
        return ServerRules(got.candidates[0], got.evidence, got.warning)
    # several rule sets it may be (oldest first): the first is the newest known build at or
    # below the binary's, the nearest one whose facts are known to be there
    nearest = got.candidates[0]
    return ServerRules(nearest, got.evidence,
                       f"{got.evidence}: compared with the {nearest} rule set, the nearest known build "
                       f"(it may be {' or '.join(got.candidates)}; --rules NAME to choose)")


def rules_for_server(binary: Path) -> ServerRules:
    return rules_for_text(probe(binary))
