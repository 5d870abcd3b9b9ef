"""Write a finding as files anyone can act on.

A finding directory holds:

* ``report.md``      what was found, where, the server's log lines around it;
* ``workload.jsonl`` the (shrunk) live workload: a header (model kind, flags, seed), then one
                     live operation per line; ``pcspec live --replay`` runs it again;
* ``requests.sh``    the exact HTTP requests of the shrunk run as ``curl`` lines, after the
                     server command line, to repeat it by hand against any build;
* ``trace.jsonl``    the same operations as a pcspec trace of the model (``pcspec replay``);
* ``server.log``     the whole log of the shrunk run; ``excerpt.log`` the lines of the
                     operation where the finding shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pcspec.core.results import Finding
from pcspec.live.analyze import to_json
from pcspec.live.ops import LiveOp
from pcspec.live.process import Flags
from pcspec.live.session import Outcome

SCHEMA = 1
KIND = "pcspec-live-workload"


def workload_lines(kind: str, flags: Flags, seed: int | None, ops: list[LiveOp]) -> str:
    head: dict[str, Any] = {"schema": SCHEMA, "kind": KIND, "model": kind, "flags": flags.to_json()}
    if seed is not None:
        head["seed"] = seed
    lines = [json.dumps(head, sort_keys=True)] + [json.dumps(op.to_json(), sort_keys=True) for op in ops]
    return "\n".join(lines) + "\n"


# A workload file read: the model kind, the server's flags, the seed (None: written by hand), the operations.
Workload = tuple[str, Flags, int | None, list[LiveOp]]


def read_workload(path: Path) -> Workload:
    from pcspec.core.errors import PcspecError

    try:
        lines = [(i, ln) for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if ln.strip()]
        head = json.loads(lines[0][1])
    except (OSError, ValueError, IndexError) as exc:
        raise PcspecError(f"cannot read a live workload: {exc}", str(path)) from None
    if not isinstance(head, dict) or head.get("kind") != KIND:
        raise PcspecError(f"not a live workload (first line must have kind {KIND!r})", str(path))
    try:
        flags = Flags.from_json(head["flags"])
        model = str(head["model"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PcspecError(f"the workload's first line has no usable flags or model ({exc!r})",
                          f"{path}: line {lines[0][0]}") from None
    ops: list[LiveOp] = []
    for number, line in lines[1:]:
        try:
            ops.append(LiveOp.from_json(json.loads(line)))
        except ValueError as exc:  # (json.JSONDecodeError)
            raise PcspecError(f"not JSON: {exc}", f"{path}: line {number}") from None
        except PcspecError as exc:
            raise PcspecError(exc.why, f"{path}: line {number}") from None
    return model, flags, head.get("seed"), ops


def curl_script(out: Outcome) -> str:
    t = out.target
    lines = [
        "#!/bin/sh",
        "# The exact HTTP requests of this run, in order. Start the server first:",
        f"#   llama-server -m {t.model.name} -t 1 --host 127.0.0.1 --port 8080 -v --seed 42 "
        f"--slot-save-path ./slots/ --no-webui {' '.join(t.flags.argv())}",
        f"# (the model: pcspec models {t.kind} {t.model.name})",
        "set -e",
        "B=http://127.0.0.1:8080",
    ]
    for obs in out.run.observations:
        op = obs.op
        if op.op == "wait":
            lines.append("wait")
        elif op.op == "corrupt_file":
            if op.truncate is not None:
                lines.append(f"truncate -s {op.truncate} ./slots/{op.filename}")
            else:
                data = "".join(f"\\{b:03o}" for b in op.data)
                dd = f"dd of=./slots/{op.filename} bs=1 seek={op.offset} conv=notrunc 2>/dev/null"
                lines.append(f"printf '{data}' | {dd}")
        elif obs.reply is not None or op.op == "request":
            if obs.reply is None:
                continue
            if op.delay_ms:
                lines.append(f"sleep {op.delay_ms / 1000:g}")
            cmd = obs.reply.curl("$B")
            lines.append(f"{cmd} > reply-{obs.index}.json" + (" &" if op.is_async else ""))
    return "\n".join(lines) + "\n"


def excerpt(out: Outcome, op_index: int, margin: int = 0) -> str:
    obs = [o for o in out.run.observations if abs(o.index - op_index) <= margin]
    if not obs:
        return ""
    lo = min(o.log_start for o in obs)
    hi = max(o.log_end for o in obs)
    return out.log[lo:hi].decode("utf-8", "replace")


def write_finding(directory: Path, finding: Finding, out: Outcome, *, seed: int | None,
                  original_ops: int, attempts: int, model_trace: str | None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    t = out.target
    (directory / "workload.jsonl").write_text(workload_lines(t.kind, t.flags, seed, out.ops), encoding="utf-8")
    (directory / "requests.sh").write_text(curl_script(out), encoding="utf-8")
    (directory / "server.log").write_bytes(out.log)
    ex = excerpt(out, finding.op)
    (directory / "excerpt.log").write_text(ex, encoding="utf-8")
    if model_trace is not None:
        (directory / "trace.jsonl").write_text(model_trace, encoding="utf-8")
    replies = [o.reply.to_json() for o in out.run.observations if o.reply is not None]
    (directory / "replies.json").write_text(json.dumps(replies, indent=1), encoding="utf-8")
    md = [
        f"# {finding.rule} ({t.kind} model)",
        "",
        f"{finding.message}",
        "",
        f"- operation {finding.op} of {len(out.ops)} (shrunk from {original_ops} in {attempts} runs)",
        f"- server flags: `{' '.join(t.flags.argv())}`",
        f"- all findings of the shrunk run: {', '.join(sorted({f.rule for f in out.analysis.findings}))}",
        "",
        "## The workload",
        "",
        "```",
        *[json.dumps(op.to_json()) for op in out.ops],
        "```",
        "",
        "## The server's log at that operation",
        "",
        "```",
        *_interesting(ex),
        "```",
    ]
    (directory / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    (directory / "finding.json").write_text(json.dumps({**to_json(finding), "model": t.kind,
                                                        "flags": t.flags.to_json(), "seed": seed,
                                                        "ops": len(out.ops), "original_ops": original_ops,
                                                        "attempts": attempts}, indent=1), encoding="utf-8")
    return directory


_KEEP = ("slot ", "srv ", "state_read_meta", "que ")
_DROP = ("update slots", "processing new tasks", "waiting for new tasks", "posting NEXT_RESPONSE",
         "log_server_r", "all slots are idle", "n_gen =", "prompt processing, n_tokens")


def _interesting(text: str, limit: int = 120) -> list[str]:
    out = [ln for ln in text.splitlines() if any(k in ln for k in _KEEP) and not any(d in ln for d in _DROP)]
    return out[:limit] + ([f"... ({len(out) - limit} more lines in excerpt.log)"] if len(out) > limit else [])
