"""``POST /v1/systemone`` on a tiny decision model: the one producer of child tasks with a
prompt of their own (``n_tokens_shared``), in b11434 and b11549 (0c1e570 has neither).

b11549 answers a decision request with one task per question (per variant: ``lev`` shows a
choice in two orders, the other types once; ``n_variants``,
tools/server/server-decision.cpp:435-441 of b11549), and, for the types whose prompts can share
a prefix (``can_share_prompt``, server-decision.h:38-51), groups the tasks by ``-np``: the
first of a group is the parent, the others its children, and the parent's ``n_tokens_shared``
is the common prefix of the group's prompts, at most each prompt's length - 1
(``server_decision_group_tasks``, server-decision.cpp:1139-1169; called at
server-context.cpp:5792-5794). The parent stops at ``n_tokens_shared``, copies its sequence to
each waiting child (``copy_prompt_to``, server-context.cpp:761-766: ``seq_rm`` then ``seq_cp``)
and goes on with its own tokens; a child starts from the copy (``n_past`` capped at
``n_tokens_shared``, 3593-3596) with its own (server-context.cpp:3833-3849). A child's prompt
is cleared when it is released (``release``, 592-595). This module sends such a request to a
server started with ``-np 2`` on a decision model (``models.py``: ``lfm2-d1``, b11549 only, or
``openjev``) and reads the lines of that path from the log. The C++ lines cited are b11549's;
b11434 has the same path (server_decision_group_tasks, server-decision.cpp:810-840 of b11434)
and prints the same lines.

    pcspec decision                  # the cached b11549 build, model kv, lfm2-d1
    pcspec decision --tree b11434    # openjev (b11434 has no lfm2-d1)
    pcspec decision --kind swa --type openjev --server PATH --keep DIR

prints the log lines of the path, and exits 1 when a request failed or a line is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from pcspec.core.errors import PcspecError
from pcspec.live import build
from pcspec.live.client import Client, Reply
from pcspec.live.models import DECISION_TYPES, KINDS, ensure_model
from pcspec.live.process import Flags, ServerDied, ServerProcess
from pcspec.logcheck import events as ev
from pcspec.logcheck import read_events

TREE = "b11549"
DECISION_TYPE = "lfm2-d1"
TREE_TYPES = {"b11434": "openjev", "b11549": "lfm2-d1"}  # the default type of each tree
FLAGS = Flags(n_slots=2, n_ctx=2048, n_batch=64, n_ubatch=64)
# A string state (the template writes it as it is), single spaces only: with the byte vocabulary
# of models.py (one merge, two spaces) a prompt is then one token per byte after the control
# token <|im_start|>, and the shared prefix can be counted from the text (expected_shared).
STATE = "the quick brown fox jumps over the lazy dog " * 3
QUESTIONS: dict[str, Any] = {
    # lfm2-d1: single-letter keys are their own labels, one byte token each (d1_labels,
    # server-decision.cpp:451-545); a score's labels are its digits. A noul question needs
    # "yes"/"no" as single tokens there (server-decision.cpp:466-475): not in this vocabulary
    # (openjev reads a noul at A and B and would take one).
    "colour": {"type": "choice", "instructions": "Which colour?", "criteria": {"A": "red", "B": "blue"}},
    "size": {"type": "score", "instructions": "How big?", "criteria": ["small", "medium", "large"]},
}

# the lines of the path (-v: TRACE and DEBUG), as the log checker's events (the C++ that prints
# them, b11549, is on each class): the parent launched with its children, a child task (a task
# launch with is_child), a child waiting for its parent, the prefix copied to a child, each
# prompt's cached tokens, a copy across KV streams, a prompt cleared, a decision answered
PATH: tuple[type[ev.Event], ...] = (ev.ParentLaunched, ev.TaskLaunched, ev.WaitingForParent, ev.SharedPromptCopied,
                                    ev.CachedTokens, ev.KvStreamCopied, ev.PromptCleared, ev.DecisionSent)
E = TypeVar("E", bound=ev.Event)


def _on_path(e: ev.Event) -> bool:
    return isinstance(e, PATH) and not (isinstance(e, ev.TaskLaunched) and not e.is_child)


def systemone_body(state: str = STATE, questions: dict[str, Any] | None = None) -> dict[str, Any]:
    """The body of ``POST /v1/systemone``: a state and an object of questions, each with a
    ``type`` (choice, score, noul), ``instructions`` and ``criteria`` (``parse_questions``,
    server-decision.cpp:147-226)."""
    return {"state": state, "questions": dict(QUESTIONS if questions is None else questions)}


def expected_shared(body: dict[str, Any]) -> int:
    """The ``n_tokens_shared`` the server computes for the first two questions of ``body`` on the
    template of models.py (``<|im_start|>`` state, newline, instructions, ...): the control token,
    the state's bytes, the newline, the instructions' common first bytes."""
    state = body["state"]
    if not isinstance(state, str) or "  " in state:
        raise ValueError("the count holds for a string state with single spaces only")
    a, b = (q["instructions"] for q in list(body["questions"].values())[:2])
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n] and a[n:n + 2] != "  ":
        n += 1
    return 1 + len(state.encode()) + 1 + len(a[:n].encode())


def systemone(client: Client, body: dict[str, Any] | None = None, timeout: float | None = None) -> Reply:
    """Send one decision request (two questions by default: two tasks, one parent and one child
    on ``-np 2``)."""
    return client.call("POST", "/v1/systemone", systemone_body() if body is None else body, timeout)


@dataclass
class DecisionRun:
    binary: Path
    kind: str
    decision: str
    log: str
    replies: list[Reply] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.replies) and all(r.ok and isinstance(r.data.get("answers"), dict) for r in self.replies)

    @cached_property
    def events(self) -> list[ev.Event]:
        return read_events(self.log)

    def of(self, kind: type[E]) -> list[E]:
        """The log's events of ``kind``, in order."""
        return [e for e in self.events if isinstance(e, kind)]

    def children(self) -> list[ev.TaskLaunched]:
        return [e for e in self.of(ev.TaskLaunched) if e.is_child]

    def records(self) -> list[str]:
        """The lines of the path, without their time stamps."""
        lines = self.log.split("\n")
        path = dict.fromkeys(e.line for e in self.events if _on_path(e))
        return [lines[n - 1].split(" ", 1)[-1].strip() for n in path]

    def missing(self) -> list[str]:
        seen = {"parent launched with children": self.of(ev.ParentLaunched), "child task": self.children(),
                "shared prompt copied": self.of(ev.SharedPromptCopied), "decision result": self.of(ev.DecisionSent)}
        return [what for what, events in seen.items() if not events]

    def summary(self) -> str:
        out = [f"{self.binary} (model {self.kind}, {self.decision})"]
        out += [f"  {r.method} {r.path}: {r.status} {r.error}".rstrip() for r in self.replies]
        out += [f"    {line[:200]}" for line in self.records()]
        return "\n".join(out)


def run(binary: Path, kind: str, workdir: Path, *, decision: str = DECISION_TYPE, requests: int = 1,
        flags: Flags = FLAGS, body: dict[str, Any] | None = None, timeout: float = 60.0) -> DecisionRun:
    """Start a server on the decision model of ``kind`` and type ``decision`` in ``workdir``,
    send the decision request ``requests`` times; the server is stopped on return."""
    model = ensure_model(kind, workdir / "models", decision=decision)
    replies: list[Reply] = []
    server = ServerProcess(binary, model, flags, workdir, name=f"decision-{kind}")
    try:
        with server:
            client = Client(server.url, timeout=timeout)
            for _ in range(requests):
                replies.append(systemone(client, body))
    except ServerDied as exc:
        return DecisionRun(binary, kind, decision, server.log_bytes().decode("utf-8", "replace") + f"\n{exc}", replies)
    return DecisionRun(binary, kind, decision, server.log_bytes().decode("utf-8", "replace"), replies)


def probabilities(reply: Reply) -> dict[str, dict[str, float]]:
    """Per question, the probability of each option (a choice or a score)."""
    out: dict[str, dict[str, float]] = {}
    answers = reply.data.get("answers")
    for qid, ans in (answers.items() if isinstance(answers, dict) else ()):
        probs = ans.get("probabilities") if isinstance(ans, dict) else None
        if isinstance(probs, dict):
            out[qid] = {k: float(v) for k, v in probs.items()}
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``pcspec decision`` (and of ``python -m pcspec.live.decision``)."""
    p.add_argument("--server", type=Path, help="a llama-server binary (default: the cached build of --tree)")
    p.add_argument("--tree", choices=list(TREE_TYPES), default=TREE)
    p.add_argument("--kind", choices=KINDS, default="kv")
    p.add_argument("--type", choices=DECISION_TYPES, help="the decision type (default: the tree's)")
    p.add_argument("--requests", type=int, default=1)
    p.add_argument("--keep", type=Path, help="run in this folder and keep the log there")


def command(args: argparse.Namespace) -> int:
    """Run the decision endpoint on the server ``args`` name; bad input raises ``PcspecError``."""
    binary = args.server if args.server is not None else build.find_server(args.tree)
    if binary is None or not binary.is_file() or not os.access(binary, os.X_OK):
        raise PcspecError(f"no server: pcspec build --tree {args.tree}")
    decision = args.type or TREE_TYPES[args.tree]
    if args.keep is not None:
        res = run(binary, args.kind, args.keep, decision=decision, requests=args.requests)
    else:
        with tempfile.TemporaryDirectory(prefix="pcspec-decision-") as tmp:
            res = run(binary, args.kind, Path(tmp), decision=decision, requests=args.requests)
    print(res.summary())
    return 0 if res.ok and not res.missing() else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m pcspec.live.decision``: ``pcspec decision`` outside the command line."""
    p = argparse.ArgumentParser(prog="python -m pcspec.live.decision", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    try:
        return command(p.parse_args(argv))
    except PcspecError as exc:
        print(f"pcspec live decision: {exc}", file=sys.stderr)
        return 2



if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
