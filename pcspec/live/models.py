"""Tiny random-weight GGUF models, one per memory kind, generated with the ``gguf`` package.

A few hundred KB each, seeded (same seed, same file), with a byte-level vocabulary of 272 tokens
(ids 0..255 are the bytes, in GPT-2's byte-to-unicode spelling; 256 is one merge; 257..271 are
control tokens, 257 BOS/EOS). Prompts go to ``/completion`` as arrays of ids, so nothing is
tokenized and a prompt is exact.

===========  ==========  ================================================================
kind         arch        memory the server builds (``llama_model::create_memory``)
===========  ==========  ================================================================
``kv``       llama       plain KV cache: no checkpoints, the cache alone
``swa``      gemma2      iSWA: layers 0 and 2 slide over ``sliding_window`` (32) tokens
``recurrent``  mamba     one recurrent state per sequence (FULL: no rollback)
``hybrid``   jamba       attention layers plus mamba layers (``llama_memory_hybrid``)
===========  ==========  ================================================================

Two bench models (``BIG``: ``swa-big``, ``hybrid-big``; ``pcspec bench``, docs/BENCH.md) have
checkpoints of tens of MiB (24 and 16 MiB) and files of 26 and 53 MB, made the same way.

``kv-text`` is ``kv`` whose greedy output is ASCII and never EOS, for llama.cpp's own server
tests (``pcspec/live/upstream.py``), which read the server's log as text.

``decision=`` writes a model of one kind as a decision model as well (``lfm2-d1`` or
``openjev``: the same file plus two metadata keys; pcspec/live/decision.py, docs/LIVE.md).

The shapes are those of the models behind the real logs of ``tests/data/real`` and the live
findings of docs/FINDINGS.md (gemma2: 4 layers, n_embd 64, window 32; mamba: 2 layers, n_embd 64).
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pcspec.live.lazy import np  # numpy comes with gguf, a live-only dependency

KINDS = ("kv", "swa", "recurrent", "hybrid")  # the tiny ones; BIG adds the bench models
N_VOCAB = 272
TOKEN_BOS = 257  # also EOS (requests send ignore_eos)
N_EMBD = 64
N_HEAD = 4
N_FF = 128
N_SWA = 32
GENERATOR_VERSION = 1  # bump when the files change: part of the cache key

# A decision model (``POST /v1/systemone``) is a model of one kind plus two metadata keys:
# ``<arch>.decision.type`` (common_get_decision_type, common/common.cpp:1186-1196 of b11549) and
# the ``systemone`` chat template (server_decision_context::init,
# tools/server/server-decision.cpp:46-50 of b11549). Two types are written, the two that read the
# logits of label tokens at the last prompt token (send_decision,
# tools/server/server-context.cpp:2336-2358 of b11549), so that any causal model serves, that ask
# for no special token, and whose questions share a prompt prefix (can_share_prompt,
# server-decision.h:38-51 of b11549):
#
# * ``lfm2-d1`` (b11549 only): its labels are the option keys when they are single letters, else
#   A, B, ... (d1_labels, tools/server/server-decision.cpp:451-545 of b11549), and the template
#   is given them (``label``); a single letter is a single byte token here (init, 126-128);
# * ``openjev`` (b11434 and b11549): the labels are A..Z, a..z, each a single token (init,
#   server-decision.cpp:69-80 of b11549), in the order of the options; the template is not given
#   them and writes them itself (the first ten: up to ten options).
DECISION_TYPES = ("lfm2-d1", "openjev")
# The state comes first, so that the prompts of the questions of one request start with the same
# tokens (server_decision_group_tasks, server-decision.cpp:1139-1169 of b11549). The state is
# sent as a string (the template is given raw JSON values, render, server-decision.cpp:588).
SYSTEMONE_TEMPLATES = {
    "lfm2-d1": (
        "<|im_start|>{{ state }}\n"
        "{{ instructions }}\n"
        "{% for o in options %}{{ o.label }}: {{ o.key }}\n{% endfor %}"
        "<|im_end|>"
    ),
    "openjev": (
        "{% set letters = ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J'] %}"
        "<|im_start|>{{ state }}\n"
        "{{ instructions }}\n"
        "{% for o in options %}{{ letters[loop.index0] }}: {{ o.key }}\n{% endfor %}"
        "<|im_end|>"
    ),
}


@dataclass(frozen=True)
class ModelSpec:
    kind: str
    arch: str
    n_layer: int
    n_swa: int = 0  # sliding window (swa only)
    # the bench models (BIG): wide K/V heads and wide recurrent states on a narrow residual
    # stream, so that a checkpoint is tens of MiB while a token costs little to compute
    n_head_kv: int = N_HEAD
    head_dim: int = N_EMBD // N_HEAD
    d_state: int = 0  # mamba's state size (0: D_STATE)
    attn_layers: frozenset[int] = frozenset({1, 3})  # jamba only
    # The embedding rows (tied with the output) of the bytes 0x80..0xff and of the control tokens
    # scaled down to near zero, so that greedy decoding never picks one: every generated piece is
    # ASCII, and no EOS ends a completion before n_predict (``kv-text``).
    ascii_out: bool = False


SPECS: dict[str, ModelSpec] = {
    "kv": ModelSpec("kv", "llama", 2),
    "swa": ModelSpec("swa", "gemma2", 4, N_SWA),
    "recurrent": ModelSpec("recurrent", "mamba", 2),
    "hybrid": ModelSpec("hybrid", "jamba", 4),
}

# The bench models (``pcspec bench``, docs/BENCH.md): checkpoints of tens of MiB, sized for a
# 2-core, 24 GiB machine. ``swa-big``: gemma2, 8 layers (0, 2, 4, 6 slide over 512 tokens),
# 24 K/V heads of 128 (3072 f16 values each of K and V per layer and cell: 12 KiB; a checkpoint
# of the four SWA layers over the window is 512 x 4 x 12 KiB = 24 MiB). ``hybrid-big``: jamba,
# 10 layers, 8 mamba layers with a state of 4096 x 128 f32 (2 MiB each: a checkpoint, the
# recurrent part, is 16 MiB) and two small attention layers (1 and 6). A recurrent token costs
# in proportion to its state: about 40 ms on one thread of this machine (24 MiB: 58 ms).
BIG: dict[str, ModelSpec] = {
    "swa-big": ModelSpec("swa-big", "gemma2", 8, 512, n_head_kv=24, head_dim=128),
    "hybrid-big": ModelSpec("hybrid-big", "jamba", 10, d_state=4096, attn_layers=frozenset({1, 6})),
}
SPECS.update(BIG)
# llama.cpp's own server tests (pcspec/live/upstream.py) read the server's verbose log as UTF-8
# text, which logs each generated piece: a lone byte token 0x80..0xff there stops them with a
# UnicodeDecodeError; and their token counts assume a completion runs to n_predict, as
# stories260K's mostly do. ``kv-text`` is ``kv`` whose greedy output is ASCII and never EOS.
SPECS["kv-text"] = ModelSpec("kv-text", "llama", 2, ascii_out=True)


def _bytes_to_unicode() -> list[str]:
    """GPT-2's reversible byte -> printable character map (the spelling of byte tokens)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs, strict=True))
    return [chr(table[b]) for b in range(256)]


def vocabulary() -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) of the byte-level vocabulary."""
    byte_tok = _bytes_to_unicode()
    space = byte_tok[ord(" ")]
    tokens = [*byte_tok, space + space]
    types = [1] * 257  # NORMAL
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    specials += [f"<|unused_{i}|>" for i in range(N_VOCAB - 257 - len(specials))]
    tokens += specials
    types += [3] * len(specials)  # CONTROL
    return tokens, types, [f"{space} {space}"]


class _Weights:
    """Seeded random tensors; ``add`` takes the ggml shape (``ne``, innermost first)."""

    def __init__(self, writer: Any, seed: int) -> None:
        self.w = writer
        self.rng = np.random.default_rng(seed)

    def add(self, name: str, ne: tuple[int, ...], scale: float = 0.2, const: float | None = None,
            quiet_rows: tuple[range, ...] = ()) -> None:
        shape = tuple(reversed(ne))
        if const is not None:
            arr = np.full(shape, const, dtype=np.float32)
        else:
            arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        for rows in quiet_rows:  # (rows: the outermost dimension)
            arr[rows.start:rows.stop] *= 1e-3
        self.w.add_tensor(name, arr)

    def norm(self, name: str) -> None:
        self.add(name, (N_EMBD,), const=1.0)


def _common(w: Any, spec: ModelSpec, weights: _Weights) -> None:
    w.add_context_length(8192)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(spec.n_layer)
    w.add_layer_norm_rms_eps(1e-5)
    tokens, types, merges = vocabulary()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(TOKEN_BOS)
    w.add_eos_token_id(TOKEN_BOS)
    w.add_add_bos_token(True)  # as the model assumes (processing.ADD_BOS); arrays get none
    quiet = (range(0x80, 0x100), range(TOKEN_BOS, N_VOCAB)) if spec.ascii_out else ()
    weights.add("token_embd.weight", (N_EMBD, N_VOCAB), scale=1.0, quiet_rows=quiet)
    weights.norm("output_norm.weight")


def _attention(weights: _Weights, i: int, post_norms: bool, spec: ModelSpec | None = None) -> None:
    width = N_EMBD if spec is None else spec.n_head_kv * spec.head_dim  # n_head = n_head_kv
    scale = 0.2 if width == N_EMBD else 0.2 * (N_EMBD / width) ** 0.5
    weights.norm(f"blk.{i}.attn_norm.weight")
    for t in ("q", "k", "v"):
        weights.add(f"blk.{i}.attn_{t}.weight", (N_EMBD, width))
    weights.add(f"blk.{i}.attn_output.weight", (width, N_EMBD), scale=scale)
    if post_norms:
        weights.norm(f"blk.{i}.post_attention_norm.weight")


def _ffn(weights: _Weights, i: int, post_norms: bool) -> None:
    weights.norm(f"blk.{i}.ffn_norm.weight")
    weights.add(f"blk.{i}.ffn_gate.weight", (N_EMBD, N_FF))
    weights.add(f"blk.{i}.ffn_up.weight", (N_EMBD, N_FF))
    weights.add(f"blk.{i}.ffn_down.weight", (N_FF, N_EMBD))
    if post_norms:
        weights.norm(f"blk.{i}.post_ffw_norm.weight")


D_CONV, D_STATE, DT_RANK = 4, 16, 4
D_INNER = 2 * N_EMBD  # only an expansion factor of 2 is supported


def _mamba(weights: _Weights, i: int, jamba: bool, d_state: int = D_STATE) -> None:
    weights.norm(f"blk.{i}.attn_norm.weight")
    weights.add(f"blk.{i}.ssm_in.weight", (N_EMBD, 2 * D_INNER))
    weights.add(f"blk.{i}.ssm_conv1d.weight", (D_CONV, D_INNER))
    weights.add(f"blk.{i}.ssm_conv1d.bias", (D_INNER,), scale=0.05)
    weights.add(f"blk.{i}.ssm_x.weight", (D_INNER, DT_RANK + 2 * d_state))
    weights.add(f"blk.{i}.ssm_dt.weight", (DT_RANK, D_INNER))
    weights.add(f"blk.{i}.ssm_dt.bias", (D_INNER,), scale=0.05)
    if jamba:
        weights.add(f"blk.{i}.ssm_dt_norm.weight", (DT_RANK,), const=1.0)
        weights.add(f"blk.{i}.ssm_b_norm.weight", (d_state,), const=1.0)
        weights.add(f"blk.{i}.ssm_c_norm.weight", (d_state,), const=1.0)
    # A = -exp(A_log) is stored: negative, so the state decays
    a = -np.tile(np.arange(1, d_state + 1, dtype=np.float32), (D_INNER, 1))
    weights.w.add_tensor(f"blk.{i}.ssm_a", a)
    weights.add(f"blk.{i}.ssm_d", (D_INNER,), const=1.0)
    weights.add(f"blk.{i}.ssm_out.weight", (D_INNER, N_EMBD))


def _ssm_keys(w: Any, d_state: int = D_STATE) -> None:
    w.add_ssm_conv_kernel(D_CONV)
    w.add_ssm_inner_size(D_INNER)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(DT_RANK)


def write_model(kind: str, path: Path, seed: int = 0, decision: str | None = None) -> Path:
    """Write the model of ``kind`` to ``path``; returns ``path``. With ``decision`` (one of
    ``DECISION_TYPES``), the same weights and vocabulary plus the decision metadata."""
    import gguf  # a live-only dependency: imported where it is needed

    spec = SPECS[kind]
    if decision is not None and decision not in DECISION_TYPES:
        raise ValueError(f"unknown decision type {decision!r}; types: {', '.join(DECISION_TYPES)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), spec.arch)
    weights = _Weights(w, seed)
    w.add_name(f"pcspec-tiny-{kind}")
    _common(w, spec, weights)
    if decision is not None:
        w.add_string(f"{spec.arch}.decision.type", decision)
        w.add_string("tokenizer.chat_template.systemone", SYSTEMONE_TEMPLATES[decision])
    big = spec.kind in BIG
    if spec.arch in ("llama", "gemma2"):
        w.add_feed_forward_length(N_FF)
        w.add_head_count(spec.n_head_kv)
        w.add_head_count_kv(spec.n_head_kv)
        if big:
            w.add_key_length(spec.head_dim)
            w.add_value_length(spec.head_dim)
        if spec.arch == "gemma2":
            w.add_sliding_window(spec.n_swa)
            w.add_attn_logit_softcapping(50.0)
            w.add_final_logit_softcapping(30.0)
        else:
            w.add_rope_dimension_count(N_EMBD // N_HEAD)
        post = spec.arch == "gemma2"
        for i in range(spec.n_layer):
            _attention(weights, i, post, spec if big else None)
            _ffn(weights, i, post)
    elif spec.arch == "mamba":
        w.add_feed_forward_length(0)
        w.add_head_count(0)
        w.add_head_count_kv(0)
        _ssm_keys(w)
        for i in range(spec.n_layer):
            _mamba(weights, i, jamba=False)
    else:  # jamba: layers 1 and 3 attention, 0 and 2 mamba (the tiny one)
        attn_layers = spec.attn_layers
        d_state = spec.d_state or D_STATE
        w.add_feed_forward_length(N_FF)
        w.add_head_count(N_HEAD)
        w.add_head_count_kv([N_HEAD if i in attn_layers else 0 for i in range(spec.n_layer)])
        _ssm_keys(w, d_state)
        for i in range(spec.n_layer):
            if i in attn_layers:
                _attention(weights, i, post_norms=False)
            else:
                _mamba(weights, i, jamba=True, d_state=d_state)
            _ffn(weights, i, post_norms=False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(path)
    return path


def model_key(kind: str, seed: int, decision: str | None = None) -> str:
    if decision is None:
        h = hashlib.sha256(f"{GENERATOR_VERSION}:{kind}:{seed}".encode()).hexdigest()[:8]
        return f"tiny-{kind}-s{seed}-{h}.gguf"
    key = f"{GENERATOR_VERSION}:{kind}:{seed}:{decision}:{SYSTEMONE_TEMPLATES[decision]}"
    h = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"tiny-{kind}-{decision}-s{seed}-{h}.gguf"


def ensure_model(kind: str, directory: Path, seed: int = 0, decision: str | None = None) -> Path:
    """The model file of ``kind`` (a decision model of type ``decision`` if given) in
    ``directory``, generated if it is not there."""
    if kind not in SPECS:
        raise ValueError(f"unknown model kind {kind!r}; kinds: {', '.join(SPECS)}")
    if decision is not None and decision not in DECISION_TYPES:
        raise ValueError(f"unknown decision type {decision!r}; types: {', '.join(DECISION_TYPES)}")
    path = directory / model_key(kind, seed, decision)
    if not path.is_file():
        write_model(kind, path, seed, decision)
    return path


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``pcspec models`` (and of ``python -m pcspec.live.models``)."""
    p.add_argument("kind", choices=list(SPECS), help="the model's memory kind")
    p.add_argument("out", type=Path, metavar="OUT.gguf", help="the file to write")
    p.add_argument("seed", type=int, nargs="?", default=0, help="the weights' seed (default 0)")


def command(args: argparse.Namespace) -> int:
    """Write one model file."""
    path = write_model(args.kind, args.out, args.seed)
    print(f"{path} ({path.stat().st_size} bytes)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m pcspec.live.models KIND OUT.gguf [SEED]``: ``pcspec models`` outside the command
    line."""
    p = argparse.ArgumentParser(prog="python -m pcspec.live.models", description="Write a tiny GGUF model.")
    add_arguments(p)
    return command(p.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
