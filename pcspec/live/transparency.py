"""Cache transparency, the oracle that needs no log: the cache must be invisible.

A request answered with the cache on must give the same top-k log-probabilities as the same
prompt processed from nothing. The uncached answer comes from a *reference* server of the same
binary and model with the prompt cache off (``--cache-ram 0``, one slot, ``"cache_prompt":
false``), so checking never changes the state of the server under test; answers are memoised
(the model is deterministic at temperature 0).

Comparison, per generated token up to the first token the two runs chose differently: the
top-k log-probabilities sorted by value must agree within ``TOLERANCE``, and the chosen token
must be the same unless its margin over the runner-up is within the tolerance.

The tolerance is per model kind, about twice the float noise measured between two *uncached*
runs of the same prompts with other batch sizes (``-b 128 -ub 64`` against ``-b 32 -ub 16``,
25 prompts of 20..600 tokens, 6 generated tokens; docs/LIVE.md): kv 0.044, swa 0.004, hybrid
0.012, recurrent 0 (the scan is sequential: bit-identical). A cached state that is not the
state of its tokens moves them by 0.05 and more (the SWA window one cell short of F2 in
docs/FINDINGS.md moved them by 0.067 to 0.326).
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.live.client import Client, Reply, TopK, generated, top_logprobs

TOLERANCE = 0.02
TOLERANCES = {"kv": 0.1, "swa": 0.02, "hybrid": 0.03, "recurrent": 0.01}


@dataclass(frozen=True)
class Verdict:
    ok: bool
    max_diff: float
    step: int  # the first generated token that differs (-1 when none)
    detail: str = ""


def compare(cached: TopK, cached_ids: list[int], ref: TopK, ref_ids: list[int], tol: float = TOLERANCE) -> Verdict:
    worst = 0.0
    for j in range(min(len(cached), len(ref))):
        a = sorted((lp for _, lp in cached[j]), reverse=True)
        b = sorted((lp for _, lp in ref[j]), reverse=True)
        d = max((abs(x - y) for x, y in zip(a, b, strict=False)), default=0.0)
        worst = max(worst, d)
        if d > tol:
            return Verdict(False, d, j, f"token {j}: top-{len(a)} log-probabilities differ by {d:.3f}")
        if j < len(cached_ids) and j < len(ref_ids) and cached_ids[j] != ref_ids[j]:
            margin = (b[0] - b[1]) if len(b) > 1 else 1.0
            if margin > tol:
                return Verdict(False, d, j, f"token {j}: chose {cached_ids[j]}, uncached chose {ref_ids[j]} "
                                            f"(margin {margin:.3f})")
            break  # a near tie went the other way: later tokens have other contexts
    return Verdict(True, worst, -1)


class Reference:
    """The uncached answers, from the reference server, memoised by (prompt, n_predict)."""

    def __init__(self, client: Client, tolerance: float = TOLERANCE) -> None:
        self.client = client
        self.tolerance = tolerance
        self.memo: dict[tuple[tuple[int, ...], int], Reply] = {}

    def answer(self, tokens: list[int], n_predict: int) -> Reply:
        key = (tuple(tokens), n_predict)
        got = self.memo.get(key)
        if got is None:
            got = self.client.completion(tokens, n_predict=n_predict, cache_prompt=False)
            if got.ok:
                self.memo[key] = got
        return got

    def check(self, tokens: list[int], reply: Reply, n_predict: int) -> Verdict | None:
        """None when there is nothing to compare (an error reply on either side)."""
        if not reply.ok or not tokens:
            return None
        ref = self.answer(tokens, n_predict)
        if not ref.ok:
            return None
        return compare(top_logprobs(reply), generated(reply), top_logprobs(ref), generated(ref), self.tolerance)
