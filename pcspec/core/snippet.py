"""A counterexample as a pytest file a person can read, follow and edit.

Like Hypothesis printing a failing stateful run as a script, the file spells the trace out:
the variant (a built-in by name, a variant of one's own as the seams it changes), the
configuration (the fields that differ from the defaults), and the operations as a list of
steps, one per line, numbered as the trace and the violation messages number them. The test
replays them through ``pcspec.properties.judge.replay`` (the one loop of ``pcspec.core.loop``,
which every other replay goes through), and fails while the violation reproduces. Where each
expected violation shows is the caller's to say (``shown``: the judge replays the trace for it,
``pcspec.properties.judge.where_shown``); this module only writes text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pcspec.core.errors import PcspecError
from pcspec.core.ops import Operation
from pcspec.core.trace import Trace
from pcspec.model.config import Config
from pcspec.model.design import Design
from pcspec.model.designs import get_design

WIDTH = 100  # a step longer than this is wrapped
MIN_RUN = 4  # consecutive tokens written as a range from this many on


def _tokens(tokens: list[int]) -> list[str]:
    """Token ids with runs of consecutive ids as ``*range(a, b)``: prompts are mostly runs."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        j = i + 1
        while j < len(tokens) and tokens[j] == tokens[j - 1] + 1:
            j += 1
        if j - i >= MIN_RUN:
            out.append(f"*range({tokens[i]}, {tokens[j - 1] + 1})")
        else:
            out += [str(t) for t in tokens[i:j]]
        i = j
    return out


def _value(v: Any, imports: set[str]) -> str:
    if isinstance(v, Enum):
        imports.add(type(v).__name__)
        return f"{type(v).__name__}.{v.name}"
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_tokens(v) if all(isinstance(x, int) for x in v) else map(repr, v)) + "]"
    return json.dumps(v) if isinstance(v, str) else repr(v)  # JSON string escapes are Python's


def _wrap(items: list[str], width: int) -> list[str]:
    """Items joined by ", " in lines of at most ``width`` characters (an item is never split)."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += ", " + item
        else:
            lines.append(item)
    return [ln + "," for ln in lines]


def _step(i: int, operation: Operation, note: str) -> str:
    """One operation, on one line when it fits; else its tokens on lines of their own."""
    op = operation.to_json()
    keys = ["op", *sorted(k for k in op if k != "op")]
    fields = {k: f"{json.dumps(k)}: {_value(op[k], set())}" for k in keys}
    comment = f"# {i}" + (f"  <- {note}" if note else "")
    line = "    {" + ", ".join(fields.values()) + f"}},  {comment}"
    if len(line) <= WIDTH or not isinstance(op.get("tokens"), list):
        return line
    head = ", ".join(fields[k] for k in keys if k != "tokens")
    body = _wrap(_tokens(op["tokens"]), WIDTH - 8)
    return "\n".join([f"    {{{head}, \"tokens\": [  {comment}", *("        " + b for b in body), "    ]},"])


def _variant(v: Design, imports: set[str]) -> str:
    """How the file gets the design back: by name, when that name finds a design of the same
    code and rule set; else by importing its class (a design of one's own, from its module)."""
    try:
        known = None if v.origin is not None else get_design(v.name)
    except PcspecError:
        known = None
    if known is not None and type(known) is type(v) and known.rules == v.rules:
        return f'get_design("{v.name}")'
    cls = type(v)
    imports.add(f"from {cls.__module__} import {cls.__qualname__}")
    rules = "" if v.rules is cls.rules else f"get_rule_set({v.rules.name!r})"
    if rules:
        imports.add("from pcspec.model.rulesets import get_rule_set")
    name = "" if v.name == cls.name else f"name={v.name!r}"
    return f"{cls.__qualname__}({', '.join(a for a in (rules, name) if a)})"


def _config(cfg: Config, imports: set[str]) -> str:
    default = Config()
    diff = [f.name for f in dataclasses.fields(Config) if getattr(cfg, f.name) != getattr(default, f.name)]
    if not diff:
        return "Config()"
    return "Config(\n" + "".join(f"    {name}={_value(getattr(cfg, name), imports)},\n" for name in diff) + ")"


def _is_class_ref(module: str, attr: str) -> bool:
    """Whether ``MODULE:NAME`` names a class (a design's class is instantiated in the file)."""
    import importlib

    try:
        return isinstance(getattr(importlib.import_module(module), attr), type)
    except Exception:  # (the file is written whatever the module does; the test imports it)
        return False


def pytest_snippet(
    trace: Trace, name: str, shown: Mapping[int, str] | None = None, variant_ref: str | None = None
) -> str:
    """The trace as a runnable pytest file that fails while the violation reproduces;
    ``shown``: step index -> a note on the step where an expected violation first shows;
    ``variant_ref``: ``MODULE:NAME`` of a variant of the user's, which the file imports (so
    that it tests that very object, whatever it is made of)."""
    ident = "".join(c if c.isalnum() else "_" for c in name)
    imports: set[str] = set()
    user_import = ""
    if variant_ref is not None and not type(trace.variant).__module__.startswith("pcspec."):
        module, _, attr = variant_ref.partition(":")
        user_import = f"from {module} import {attr}\n"
        variant = f"{attr}()" if _is_class_ref(module, attr) else attr
    else:
        variant = _variant(trace.variant, imports)
    config = _config(trace.config, imports)
    seen = ", ".join(sorted({e["property"] for e in trace.expect})) or "no violation"
    notes = dict(shown or {})
    lines = sorted(i for i in imports if i.startswith("from "))
    enums = sorted(i for i in imports if not i.startswith("from ") and i != "replace")
    from_config = ", ".join(["Config", *[e for e in enums if e == "MemoryKind"]])
    order = {"property": 0, "op": 1, "message": 2}
    expect = "".join(
        "    {" + ", ".join(f'"{k}": {_value(e[k], set())}' for k in sorted(e, key=lambda k: order.get(k, 3))) + "},\n"
        for e in trace.expect
    )
    return (
        f'"""Counterexample found by pcspec: {trace.variant.name} shows {seen}.\n\n'
        "The steps are the operations of the trace\n\n"
        f"    {name}.jsonl\n\n"
        "one per line (the vocabulary is pcspec/core/ops.py), numbered from 0 as `pcspec replay`\n"
        "numbers them. Edit them (drop a step, change a token or a configuration field) and run\n"
        'pytest on this file: the test fails while the violation reproduces.\n"""\n\n'
        + user_import
        + "".join(f"{i}\n" for i in lines)
        + f"from pcspec.model.config import {from_config}\n"
        + ("from pcspec.model.designs import get_design\n" if "get_design(" in variant else "")
        + "from pcspec.core.trace import Trace\nfrom pcspec.properties.judge import replay\n\n"
        + f"VARIANT = {variant}\n"
        + f"CONFIG = {config}\n"
        + "STEPS = [\n"
        + "".join(_step(i, op, notes.get(i, "")) + "\n" for i, op in enumerate(trace.ops))
        + "]\n"
        + "# What the fuzzer saw. `op` counts the model's operations, not the steps: a `run`\n"
        + "# step is one operation per server step it takes.\n"
        + f"EXPECT = [\n{expect}]\n\n\n"
        + f"def test_{ident}() -> None:\n"
        + "    result = replay(Trace(VARIANT, CONFIG, STEPS))\n"
        + "    assert not result.violations, result.violations[0].message\n"
    )
