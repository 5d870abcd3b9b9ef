"""The workloads of ``pcspec bench``: named, parameterised request sequences shaped like the
measurements that argued for the designs (docs/BENCH.md).

A workload is a list of conversations, each a growing prompt: its first turn has
``first_tokens`` user tokens, every later turn appends ``reply_tokens`` assistant tokens and
``turn_tokens`` user tokens to the previous prompt. The tokens are drawn from ``seed`` (ids
128..255, which generation never produces: ``pcspec.live.client.BANNED``), and the assistant
tokens are part of the workload rather than the server's reply, so every design and the model
see exactly the same prompts whatever each generates. ``order`` says how the turns of the
conversations interleave:

=============  ===============================================================================
shape          requests
=============  ===============================================================================
``grown``      one conversation on one slot; ``-sps 0`` sends every request through the slot
               selection's LRU branch, whose prompt cache update saves the slot's prompt and
               its checkpoints and loads it back (server-context.cpp:1615-1636 of 0c1e570)
``alternating``  two conversations taking turns on one slot: each request finds the other's
               prompt in the slot (its common prefix is below ``-sps``), so every request
               saves and reloads
``idle-slots``  two conversations pinned to two slots, taking turns, with
               ``--cache-idle-slots``: each launch saves the other, idle, slot to the cache
               (server-context.cpp:2417-2430)
=============  ===============================================================================

Sizes are checked before anything runs (``Workload.validate``): a live run must fit the
machine (``LIVE_LIMITS``), a model-only run the model's bounds (``MODEL_LIMITS``).
"""

from __future__ import annotations

import random
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from pcspec.core.errors import PcspecError
from pcspec.live.models import SPECS

SHAPES = ("grown", "alternating", "idle-slots")
PROMPT_IDS = range(128, 256)  # literal prompt ids (pcspec.live.client: generation never makes them)


@dataclass(frozen=True)
class Workload:
    name: str
    shape: str = "grown"
    model: str = "swa-big"  # a kind of pcspec.live.models.SPECS
    turns: int = 9  # per conversation
    first_tokens: int = 256
    turn_tokens: int = 128
    reply_tokens: int = 16
    n_predict: int = 4
    ctx_checkpoints: int = 16  # --ctx-checkpoints
    checkpoint_min_step: int = 64  # -cms: the spacing of checkpoints
    cache_ram_mib: int = 4096  # --cache-ram
    n_ctx: int = 4096  # -c, all slots together
    n_batch: int = 512
    n_ubatch: int = 512
    repeats: int = 3
    seed: int = 0
    # the model-only sizes (0: those of ``model``): a checkpoint's and a token's bytes
    ckpt_mib: float = 0.0
    cell_bytes: int = 0
    notes: str = field(default="", compare=False)

    # -- derived ----------------------------------------------------------------------------

    @property
    def conversations(self) -> int:
        return 1 if self.shape == "grown" else 2

    @property
    def slots(self) -> int:
        return 2 if self.shape == "idle-slots" else 1

    @property
    def sps(self) -> float:
        """``-sps``: 0 for ``grown`` (the LRU branch: a cache update per request), else the default."""
        return 0.0 if self.shape == "grown" else 0.1

    @property
    def cache_idle_slots(self) -> bool:
        return self.shape == "idle-slots"

    @property
    def n_requests(self) -> int:
        return self.turns * self.conversations

    def prompt_length(self, turn: int) -> int:
        """Tokens of a conversation's prompt at ``turn`` (0-based)."""
        return self.first_tokens + turn * (self.reply_tokens + self.turn_tokens)

    def validate(self, limits: dict[str, int]) -> Workload:
        """Refuse absurd sizes before anything runs, naming the field (``PcspecError``)."""
        if self.shape not in SHAPES:
            raise PcspecError(f"workload {self.name!r}: shape: {self.shape!r} is not one of {', '.join(SHAPES)}")
        if self.model not in SPECS:
            raise PcspecError(f"workload {self.name!r}: model: {self.model!r} is not one of {', '.join(SPECS)}")
        for f in fields(self):
            if f.name in ("name", "shape", "model", "notes"):
                continue
            v = getattr(self, f.name)
            lo = 0 if f.name in ("ckpt_mib", "cell_bytes", "seed", "reply_tokens", "turn_tokens") else 1
            if f.name == "cache_ram_mib":
                lo = -1
            if v < lo:
                raise PcspecError(f"workload {self.name!r}: {f.name}: {v} is below {lo}")
            hi = limits.get(f.name)
            if hi is not None and v > hi:
                raise PcspecError(f"workload {self.name!r}: {f.name}: {v} is above {hi} ({limits['_why']})")
        longest = self.prompt_length(self.turns - 1) + self.n_predict
        per_slot = self.n_ctx // self.slots
        if longest > per_slot:
            raise PcspecError(f"workload {self.name!r}: n_ctx: the last prompt and its reply need {longest} tokens, "
                              f"a slot has {per_slot} (n_ctx {self.n_ctx} over {self.slots} slot(s))")
        return self

    # -- the requests -----------------------------------------------------------------------

    def requests(self) -> list[Request]:
        """Every request in the order sent."""
        rng = random.Random(self.seed)
        convs: list[list[list[int]]] = []  # conversation -> turn -> prompt
        for _ in range(self.conversations):
            prompt = [rng.choice(PROMPT_IDS) for _ in range(self.first_tokens)]
            turns = [list(prompt)]
            for _ in range(1, self.turns):
                prompt = prompt + [rng.choice(PROMPT_IDS) for _ in range(self.reply_tokens + self.turn_tokens)]
                turns.append(list(prompt))
            convs.append(turns)
        out: list[Request] = []
        for t in range(self.turns):
            for c in range(self.conversations):
                slot = c if self.shape == "idle-slots" else -1
                out.append(Request(len(out), c, t, convs[c][t], slot))
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(conversations=self.conversations, slots=self.slots, sps=self.sps,
                 cache_idle_slots=self.cache_idle_slots, n_requests=self.n_requests)
        return d


@dataclass(frozen=True)
class Request:
    index: int
    conversation: int
    turn: int
    tokens: list[int]
    id_slot: int  # -1: any slot


# The machine this runs on: 2 cores, 24 GiB. A live run holds, per design, the model's file,
# the context (n_ctx cells) and the cache (cache_ram); the bounds keep one server within a few GiB
# and a run within minutes (a recurrent token of hybrid-big costs about 40 ms on one thread).
LIVE_LIMITS: dict[str, Any] = {
    "_why": "a live run on this machine: 2 cores, 24 GiB (use --model-only for larger sizes)",
    "turns": 64, "first_tokens": 4096, "turn_tokens": 2048, "reply_tokens": 1024, "n_predict": 256,
    "ctx_checkpoints": 64, "cache_ram_mib": 8192, "n_ctx": 16384, "n_batch": 4096, "n_ubatch": 4096,
    "repeats": 20, "ckpt_mib": 0, "cell_bytes": 0,
}
# The model alone: symbolic buffers, so bytes cost nothing; tokens and requests cost time.
MODEL_LIMITS: dict[str, Any] = {
    "_why": "the model-only bounds: a run must end in minutes",
    "turns": 10_000, "first_tokens": 1_000_000, "turn_tokens": 1_000_000, "reply_tokens": 1_000_000,
    "n_predict": 4096, "ctx_checkpoints": 1024, "cache_ram_mib": 2**31 - 1, "n_ctx": 2**32 - 1,
    "n_batch": 2**31 - 1, "n_ubatch": 2**31 - 1, "repeats": 1000, "ckpt_mib": 1 << 20, "cell_bytes": 1 << 30,
}


PRESETS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("grown", "grown", turns=6,
                 notes="one conversation on one slot, a cache update per request, its last save of 9 checkpoints"),
        Workload("alternating", "alternating", turns=8, notes="two conversations alternating on one slot"),
        Workload("idle-slots", "idle-slots", turns=6, n_ctx=8192,
                 notes="two slots, each its conversation, the idle one saved to the cache"),
        Workload("grown-hybrid", "grown", model="hybrid-big", turns=9, first_tokens=64, turn_tokens=48,
                 reply_tokens=16, repeats=2, notes="the grown history on the hybrid model (16 MiB checkpoints)"),
        # the seeds' sizes, beyond this machine: --model-only
        Workload("seed-grown", "grown", model="hybrid-big", turns=1000, first_tokens=1024, turn_tokens=24,
                 reply_tokens=8, ctx_checkpoints=32, checkpoint_min_step=64, cache_ram_mib=16384,
                 n_ctx=65536, repeats=1, ckpt_mib=300.0,
                 notes="1,000 requests, 32 checkpoints of 300 MiB (model only)"),
    )
}


def preset(name: str) -> Workload:
    if name not in PRESETS:
        raise PcspecError(f"unknown workload {name!r}; presets: {', '.join(PRESETS)} (or a .toml file)")
    return PRESETS[name]


_TYPES = {f.name: f.type for f in fields(Workload)}


def from_toml(path: Path) -> Workload:
    """A workload of one's own: a TOML file of ``Workload`` fields (``base = "PRESET"`` starts from a
    preset). A bad file is one ``PcspecError`` line naming the field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PcspecError(f"{path}: cannot read the workload file: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PcspecError(f"{path}: not a TOML file: {exc}") from None
    base = data.pop("base", None)
    if base is not None and (not isinstance(base, str) or base not in PRESETS):
        raise PcspecError(f"{path}: base: {base!r} is not a preset ({', '.join(PRESETS)})")
    w = PRESETS[base] if base else Workload(path.stem)
    changes: dict[str, Any] = {"name": data.pop("name", path.stem)}
    if not isinstance(changes["name"], str):
        raise PcspecError(f"{path}: name: must be a string")
    for key, value in data.items():
        if key not in _TYPES:
            known = ", ".join(sorted(k for k in _TYPES if k != "name"))
            raise PcspecError(f"{path}: {key}: not a workload field (fields: base, name, {known})")
        want = _TYPES[key]
        if want == "str":
            ok = isinstance(value, str)
        elif want == "float":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            value = float(value) if ok else value
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok:
            raise PcspecError(f"{path}: {key}: {value!r} is not a{'n integer' if want == 'int' else ' ' + want}")
        changes[key] = value
    return replace(w, **changes)


def load(spec: str) -> Workload:
    """A preset's name or a ``.toml`` file's path."""
    if spec.endswith(".toml"):
        return from_toml(Path(spec))
    return preset(spec)
