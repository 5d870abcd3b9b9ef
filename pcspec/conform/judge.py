"""The properties restated over observations: what a port's answers violate.

The model judges its own state (``pcspec.properties``); a port shows only its observations, so
the kit judges those, over the protocol's variables (docs/SPEC.md, "Properties"). This names
the property a divergent port breaks. Each check is one function ``(ctx) -> [message]`` over
the canonical observation before and after one operation; ``Judge`` keeps the history
variables (what each checkpoint and entry held when first seen, each slot's task prompt).

Properties about what a port does not report (the memory of a context: STATE-1; slot files:
FILE-1, FILE-2; scheduling: PROGRESS-1; bytes loaded into a context: UNINIT-2, which valgrind
sees in a native port) are not judged here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pcspec.conform.tags import Tags

Obs = dict[str, Any]

ALLOWED_ERASURES = ("invalidated", "cap", "too_close", "supersede", "context_shift")


@dataclass
class Finding:
    property: str
    op: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"property": self.property, "op": self.op, "message": self.message}


@dataclass
class Step:
    """One operation as the checks see it."""

    index: int
    op: dict[str, Any]
    before: Obs
    after: Obs
    config: dict[str, Any]
    tags: Tags | None
    judge: Judge

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.after["events"] if e["kind"] == kind]

    def ckpts(self, obs: Obs | None = None) -> dict[int, dict[str, Any]]:
        return {c["id"]: c for c in (obs or self.after)["ckpts"]}


def _fp(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


def _size(parts: list[dict[str, Any]]) -> int:
    return sum(p["size"] for p in parts)


def unique_bytes(obs: Obs) -> int:
    """The distinct buffers reachable from entries, each once: entry data plus the distinct
    checkpoints their lists hold."""
    ckpts = {c["id"]: c for c in obs["ckpts"]}
    held = {cid for e in obs["entries"] for cid in e["ckpts"]}
    return sum(_size(e["parts"]) for e in obs["entries"]) + sum(_size(ckpts[c]["parts"]) for c in held if c in ckpts)


def describes(tags: Tags | None, part: dict[str, Any] | None, tokens: list[int], n: int) -> bool | None:
    """Whether a checkpoint's target payload is the state of ``tokens[:n]`` (None: unknown)."""
    if part is None or part["state"] is None:
        return False
    if tags is None:
        return None
    prefix = tags.prefix.get(part["state"])
    return prefix is not None and n <= len(tokens) and list(prefix) == list(tokens[:n])


def _tgt(c: dict[str, Any]) -> dict[str, Any] | None:
    return next((p for p in c["parts"] if p["role"] == "tgt"), None)


# -- the checks ---------------------------------------------------------------------------------------


def imm1(s: Step) -> list[str]:
    out = []
    for c in s.after["ckpts"]:
        fp = _fp({k: v for k, v in c.items() if k not in ("refs", "id")})
        was = s.judge.published.setdefault(c["id"], fp)
        if was != fp:
            out.append(f"checkpoint #{c['id']} changed after publication: was {was}, now {fp}")
    return out


def imm2(s: Step) -> list[str]:
    out = []
    for e in s.after["entries"]:
        fp = _fp({k: v for k, v in e.items() if k != "id"})
        was = s.judge.sealed.setdefault(e["id"], fp)
        if was != fp:
            out.append(f"cache entry #{e['id']} changed while in the cache: was {was}, now {fp}")
    return out


def rb1(s: Step) -> list[str]:
    return [
        f"cache entry #{e['id']} ({len(e['tokens'])} tokens) holds a {p['role']} buffer that is not a complete state"
        for e in s.after["entries"]
        for p in e["parts"]
        if p["state"] is None
    ]


def rb2(s: Step) -> list[str]:
    if s.op["op"] != "save" or any(e["ok"] for e in s.events("save_end")):
        return []
    if _fp(s.before["entries"]) == _fp(s.after["entries"]) and s.before["limit"] == s.after["limit"]:
        return []
    ids = ([e["id"] for e in s.before["entries"]], [e["id"] for e in s.after["entries"]])
    limits = f"limit {s.before['limit']} -> {s.after['limit']}"
    return [f"a failed save changed the cache: entries {ids[0]} -> {ids[1]}, {limits}"]


def acc1(s: Step) -> list[str]:
    acc, u = s.after["accounted"], unique_bytes(s.after)
    if acc != u:
        return [f"the cache accounts {acc} bytes but holds {u} unique bytes"]
    if acc != s.after["unique"]:  # (shared payloads of distinct checkpoint objects: only the port can count them)
        return [f"the cache accounts {acc} bytes but reports {s.after['unique']} unique bytes"]
    return []


def acc2(s: Step) -> list[str]:
    out = [
        f"an entry of {e['own_unique']} unique bytes was rejected as oversize though the limit is {e['limit']}"
        for e in s.events("save_reject_oversize")
        if e["own_unique"] <= e["limit"]
    ]
    out += [
        f"entry #{e['entry']} of {e['own_unique']} unique bytes admitted over the limit {e['limit']}"
        for e in s.events("entry_insert")
        if 0 < e["limit"] < e["own_unique"]
    ]
    if s.events("save_reject_oversize") and s.events("entry_evict"):
        out.append("a rejected save evicted entries")
    return out


def acc3(s: Step) -> list[str]:
    return [
        f"entry #{e['entry']} evicted ({e['reason']}) though unique bytes {e['unique_total']} "
        f"were within the limit {e['limit']}"
        for e in s.events("entry_evict")
        if e["reason"] in ("make_room", "limit_bytes") and e.get("unique_total", 0) <= e.get("limit", 0)
    ]


def limit1(s: Step) -> list[str]:
    limit, cfg = s.after["limit"], s.config
    out = [
        f"entry #{e['entry']} published with {e['unique_after']} unique bytes over the limit {limit}"
        for e in s.events("entry_insert")
        if 0 < limit < e["unique_after"]
    ]
    u = unique_bytes(s.after)
    if 0 < limit < u:
        out.append(f"the cache holds {u} unique bytes over the limit {limit}")
    if s.op["op"] != "update":  # the token limit is update's to keep (a save is always followed by one)
        return out
    n_tokens = sum(len(e["tokens"]) for e in s.after["entries"])
    est = cfg["limit_tokens"]
    if limit > 0:
        per_token = max(1.0, s.after["accounted"] / max(1, n_tokens))
        est = max(est, int(limit / per_token))
    if cfg["limit_tokens"] > 0 and n_tokens > est:
        out.append(f"the cache holds {n_tokens} tokens over the token limit {est}")
    return out


def live1(s: Step) -> list[str]:
    want = s.config["limit_size"]
    return [] if s.after["limit"] == want else [f"the byte limit is {s.after['limit']}, not {want}"]


def ref1(s: Step) -> list[str]:
    holders: dict[int, int] = {}
    for h in [*s.after["slots"], *s.after["entries"]]:
        for c in h["ckpts"]:
            holders[c] = holders.get(c, 0) + 1
    ckpts = s.ckpts()
    out = [f"checkpoint #{c} is held but not reported" for c in holders if c not in ckpts]
    out += [
        f"checkpoint #{cid} has refcount {c['refs']} but {holders.get(cid, 0)} holders"
        for cid, c in ckpts.items()
        if c["refs"] != holders.get(cid, 0)
    ]
    return out


def ckpt1(s: Step) -> list[str]:
    out = []
    cap, ckpts = s.config["n_ctx_checkpoints"], s.ckpts()
    for i, slot in enumerate(s.after["slots"]):
        cs = [ckpts[c] for c in slot["ckpts"] if c in ckpts]
        if len(cs) > cap:
            out.append(f"slot {i} holds {len(cs)} checkpoints, over the cap {cap}")
        n = [c["n_tokens"] for c in cs]
        if len(set(n)) != len(n):
            out.append(f"slot {i} holds several checkpoints at one n_tokens ({n})")
        for c in cs:
            if not c["pos_min"] <= c["pos_max"] == c["n_tokens"] - 1:
                out.append(f"slot {i}: checkpoint #{c['id']} breaks pos_min <= pos_max = n_tokens - 1")
    return out


def ckpt2(s: Step) -> list[str]:
    out, ckpts = [], s.ckpts()
    holders = [(f"slot {i}", h, s.judge.prompts.get(i)) for i, h in enumerate(s.after["slots"])]
    holders += [(f"entry #{e['id']}", e, None) for e in s.after["entries"]]
    for name, h, prompt in holders:
        for cid in h["ckpts"]:
            c = ckpts.get(cid)
            if c is None:
                continue
            ok = describes(s.tags, _tgt(c), h["tokens"], c["n_tokens"])
            if ok is False and prompt is not None:
                ok = describes(s.tags, _tgt(c), prompt, c["n_tokens"])
            if ok is False:
                out.append(
                    f"{name} holds checkpoint #{cid} (n_tokens {c['n_tokens']}) that is not the state of a "
                    "prefix of its tokens"
                )
    return out


def restore1(s: Step) -> list[str]:
    if s.op["op"] != "prompt_start":
        return []
    out, ckpts = [], s.ckpts()
    for e in s.events("prompt_start"):
        r = e["restored"]
        if r is not None and r in ckpts and ckpts[r]["pos_max"] > e["n_prefix"]:
            out.append(f"restored checkpoint #{r} beyond pos_next {e['n_prefix']}")
    for cid in s.after["slots"][s.op["slot"]]["ckpts"]:
        c = ckpts.get(cid)
        if c is not None and describes(s.tags, _tgt(c), s.op["prompt"], c["n_tokens"]) is False:
            out.append(f"kept checkpoint #{cid} (n_tokens {c['n_tokens']}) is not a prefix of the new prompt")
    return out


def perf1(s: Step) -> list[str]:
    out = [f"a {e['role']} payload of {e['bytes']} bytes was deep-copied" for e in s.events("copy_payload")]
    if s.op["op"] == "save":
        slot = s.after["slots"][s.op["slot"]]
        for ins in s.events("entry_insert"):
            e = next((x for x in s.after["entries"] if x["id"] == ins["entry"]), None)
            if e is not None and e["ckpts"] != slot["ckpts"]:
                out.append(f"the saved entry holds checkpoints {e['ckpts']}, not the slot's own {slot['ckpts']}")
    return out


def perf2(s: Step) -> list[str]:
    op, out = s.op, []
    if op["op"] == "prompt_start":
        restored = {e["ckpt"] for e in s.events("ckpt_restore")}
    elif op["op"] == "checkpoint":
        r = s.before["slots"][op["slot"]]["restored"]
        restored = {r} if r is not None else set()
        before = s.ckpts(s.before)
        for e in s.events("ckpt_create"):
            old = before.get(r) if r is not None else None
            if old is not None and old["n_tokens"] == e["n_tokens"]:
                new = s.ckpts().get(e["ckpt"])
                if new is not None and _tgt(new) == _tgt(old):
                    what = f"byte-identical (n_tokens {e['n_tokens']})"
                    out.append(f"the task re-created the checkpoint it restored, {what}")
    else:
        return []
    out += [f"the task erased the checkpoint it restored (#{e['ckpt']}, {e['reason']})"
            for e in s.events("ckpt_erase") if e["ckpt"] in restored]
    return out


def ckpt4(s: Step) -> list[str]:
    out, cap = [], s.config["n_ctx_checkpoints"]
    erasures = s.events("ckpt_erase")
    if not erasures:
        return []
    for e in erasures:
        if e["reason"] not in ALLOWED_ERASURES:
            out.append(f"checkpoint #{e['ckpt']} erased as {e['reason']}: not an allowed reason")
    if s.op["op"] == "checkpoint":
        pre = len(s.before["slots"][s.op["slot"]]["ckpts"])
        sweep = [e for e in erasures if e["reason"] == "too_close"]
        # The k-th sweep erasure (k from 0) happens with pre - k in the list, which must be full.
        if sweep and pre - (len(sweep) - 1) + 1 < cap:
            out.append(f"{len(sweep)} checkpoint(s) swept as too close from a list of {pre} (cap {cap}): the "
                       "last of them while the list was not full")
        n_cap = sum(1 for e in erasures if e["reason"] == "cap")
        if n_cap > max(0, pre - len(sweep) - cap + 1):
            out.append(f"{n_cap} checkpoint(s) erased for the cap with {pre - len(sweep)} of {cap} in the list")
    if s.op["op"] == "prompt_start" and not s.events("seq_rm_refused"):
        out += _invalidations(s, erasures)
    return out


def _invalidations(s: Step, erasures: list[dict[str, Any]]) -> list[str]:
    start = next(iter(s.events("prompt_start")), None)
    if start is None:
        return []
    before = s.ckpts(s.before)
    pos_next = start["n_prefix"] if s.op["cache_prompt"] else 0
    restored = next(iter(s.events("ckpt_restore")), None)
    if restored is not None and restored["ckpt"] in before:
        r = before[restored["ckpt"]]
        pos_next = min(pos_next, max(r["pos_min"] + 1, r["pos_max"]))
    elif start["reprocess"] is not None:
        pos_next = 0
    out = []
    for e in erasures:
        c = before.get(e["ckpt"])
        if e["reason"] != "invalidated" or c is None or start["reprocess"] == "checkpoint failed to load":
            continue
        if not (c["pos_max"] > pos_next or c["n_tokens"] > start["n_prefix"]):
            out.append(f"checkpoint #{e['ckpt']} invalidated though it describes the prompt (pos_max {c['pos_max']} "
                       f"<= pos_next {pos_next}, n_tokens {c['n_tokens']} <= n_prefix {start['n_prefix']})")
    return out


def perf3(s: Step) -> list[str]:
    if s.op["op"] != "prompt_start" or s.config.get("memory") not in ("recurrent", "hybrid"):
        return []
    n_slot = len(s.before["slots"][s.op["slot"]]["tokens"])
    out = []
    for e in s.events("prompt_start"):
        if 0 < e["n_prefix"] == n_slot < len(s.op["prompt"]) and (
            e["restored"] is not None or e["reprocess"] is not None or e["n_past"] != e["n_prefix"]
        ):
            out.append(f"a prompt strictly extending the slot's {n_slot} live tokens did not resume from them")
    return out


CHECKS: dict[str, Callable[[Step], list[str]]] = {
    "IMM-1": imm1,
    "IMM-2": imm2,
    "RB-1": rb1,
    "RB-2": rb2,
    "ACC-1": acc1,
    "ACC-2": acc2,
    "ACC-3": acc3,
    "LIMIT-1": limit1,
    "REF-1": ref1,
    "CKPT-1": ckpt1,
    "CKPT-2": ckpt2,
    "RESTORE-1": restore1,
    "LIVE-1": live1,
    "PERF-1": perf1,
    "CKPT-4": ckpt4,
    "PERF-3": perf3,
    "PERF-2": perf2,
}


def initial(config: dict[str, Any]) -> Obs:
    """The observation of a server that just started: empty slots, an empty cache."""
    return {
        "events": [],
        "slots": [{"tokens": [], "ckpts": [], "restored": None} for _ in range(config["n_slots"])],
        "ckpts": [],
        "entries": [],
        "accounted": 0,
        "unique": 0,
        "limit": config["limit_size"] if config["cache"] else 0,
    }


@dataclass
class Judge:
    """Judges the canonical observations of one trace in order."""

    config: dict[str, Any]
    tags: Tags | None = None
    published: dict[int, str] = field(default_factory=dict)
    sealed: dict[int, str] = field(default_factory=dict)
    prompts: dict[int, list[int]] = field(default_factory=dict)  # slot -> the prompt it processes
    before: Obs | None = None

    def __call__(self, index: int, op: dict[str, Any], obs: Obs) -> list[Finding]:
        if op["op"] == "restart":
            self.config = op["config"]
            self.prompts.clear()
            self.before = None
        before = self.before or initial(self.config)
        self.before = obs
        if op["op"] == "prompt_start":
            self.prompts[op["slot"]] = list(op["prompt"])
        step = Step(index, op, before, obs, self.config, self.tags, self)
        out = [Finding(pid, index, msg) for pid, check in CHECKS.items() for msg in check(step)]
        if op["op"] in ("release", "install") and "slot" in op:
            self.prompts.pop(op["slot"], None)
        return out
