"""The October 2026 rules (llama.cpp 0c1e570) where they differ from the model's November ones.

The model follows seed 001 (November) at two places the live server (October) does not:

* **M1, invalidation** (server-context.cpp:3367-3378 at 0c1e570): at prompt start October erases
  checkpoints with ``pos_max > pos_next`` only; November also erases those with
  ``n_tokens > n_prefix`` (``policy.invalidated``). A checkpoint at ``n_tokens = n_prefix + 1``
  survives in October (and is then restored: FINDINGS F2).
* **M2, slot files** (server-context.cpp:2526-2640 at 0c1e570): October writes no checkpoint
  appendix and a restore installs the tokens with no checkpoint (``prompt.clear()``);
  November (#26004 in seed 001) writes the appendix and restores the checkpoints.

Until the model has these as seams of a named rule set (asked for in docs/LIVE.md, "Model
changes"), ``october_rules()`` applies them for the duration of a live prediction by swapping
the two model functions that carry the November rule, and restores them on exit. It is the
only place pcspec live touches the model's behaviour, it changes no file of the model, and it
is a no-op once the model's ``Variant`` carries the seams (``SEAMS``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pcspec.model import policy, slot_files
from pcspec.model.variants import Variant

# The seams the model is asked for; when a Variant has them, they are used instead of the shim.
SEAMS = ("invalidate_n_prefix", "slot_file_appendix")


def invalidated_october(ckpts: Sequence[tuple[int, int]], pos_next: int, n_prefix: int) -> list[int]:
    """``policy.invalidated`` without the November ``n_tokens > n_prefix`` term."""
    return [i for i, (pos_max, _n_tokens) in enumerate(ckpts) if pos_max > pos_next]


def has_seams(v: Variant) -> bool:
    return all(hasattr(v, s) for s in SEAMS)


@contextmanager
def october_rules(v: Variant) -> Iterator[None]:
    if has_seams(v):
        yield
        return
    orig_inv = policy.invalidated
    orig_write = slot_files.__dict__["write_slot_file"]

    def write_no_appendix(tokens: Any, state: Any, records: Any, *a: Any, **k: Any) -> bytes:
        data: bytes = orig_write(tokens, state, [], *a, **k)
        return data

    policy.invalidated = invalidated_october
    slot_files.__dict__["write_slot_file"] = write_no_appendix
    try:
        yield
    finally:
        policy.invalidated = orig_inv
        slot_files.__dict__["write_slot_file"] = orig_write
