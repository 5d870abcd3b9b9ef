"""Every llama-server log line is recognised in pcspec/logcheck only (docs/ARCHITECTURE.md,
"Tools"): live and bench read its typed events. A regular expression elsewhere that spells out a
phrase of a server line is a private copy of a line whose format the checker's tables follow
from build to build, and would drift from them.

A server line's phrase: a literal run of a pattern (what it spells out between its groups,
classes and quantifiers) of two words or more that occurs verbatim in the corpus, every log of
tests/data and one line for each event kind those logs do not show (``EXAMPLES``; a test keeps
every kind shown). A pattern that parses something else (a trace, the command line, a generated
document's markers) spells out nothing a server prints, and one that matches log lines without
spelling out their words (``0x[0-9a-f]+``) recognises no line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from re import _parser

from pcspec.logcheck import events as ev
from pcspec.logcheck.tasks import read_events
from tests.support.paths import DATA, ROOT

# the folders of code; pcspec/model, pcspec/properties and pcspec/proofs link to the last three
SCANNED = ("pcspec", "model", "properties", "proofs")
LINKS = {("pcspec", "model"), ("pcspec", "properties"), ("pcspec", "proofs")}
RECOGNISER = ("pcspec", "logcheck")
# the functions of ``re`` whose first argument is a pattern
PATTERN_FUNCTIONS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
_PHRASE = re.compile(r"[A-Za-z_]{2,}[^A-Za-z_]+[A-Za-z_]{2,}")

# one line of each event kind that no log of tests/data shows, as the C++ prints it
EXAMPLES = (
    "0.01.000.000 E srv         alloc: failed to allocate memory for prompt cache state: std::bad_alloc",
    "0.01.000.001 I srv         alloc:  - prompt is already in the cache, skipping",
    "0.01.000.002 W srv        update:  - cache size limit reached, removing oldest entry (size = 0.400 MiB)",
    "0.01.000.003 W srv         alloc:  - cache size limit reduced to 0.160 MiB",
    "0.01.000.004 W srv         alloc:  - prompt state size 0.400 MiB exceeds cache size limit 0.300 MiB, skipping",
    "0.01.000.005 I slot update_slots: id  0 | task 3 | reusing chunk with size 4, shifting KV cache [8, 12) -> [4, 8)",
    "0.01.000.006 W srv        update:  - cache token limit (4096, est: 4096) reached, removing oldest entry "
    "(size = 0.400 MiB)",
    "0.01.000.007 W slot update_slots: id  0 | task 3 | slot context shift, n_keep = 0, n_left = 2046, "
    "n_discard = 1023",
    "0.01.000.008 D slot send_decisio: id  1 | task 3 | sending decision result",
    "0.01.000.009 D llama_kv_cache: copying KV buffer: stream 1 to stream 0",
    "0.01.000.010 E srv          load: failed to restore state with size 1048576",
    "0.01.000.011 I slot launch_slot_: id  0 | task 4 | clearing cache for lora change. 1 loras -> 0 loras",
    "0.01.000.012 I srv  handle_compl: launching slots for parent task id_task = 3 with 1 child tasks",
    "0.01.000.013 I slot launch_slot_: id  0 | task 4 | processing task, is_child = 1",
    "0.01.000.014 I slot prompt_clear: id  0 | task 4 | clearing prompt with 70 tokens",
    "0.01.000.015 W slot prompt_load: id  0 | task 4 | failed to load prompt from cache",
    "0.01.000.016 E slot prompt_save: id  0 | task 4 | failed to save complete prompt state",
    "0.01.000.017 I slot update_slots: id  1 | task 3 |  - copying shared prompt (60 tokens) to child 0",
    "0.01.000.018 W srv  try_clear_id: purging slot 1 with 40 tokens",
    "0.01.000.019 D slot update_slots: id  0 | task 4 | waiting for parent slot to complete",
    "0.01.000.020 I slot load_slot_ch: id  0 | task -1 | restored 2 context checkpoint(s) from 'slots/a.bin'",
)


@cache
def corpus() -> str:
    logs = [p.read_bytes().decode("utf-8", errors="replace") for p in sorted(DATA.rglob("*.log"))]
    return "\n".join([*logs, *EXAMPLES])


def literal_runs(pattern: str) -> list[str]:
    """What ``pattern`` spells out: its runs of literal characters, in order (a class, a group's
    edge, a quantified character or an alternative ends a run)."""
    try:
        parsed = _parser.parse(pattern)
    except re.error:
        return []
    runs: list[str] = []
    run: list[str] = []

    def end() -> None:
        if run:
            runs.append("".join(run))
            run.clear()

    def walk(items: _parser.SubPattern) -> None:
        for op, av in items:
            if op is _parser.LITERAL:
                run.append(chr(av))
                continue
            end()
            for sub in _subpatterns(av):
                walk(sub)
                end()

    walk(parsed)
    end()
    return runs


def _subpatterns(av: object) -> Iterator[_parser.SubPattern]:
    if isinstance(av, _parser.SubPattern):
        yield av
    elif isinstance(av, tuple | list):
        for x in av:
            yield from _subpatterns(x)


def server_phrases(pattern: str) -> list[str]:
    """The phrases of server lines ``pattern`` spells out."""
    runs = (r.strip() for r in literal_runs(pattern))
    return [r for r in runs if len(r) >= 8 and _PHRASE.search(r) and r in corpus()]


def _text(node: ast.expr, consts: dict[str, str]) -> str | None:
    """The string an expression of literals spells (bytes as Latin-1; a formatted value as
    ``X``), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        return node.value if isinstance(node.value, str) else node.value.decode("latin-1")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, consts), _text(node.right, consts)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = [v.value if isinstance(v, ast.Constant) else "X" for v in node.values]
        return "".join(p if isinstance(p, str) else "X" for p in parts)
    return None


def patterns(source: str) -> Iterator[tuple[int, str]]:
    """(line, pattern) of every call of ``re`` with a pattern made of literals (and the module's
    string constants) in ``source``."""
    tree = ast.parse(source)
    modules, functions = {"re"}, set[str]()
    consts: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            text = _text(node.value, consts)
            if text is not None:
                consts[node.targets[0].id] = text
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "re"}
        elif isinstance(node, ast.ImportFrom) and node.module == "re":
            functions |= {a.asname or a.name for a in node.names if a.name in PATTERN_FUNCTIONS}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if not ((isinstance(f, ast.Attribute) and f.attr in PATTERN_FUNCTIONS and isinstance(f.value, ast.Name)
                 and f.value.id in modules) or (isinstance(f, ast.Name) and f.id in functions)):
            continue
        arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "pattern"), None)
        text = _text(arg, consts) if arg is not None else None
        if text is not None:
            yield node.lineno, text


def code_files(root: Path = ROOT) -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).parts
            if parts[:2] not in LINKS and parts[:2] != RECOGNISER:
                yield path


def server_line_patterns(root: Path = ROOT) -> list[str]:
    """``path:line: pattern (phrases)`` of every pattern outside pcspec/logcheck that spells out a
    server line's phrase."""
    found = []
    for path in code_files(root):
        for line, pattern in patterns(path.read_text(encoding="utf-8")):
            phrases = server_phrases(pattern)
            if phrases:
                found.append(f"{path.relative_to(root)}:{line}: {pattern!r} ({', '.join(map(repr, phrases))})")
    return found


def test_server_log_lines_are_recognised_in_logcheck_only() -> None:
    found = server_line_patterns()
    assert not found, ("a regular expression for a llama-server log line outside pcspec/logcheck: read "
                       "pcspec.logcheck's typed events instead (pcspec.logcheck.tasks.read_events)\n"
                       + "\n".join(found))


def test_the_corpus_shows_every_event_kind() -> None:
    """Every line the checker knows is in the corpus, so a copy of any of them is found."""
    shown = {type(e) for e in read_events(corpus())}
    assert set(ev.ALL_EVENT_TYPES) <= shown, sorted(k.kind for k in set(ev.ALL_EVENT_TYPES) - shown)


def test_a_copy_of_a_server_line_is_found_and_other_patterns_are_not() -> None:
    source = '\n'.join([
        "import re",
        "from re import finditer as each",
        'F = r"(-?[\\d.]+)"',
        'STATE = re.compile(rb"- cache state: (\\d+) prompts, ([0-9.]+) MiB")',  # bytes
        're.search(r"id +(\\d+) \\| task -?\\d+ \\| selected slot by id \\(\\1\\)\\n", "")',  # escapes
        'each(r"prompt cache update took " + F + " ms", "")',  # a module constant, an alias
        're.compile(r"que +start_loop: update slots")',  # the queue's lines too
        # parsing other things
        're.compile(r"--ctx-checkpoints (\\d+)")',  # the command line
        're.compile(r\'"event": "(\\w+)", "line": (\\d+)\')',  # a trace
        're.sub(r"0x[0-9a-f]+", "0x", "")',  # matches log lines, spells out none of their words
        're.compile(rf"(<!-- generated: {F} -->\\n)")',  # a document's markers
    ])
    flagged = [line for line, pattern in patterns(source) if server_phrases(pattern)]
    assert flagged == [4, 5, 6, 7]
