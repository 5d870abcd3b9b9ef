"""A port of the core of the ``fixed`` design in Python, written from docs/SPEC.md: a fixture of
the conformance kit's tests.

It is what ports/cpp/ is in C++, kept small: it shows that the spec is precise enough to
implement, lets the kit be tested without a compiler, and answers the protocol on standard
input (``python tests/support/pyport.py [--break NAME]``). Buffers are real ``bytearray``s filled by a fake
context with the bytes of ``protocol.encode_state``; checkpoints are shared objects with a
holder count; nothing here imports the model.

``BREAKS`` are the seams a broken build can get (``--break NAME``): each breaks one thing the
spec requires, so that the kit can be shown to catch it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from pcspec.conform.protocol import SCHEMA, decode_state, encode_state

LOAD_F_KEEP_FLOOR = 0.25
BREAKS = ("inplace-update", "publish-before-validate", "per-holder", "forget-restored")


class BadAlloc(Exception):
    pass


# -- the fake llama context: states as bytes, fault hooks ------------------------------------------


class FakeContext:
    """``llama_state_seq_get_data_ext`` / ``set_data_ext`` over buffers, with one-shot faults."""

    def __init__(self) -> None:
        self.armed: dict[str, int] = {}

    def arm(self, sites: list[str]) -> None:
        self.armed = {}
        for s in sites:
            self.armed[s] = self.armed.get(s, 0) + 1

    def fault(self, site: str) -> bool:
        n = self.armed.get(site, 0)
        if n:
            self.armed[site] = n - 1
        return n > 0

    def alloc(self, size: int, site: str) -> bytearray:
        if self.fault(site):
            raise BadAlloc(site)
        return bytearray(size)  # (a no-init allocator in C++; zero bytes are never read here)

    def get_data(self, buf: bytearray, size: int, tag: int, site: str) -> int:
        data = encode_state(tag, size)
        if self.fault(site):
            buf[: size // 2] = data[: size // 2]
            return 0
        if size > 1 and self.fault("state.write.short"):
            buf[: size // 2] = data[: size // 2]
            return size // 2
        buf[:size] = data
        return size

    def set_data(self, buf: bytearray | None, site: str) -> int:
        if not buf:
            return 0
        if self.fault(site):
            return 0
        tag = decode_state(buf)
        return len(buf) if tag is not None and tag != 0 else 0


# -- the core's objects ----------------------------------------------------------------------------


@dataclass(eq=False)
class Part:
    role: str
    data: bytearray


@dataclass(eq=False)
class Ckpt:
    """common_prompt_checkpoint, shared immutable (``shared_ptr<const ...>``)."""

    id: int
    n_tokens: int
    id_task: int
    pos_min: int
    pos_max: int
    parts: list[Part]
    holders: int = 0

    def size(self) -> int:
        return sum(len(p.data) for p in self.parts)

    def part(self, role: str) -> Part | None:
        return next((p for p in self.parts if p.role == role), None)


@dataclass
class Slot:
    tokens: list[int] = field(default_factory=list)
    ckpts: list[Ckpt] = field(default_factory=list)
    restored: Ckpt | None = None


@dataclass(eq=False)
class Entry:
    id: int
    tokens: list[int]
    ckpts: list[Ckpt]
    parts: list[Part]

    def data_size(self) -> int:
        return sum(len(p.data) for p in self.parts)


def lcp(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# -- the core ---------------------------------------------------------------------------------------


class Core:
    def __init__(self, cfg: dict[str, Any], broken: str = "") -> None:
        self.cfg = cfg
        self.broken = broken
        self.slots = [Slot() for _ in range(cfg["n_slots"])]
        self.entries: list[Entry] = []
        self.limit = cfg["limit_size"]
        self.ctx = FakeContext()
        self.events: list[dict[str, Any]] = []
        self.next_id = 1

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def emit(self, kind: str, **data: Any) -> None:
        self.events.append({"kind": kind, **data})

    # -- holding ------------------------------------------------------------------------------

    @staticmethod
    def hold(lst: list[Ckpt], ck: Ckpt) -> None:
        ck.holders += 1
        lst.append(ck)

    @staticmethod
    def drop_all(lst: list[Ckpt]) -> None:
        for ck in lst:
            ck.holders -= 1
        lst.clear()

    def erase(self, slot: Slot, ck: Ckpt, reason: str) -> None:
        self.emit("ckpt_erase", ckpt=ck.id, reason=reason, n_tokens=ck.n_tokens)
        slot.ckpts.remove(ck)
        ck.holders -= 1

    # -- accounting ---------------------------------------------------------------------------

    def unique(self, entries: list[Entry], extra: list[Ckpt] | None = None) -> int:
        seen: dict[int, int] = {c.id: c.size() for c in extra or []}
        total = 0
        for e in entries:
            total += e.data_size()
            for c in e.ckpts:
                seen[c.id] = c.size()
        return total + sum(seen.values())

    def size(self) -> int:
        if self.broken == "per-holder":
            return sum(e.data_size() + sum(c.size() for c in e.ckpts) for e in self.entries)
        return self.unique(self.entries)

    def evict(self, e: Entry, reason: str, **numbers: int) -> None:
        self.entries.remove(e)
        self.emit("entry_evict", entry=e.id, reason=reason, n_tokens=len(e.tokens), **numbers)
        self.drop_all(e.ckpts)

    # -- operations ---------------------------------------------------------------------------

    def save(self, op: dict[str, Any]) -> None:
        ok = self._save(self.slots[op["slot"]], op["parts"])
        self.emit("save_end", ok=ok)

    def _save(self, slot: Slot, parts: list[dict[str, Any]]) -> bool:
        for e in self.entries:
            if lcp(e.tokens, slot.tokens) == len(slot.tokens):
                self.emit("save_skip_contained", entry=e.id)
                return False
        data = sum(p["size"] for p in parts)
        own = data + sum(c.size() for c in {c.id: c for c in slot.ckpts}.values())
        limit = self.limit
        if limit > 0 and own > limit:
            self.emit("save_reject_oversize", size=own, own_unique=own, limit=limit)
            return False
        bufs: list[Part] = []
        try:
            for p in parts:
                if p["size"] > 0:
                    site = "save.alloc.main" if p["role"] == "main" else "save.alloc.drft"
                    bufs.append(Part(p["role"], self.ctx.alloc(p["size"], site)))
            if self.ctx.fault("save.alloc.entry"):
                raise BadAlloc("save.alloc.entry")
        except BadAlloc as exc:
            self.emit("save_bad_alloc", site=str(exc))
            return False
        entry = Entry(self.new_id(), list(slot.tokens), [], bufs)
        for c in slot.ckpts:
            self.hold(entry.ckpts, c)
        if self.broken == "publish-before-validate":
            self._publish(entry, slot.tokens, own)
        ok = True
        for p, b in zip([p for p in parts if p["size"] > 0], bufs, strict=True):
            site = "save.read.tgt" if p["role"] == "main" else "save.read.dft"
            if self.ctx.get_data(b.data, p["size"], p["state"], site) != p["size"]:
                ok = False
        if not ok:
            self.emit("save_fill_short")
            if self.broken != "publish-before-validate":
                self.drop_all(entry.ckpts)
            return False
        if self.broken != "publish-before-validate":
            self._publish(entry, slot.tokens, own)
        return True

    def _publish(self, entry: Entry, tokens: list[int], new_size: int) -> None:
        for e in list(self.entries):
            if lcp(e.tokens, tokens) == len(e.tokens):
                self.evict(e, "obsolete")
        if self.limit > 0:
            while self.entries:
                total = self.unique(self.entries, entry.ckpts) + entry.data_size()
                if total <= self.limit:
                    break
                self.evict(self.entries[0], "make_room", unique_total=total, limit=self.limit)
        self.entries.append(entry)
        self.emit(
            "entry_insert",
            entry=entry.id,
            n_tokens=len(entry.tokens),
            own_unique=self.unique([entry]),
            unique_after=self.unique(self.entries),
            limit=self.limit,
        )

    def load(self, op: dict[str, Any]) -> None:
        slot, new = self.slots[op["slot"]], op["tokens"]
        n_new = len(new)
        base = lcp(slot.tokens, new)
        f_keep_best = base / len(slot.tokens) if slot.tokens else -1.0
        f_sim_best = base / n_new if n_new else 0.0
        best: Entry | None = None
        for e in self.entries:
            n = lcp(e.tokens, new)
            f_keep = n / len(e.tokens) if e.tokens else 0.0
            f_sim = n / n_new if n_new else 0.0
            if f_keep < LOAD_F_KEEP_FLOOR:
                continue
            if f_keep_best < f_keep and f_sim_best < f_sim:
                best, f_keep_best, f_sim_best = e, f_keep, f_sim
        self.emit("load_scan", chosen=best.id if best else None)
        if best is None:
            return
        main = next((p for p in best.parts if p.role == "main"), None)
        drft = next((p for p in best.parts if p.role == "drft"), None)
        ok = self.ctx.set_data(main.data if main else None, "load.write.tgt") == (len(main.data) if main else 0)
        if ok and drft is not None:
            ok = self.cfg["has_draft"] and self.ctx.set_data(drft.data, "load.write.dft") == len(drft.data)
        if not ok:
            self.emit("load_failed", entry=best.id)
            self.evict(best, "load_failed")
            return
        self.drop_all(slot.ckpts)
        slot.tokens, slot.ckpts = list(best.tokens), best.ckpts
        best.ckpts = []
        self.evict(best, "loaded")

    def update(self, op: dict[str, Any]) -> None:
        if self.limit > 0:
            while self.entries and self.size() > self.limit:
                self.evict(self.entries[0], "limit_bytes", unique_total=self.unique(self.entries), limit=self.limit)
        total_tokens = sum(len(e.tokens) for e in self.entries)
        if self.cfg["limit_tokens"] > 0:
            cur = self.cfg["limit_tokens"]
            if self.limit > 0:
                per_token = max(1.0, self.size() / max(1, total_tokens))
                cur = max(cur, int(self.limit / per_token))
            while self.entries and total_tokens > cur:
                total_tokens -= len(self.entries[0].tokens)
                self.evict(self.entries[0], "limit_tokens")
        self.emit("cache_state", n=len(self.entries), size=self.size(), limit=self.limit,
                  n_tokens=sum(len(e.tokens) for e in self.entries))

    def clear(self, op: dict[str, Any]) -> None:
        slot = self.slots[op["slot"]]
        slot.tokens = []
        self.drop_all(slot.ckpts)
        slot.restored = None

    def release(self, op: dict[str, Any]) -> None:
        self.slots[op["slot"]].restored = None

    def shift(self, op: dict[str, Any]) -> None:
        slot = self.slots[op["slot"]]
        for ck in list(slot.ckpts):
            self.erase(slot, ck, "context_shift")
        k, d = op["n_keep"], op["n_discard"]
        slot.tokens = slot.tokens[:k] + slot.tokens[k + d :]

    def wake(self, op: dict[str, Any]) -> None:
        for e in list(self.entries):
            self.evict(e, "wake")
        self.limit = self.cfg["limit_size"]

    def restart(self, op: dict[str, Any]) -> None:
        next_id = self.next_id  # ids stay unique within a trace
        self.__init__(op["config"], self.broken)  # type: ignore[misc]
        self.next_id = next_id

    def tokens(self, op: dict[str, Any]) -> None:
        slot = self.slots[op["slot"]]
        slot.tokens = slot.tokens[: op["keep"]] + list(op["append"])

    def install(self, op: dict[str, Any]) -> None:
        slot = self.slots[op["slot"]]
        self.drop_all(slot.ckpts)
        slot.tokens = list(op["tokens"])
        slot.restored = None
        for spec in op["ckpts"]:
            parts = []
            for p in spec["parts"]:
                buf = bytearray(p["size"])
                buf[:] = encode_state(p["state"], p["size"])
                parts.append(Part(p["role"], buf))
            ck = Ckpt(self.new_id(), spec["n_tokens"], spec["id_task"], spec["pos_min"], spec["pos_max"], parts)
            self.hold(slot.ckpts, ck)

    # -- prompt start: restore and invalidation ----------------------------------------------------

    def prompt_start(self, op: dict[str, Any]) -> None:
        """fixed's resume (policy.live_serves / checkpoint_serves): of live memory and every
        checkpoint of the shared prefix, the one that keeps the most tokens."""
        slot, prompt = self.slots[op["slot"]], op["prompt"]
        n_prefix = lcp(slot.tokens, prompt)
        n_past = n_prefix if op["cache_prompt"] else 0
        pos_next = n_past
        n_prompt = len(prompt)
        restored: Ckpt | None = None
        reprocess: str | None = None
        if 0 < n_past <= len(slot.tokens):
            kinds = [self.cfg["memory"], self.cfg["draft_memory"]]
            best_n, best = 0, None
            n_live = n_past - 1 if n_past == n_prompt else n_past
            if all(self._live_serves(lo, hi, n_live, kinds[i]) for i, (lo, hi) in enumerate(op["live"])):
                best_n = n_live
            for ck in reversed(slot.ckpts):
                if ck.n_tokens > n_prefix or ck.pos_max > pos_next:
                    continue
                n = min(min(pos_next, max(ck.pos_min + 1, ck.pos_max)), ck.n_tokens)
                n = n - 1 if n == n_prompt else n
                if n > best_n and self._ckpt_serves(ck, n):
                    best_n, best = n, ck
            if best is not None:
                ok = self._load_part(best, "tgt", "ckpt.write.tgt") and self._load_part(best, "dft", "ckpt.write.dft")
                if ok:
                    pos_next = min(pos_next, max(best.pos_min + 1, best.pos_max))
                    n_past = min(pos_next, best.n_tokens)
                    restored = best
                    self.emit("ckpt_restore", ckpt=best.id, n_tokens=best.n_tokens, n_past=n_past)
                else:
                    reprocess = "checkpoint failed to load"
                    self.erase(slot, best, "invalidated")
            elif best_n == 0:
                reprocess = "no usable checkpoint" if slot.ckpts else "no checkpoints"
            if reprocess is not None:
                pos_next = n_past = 0
        for ck in list(slot.ckpts):
            if ck.pos_max > pos_next or ck.n_tokens > n_prefix:
                self.erase(slot, ck, "invalidated")
        if restored is not None and restored not in slot.ckpts:
            restored = None
        if n_past == len(prompt):
            n_past -= 1
        slot.tokens = slot.tokens[:n_past]
        slot.restored = restored
        if not op["seq_rm_ok"]:
            self.emit("seq_rm_refused")
            slot.tokens = []
            n_past = 0
            reprocess = "seq_rm refused"
            for ck in list(slot.ckpts):
                self.erase(slot, ck, "invalidated")
            slot.restored = restored = None
        self.emit(
            "prompt_start",
            n_prefix=n_prefix,
            n_past=n_past,
            restored=restored.id if restored else None,
            reprocess=reprocess,
        )

    def _window(self, kind: str) -> tuple[int, bool]:
        """(n_swa, recurrent) of a context of this memory kind."""
        return (self.cfg["n_swa"] if kind == "swa" else 0), kind in ("recurrent", "hybrid")

    def _live_serves(self, pos_min: int, pos_max: int, n: int, kind: str) -> bool:
        """policy.live_serves."""
        n_swa, recurrent = self._window(kind)
        if n <= 0:
            return True
        if pos_min < 0 or pos_max < n - 1:
            return False
        if recurrent:
            return bool(pos_max + 1 - n <= self.cfg["n_rs"])
        return n_swa == 0 or pos_min == 0 or pos_min <= n - n_swa + 1

    def _ckpt_serves(self, ck: Ckpt, n: int) -> bool:
        """policy.checkpoint_serves for the target part and the draft part (when present)."""
        contexts = [("tgt", self.cfg["memory"])]
        if self.cfg["has_draft"]:
            contexts.append(("dft", self.cfg["draft_memory"]))
        for role, kind in contexts:
            p = ck.part(role)
            if p is None or not p.data:
                if role == "tgt":
                    return False
                continue
            n_swa, recurrent = self._window(kind)
            if n > ck.n_tokens:
                return False
            if recurrent and ck.n_tokens - n > self.cfg["n_rs"]:
                return False
            if not recurrent and n_swa > 0 and not (ck.pos_min == 0 or ck.pos_min <= n - n_swa + 1):
                return False
        return True

    def _load_part(self, ck: Ckpt, role: str, site: str) -> bool:
        p = ck.part(role)
        if p is None or not p.data or (role == "dft" and not self.cfg["has_draft"]):
            return True
        return self.ctx.set_data(p.data, site) == len(p.data)

    # -- create_checkpoint --------------------------------------------------------------------------

    def checkpoint(self, op: dict[str, Any]) -> None:
        slot, task = self.slots[op["slot"]], op["task"]
        cap, step = self.cfg["n_ctx_checkpoints"], self.cfg["checkpoint_min_step"]
        kept = slot.restored if slot.restored in slot.ckpts and self.broken != "forget-restored" else None
        last = -1
        for ck in list(slot.ckpts):
            if not len(slot.ckpts) + 1 >= cap:
                break
            owner = task if ck is kept else ck.id_task
            if owner != task and last >= 0 and ck.n_tokens <= last + step:
                self.erase(slot, ck, "too_close")
                continue
            last = ck.n_tokens
        recycled: Part | None = None
        while len(slot.ckpts) >= cap:
            victim = next((c for c in slot.ckpts if c is not kept), None)
            if victim is None:
                break
            if self.broken == "inplace-update" and recycled is None:
                recycled = victim.part("tgt")
            self.erase(slot, victim, "cap")
        n_new = len(slot.tokens) - op["n_cur"]
        if kept is not None and cap > 0 and len(slot.ckpts) >= cap:
            self.emit("ckpt_create_skipped", n_tokens=n_new, ckpt=kept.id)  # full of the restored one
            return
        if kept is not None and kept.n_tokens == n_new:
            self.emit("ckpt_kept_restored", ckpt=kept.id)
            return
        for ck in [c for c in slot.ckpts if c.n_tokens == n_new]:
            self.erase(slot, ck, "supersede")
        parts: list[Part] = []
        try:
            for p in op["parts"]:
                if p["role"] == "spec":
                    buf = self.ctx.alloc(p["size"], "ckpt.alloc")
                    buf[:] = encode_state(p["state"], p["size"])
                else:
                    if recycled is not None and p["role"] == "tgt" and len(recycled.data) == p["size"]:
                        buf = recycled.data  # broken: overwrite a payload others may hold
                    else:
                        buf = self.ctx.alloc(p["size"], "ckpt.alloc")
                    site = "ckpt.read.tgt" if p["role"] == "tgt" else "ckpt.read.dft"
                    if self.ctx.get_data(buf, p["size"], p["state"], site) != p["size"]:
                        raise BadAlloc("short")
                parts.append(Part(p["role"], buf))
        except BadAlloc:
            self.emit("ckpt_create_failed")
            return
        ck = Ckpt(self.new_id(), n_new, task, op["pos_min"], op["pos_max"], parts)
        self.hold(slot.ckpts, ck)
        self.emit("ckpt_create", ckpt=ck.id, n_tokens=n_new, pos_min=ck.pos_min, pos_max=ck.pos_max)

    # -- the observation ------------------------------------------------------------------------------

    def observe(self) -> dict[str, Any]:
        seen: dict[int, Ckpt] = {}
        for s in self.slots:
            for c in s.ckpts:
                seen.setdefault(c.id, c)
        for e in self.entries:
            for c in e.ckpts:
                seen.setdefault(c.id, c)

        def part(p: Part) -> dict[str, Any]:
            return {"role": p.role, "size": len(p.data), "state": decode_state(p.data)}

        events, self.events = self.events, []
        return {
            "events": events,
            "slots": [
                {
                    "tokens": list(s.tokens),
                    "ckpts": [c.id for c in s.ckpts],
                    "restored": s.restored.id if s.restored is not None and s.restored in s.ckpts else None,
                }
                for s in self.slots
            ],
            "ckpts": [
                {
                    "id": c.id, "n_tokens": c.n_tokens, "pos_min": c.pos_min, "pos_max": c.pos_max,
                    "id_task": c.id_task, "refs": c.holders, "parts": [part(p) for p in c.parts],
                }
                for c in seen.values()
            ],
            "entries": [
                {
                    "id": e.id,
                    "tokens": list(e.tokens),
                    "ckpts": [c.id for c in e.ckpts],
                    "parts": [part(p) for p in e.parts],
                }
                for e in self.entries
            ],
            "accounted": self.size(),
            "unique": self.unique(self.entries),
            "limit": self.limit,
        }

    def apply(self, op: dict[str, Any]) -> dict[str, Any]:
        self.ctx.arm(op.get("faults", []))
        getattr(self, op["op"])(op)
        self.ctx.arm([])
        return self.observe()


def serve(lines: Any, out: Any, broken: str = "") -> None:
    """Answer the protocol: one JSON line per line read."""
    core: Core | None = None
    for line in lines:
        if not line.strip():
            continue
        op = json.loads(line)
        if op.get("op") == "begin":
            core = Core(op["config"], broken)
            name = "tests/support/pyport.py" + (f" ({broken})" if broken else "")
            answer: dict[str, Any] = {"schema": SCHEMA, "port": name}
        elif core is None:
            answer = {"error": "no begin line"}
        else:
            try:
                answer = core.apply(op)
            except Exception as exc:  # a bug of this port: say so on the line
                answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    broken = ""
    if args[:1] == ["--break"] and len(args) > 1 and args[1] in BREAKS:
        broken = args[1]
    serve(sys.stdin, sys.stdout, broken)
    return 0


if __name__ == "__main__":
    sys.exit(main())
