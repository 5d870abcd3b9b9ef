"""The slot file a save wrote, compared with the model's (both read with
``pcspec.model.slotfile.read_slot_file``).

``POST /slots/N?action=save`` writes the slot's tokens (``server_tokens::serialize``,
server-common.cpp:570-620) and its sequence state (``llama_state_seq_save_file``,
src/llama-context.cpp:3360-3400, called at server-context.cpp:2555-2557); a build with the
checkpoint appendix (#26004) adds the slot's checkpoints after the state. The reply gives only
counts (``n_saved``, ``n_written``); this compares what the file holds: the tokens and the
appendix records' ``n_tokens`` and positions. The state itself is not compared: the model's is a
symbolic blob.

The model's generated tokens are not the server's (the model samples ids >= ``VOCAB_GEN``,
pcspec.model.processing.sample_token; the server ASCII bytes), so the model's tokens are
translated first: they are a prefix of one request's prompt and reply on the model's side, and
the same prefix of that request's prompt and reply on the server's side is what the server's
file must hold. Literal prompt tokens are the same ids on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pcspec.model.errors import PcspecError
from pcspec.model.slotfile import read_slot_file

Record = tuple[int, int, int]  # an appendix checkpoint: (n_tokens, pos_min, pos_max)


@dataclass(frozen=True)
class FileView:
    """What a slot file holds that the model predicts: tokens and appendix records (None:
    no appendix, as 0c1e570 writes none)."""

    tokens: tuple[int, ...]
    checkpoints: tuple[Record, ...] | None

    def show(self) -> str:
        ck = "no appendix" if self.checkpoints is None else f"checkpoints {list(self.checkpoints)}"
        return f"{len(self.tokens)} tokens, {ck}"


def read_view(data: bytes, path: str) -> FileView | str:
    """The file's view, or why it cannot be read (a ``PcspecError`` names the offset)."""
    try:
        f = read_slot_file(data, path)
    except PcspecError as e:
        return str(e)
    recs = None if f.checkpoints is None else tuple(
        (c.n_tokens, c.pos_min, c.pos_max) for c in f.checkpoints)
    return FileView(tuple(f.tokens), recs)


# (the model's prompt + reply, the server's prompt + reply) of one request
Source = tuple[Sequence[int], Sequence[int]]


def translate(model_tokens: Sequence[int], sources: Sequence[Source]) -> tuple[int, ...] | None:
    """The server's ids for ``model_tokens``: the latest source whose model side they are a
    prefix of gives its server side's prefix of that length. None when no source fits (the
    tokens of a restored file, say): then only the shape is compared."""
    n = len(model_tokens)
    for mod, srv in reversed(sources):
        if len(mod) >= n and len(srv) >= n and list(mod[:n]) == list(model_tokens):
            return tuple(srv[:n])
    return None


def compare(server: FileView | str, model: FileView | str, sources: Sequence[Source],
            vocab_gen: int) -> str | None:
    """What differs between the server's file and the model's, or None."""
    if isinstance(server, str) or isinstance(model, str):
        if isinstance(server, str) and isinstance(model, str):
            return None  # neither can be read back: the restore fails on both sides
        return (f"server file: {server if isinstance(server, str) else server.show()}; "
                f"model file: {model if isinstance(model, str) else model.show()}")
    problems: list[str] = []
    if len(server.tokens) != len(model.tokens):
        problems.append(f"{len(server.tokens)} tokens, model {len(model.tokens)}")
    else:
        want = translate(model.tokens, sources)
        if want is not None:
            at = next((i for i, (a, b) in enumerate(zip(server.tokens, want, strict=True))
                       if a != b), None)
        else:
            # a literal must be the same id; a generated token only a generated one
            at = next((i for i, (a, b) in enumerate(zip(server.tokens, model.tokens, strict=True))
                       if (b >= vocab_gen) != (a < 128) or (b < vocab_gen and a != b)), None)
        if at is not None:
            problems.append(f"token {at} differs (server {server.tokens[at]}, model "
                            f"{model.tokens[at]}{'' if want is None else ' = ' + str(want[at])})")
    if server.checkpoints != model.checkpoints:
        problems.append(f"appendix: server {_records(server)}, model {_records(model)}")
    return "; ".join(problems) or None


def _records(v: FileView) -> str:
    return "none" if v.checkpoints is None else str(list(v.checkpoints))
