"""Every file of this repository that README.md and docs/*.md name in backticks exists.

A word of an inline code span (``like this``; fenced blocks are examples, not references) is
taken for a path of the repository when, once a ``:line``, ``:line-line``, ``::test`` or
``: Name`` suffix and surrounding punctuation are taken off, it is made of path characters and

- its first part is a top-level entry of the repository (``model/``, ``properties/``,
  ``proofs/``, ``pcspec/``, ``tests/``, ``docs/``, ``ports/``, ``patches/``, ``benchmarks/``,
  ``.ci/``, ``README.md``, ``pyproject.toml``, ...): it must exist from the root;
- or its first part is a package of ``pcspec/`` (``live/build.py``, ``tools/docgen.py``): it must
  exist under ``pcspec/``;
- or it names a file by an extension this repository uses for its own files (``.py``, ``.md``,
  ``.patch``, ``.jsonl``, ``.log``, ``.bin``, ``.toml``), alone in its code span (``walker.py``,
  ``found/f2-x.jsonl``; a word inside a command line is not): some file of the repository must
  have that name, or end with that path.

A glob (``docs/*.md``) or a placeholder (``properties/<family>.py``) must match at least one
file. Names of llama.cpp's own tree (``server-context.cpp``, ``src/...``, ``common/...``) are no
paths of this repository by these rules, except the few of ``ALLOWED`` that look like one; the
others there are what a reader's commands write, each with its reason, as are the files
docs/USING.md's blocks write (``file=mine.py``).
"""

from __future__ import annotations

import fnmatch
import re
from functools import cache
from pathlib import Path

from tests.support.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# A word that these rules take for a path of the repository but is not one: pattern -> why.
ALLOWED: dict[str, str] = {
    # llama.cpp's tree, which has folders of the same names as this repository's.
    "tools/server*": "llama.cpp's server folder (pcspec/tools is another tools/)",
    "tests/test-*.cpp": "llama.cpp's own C++ tests",
    "unit/test_*.py": "llama.cpp's server tests (tools/server/tests/unit)",
    # What the reader's own commands write.
    "mine.toml": "the reader's own workload file (BENCH.md)",
    "repro_*.py": "the pytest file a counterexample is written as",
    "pcspec-out/*": "the default --out folder, written by the commands",
    "OUT/*": "an --out folder, named as a placeholder",
    "camp/*": "CAMPAIGNS.md's --out folder, written by the campaign",
    "workload.jsonl": "a finding's shrunk workload, written by pcspec live (LIVE.md)",
    "trace.jsonl": "the model's trace of a finding, written by pcspec live (LIVE.md)",
    "report.md": "a finding's report, written by pcspec live (LIVE.md)",
    "excerpt.log": "a finding's log lines, written by pcspec live (LIVE.md)",
    "server.log": "a server run's log, written by pcspec live",
}

SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
WORD = re.compile(r"[\w.*<>@+-]+(?:/[\w.*<>@+-]*)*")
SUFFIX = re.compile(r"(::\w+|:\d[\d, -]*)$")
OWN_EXT = {".py", ".md", ".patch", ".jsonl", ".log", ".bin", ".toml"}
SKIP_DIRS = {".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis",
             "pcspec-out", "build", ".venv", "venv"}


@cache
def _files() -> tuple[str, ...]:
    """Every file (and folder, with a trailing /) of the repository, relative to the root."""
    out: list[str] = []
    stack = [ROOT]
    while stack:
        here = stack.pop()
        for p in here.iterdir():
            if p.name in SKIP_DIRS or p.name.endswith(".egg-info"):
                continue
            rel = p.relative_to(ROOT).as_posix()
            if p.is_dir() and not p.is_symlink():
                out.append(rel + "/")
                stack.append(p)
            elif p.is_file():
                out.append(rel)
    return tuple(sorted(out))


TOP = {p.name for p in ROOT.iterdir() if p.name not in SKIP_DIRS and p.name != ".git"}
PACKAGES = {p.name for p in (ROOT / "pcspec").iterdir() if (p / "__init__.py").exists()}


def spans(text: str) -> list[str]:
    """The inline code spans of a Markdown text, fenced blocks left out."""
    return [m.group(1) for m in SPAN.finditer(FENCE.sub("", text))]


def candidates(span: str) -> list[str]:
    """The words of one code span that name a path of the repository (suffixes taken off)."""
    words = span.split()
    alone = len(words) == 1 or (len(words) > 1 and words[0].endswith(":"))  # `file.py: Name`
    out = []
    for raw in words:
        w = raw.strip("()[]{},;\"'").rstrip(":.,")
        if not w or "://" in w or w.startswith(("/", "~", "$", "-", "./", "../")):
            continue
        w = SUFFIX.sub("", w).rstrip(":")
        if WORD.fullmatch(w) is None:
            continue
        first = w.split("/", 1)[0]
        rooted = "/" in w and (first in TOP or first in PACKAGES)
        named = alone and raw is words[0] and Path(w.rstrip("/")).suffix in OWN_EXT
        if rooted or named:
            out.append(w)
    return out


def _pattern(word: str) -> str:
    return re.sub(r"<[^>]*>", "*", word.rstrip("/"))


def exists(word: str) -> bool:
    """Whether the repository has what ``word`` names (see the module's docstring)."""
    pattern = _pattern(word)
    first = word.split("/", 1)[0]
    if "/" in word and (first in TOP or first in PACKAGES):  # from the root (through the links)
        base = ROOT if first in TOP else ROOT / "pcspec"
        return any(p.name not in SKIP_DIRS for p in base.glob(pattern))
    # a name, or a path's tail: anywhere
    return any(fnmatch.fnmatchcase(f.rstrip("/"), pattern) or fnmatch.fnmatchcase(f.rstrip("/"), "*/" + pattern)
               for f in _files())


@cache
def _guide_files() -> frozenset[str]:
    """The files docs/USING.md's blocks write into the reader's folder (``file=NAME``)."""
    text = (ROOT / "docs" / "USING.md").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^```\S+ file=(\S+)", text, re.M))


def allowed(word: str) -> bool:
    return word in _guide_files() or any(fnmatch.fnmatchcase(word, p) for p in ALLOWED)


def missing(text: str) -> list[str]:
    """The words of ``text``'s code spans that name a path the repository does not have."""
    return [w for s in spans(text) for w in candidates(s) if not allowed(w) and not exists(w)]


def test_every_path_the_documents_name_exists() -> None:
    bad = {d.relative_to(ROOT).as_posix(): sorted(set(missing(d.read_text(encoding="utf-8")))) for d in DOCS}
    bad = {d: ws for d, ws in bad.items() if ws}
    assert not bad, "paths named in backticks that the repository does not have: " + repr(bad)


def test_the_rules_catch_what_they_should() -> None:
    text = ("The machine (`properties/machine.py`, `pcspec/fuzzing.py: hunt`), `live/nowhere.py`, "
            "`tests/core/test_nothing.py::test_x`, `nowhere_at_all.py`, `docs/NOTHING*.md`, "
            "run `python benchmarks/no_such_bench.py --seeds 3`.")
    assert missing(text) == ["properties/machine.py", "pcspec/fuzzing.py", "live/nowhere.py",
                             "tests/core/test_nothing.py", "nowhere_at_all.py", "docs/NOTHING*.md",
                             "benchmarks/no_such_bench.py"]


def test_the_rules_let_pass_what_they_should() -> None:
    text = ("`model/designs.py: Fixed`, `pcspec/model/config.py: UPPER`, `live/build.py`, "
            "`tests/live/test_live_faults.py::test_a_failed_checkpoint_allocation_aborts_the_server`, "
            "`properties/<family>.py`, `docs/*.md`, `server-context.cpp:2290-2345`, `src/llama-kv-cache.cpp`, "
            "`walker.py`, `found/f1-kv-transparency.jsonl`, `pcspec check-log server.log`, `.ci/run`, "
            "`https://github.com/ggml-org/llama.cpp/pull/30137`, `~/.cache/pcspec/`, `mine.py`, "
            "`tools/server/tests`, `03-eviction.log`, `POST /slots/0?action=save`")
    assert missing(text) == []
    for pattern, why in ALLOWED.items():
        assert why and not exists(pattern), f"{pattern} exists: it needs no exemption"


def test_every_exemption_is_used() -> None:
    words = {w for d in DOCS for s in spans(d.read_text(encoding="utf-8")) for w in candidates(s) if not exists(w)}
    unused = [p for p in ALLOWED if not any(fnmatch.fnmatchcase(w, p) for w in words)]
    assert not unused, f"no document needs these exemptions any more: {unused}"
