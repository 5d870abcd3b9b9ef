"""HTTP to a live server (127.0.0.1 only): completions with token-array prompts, ``/slots``
actions. Every call has a timeout; a call that gets no answer in time is a ``Reply`` with
``status`` 0 and ``timed_out`` set (a finding of its own: the progress oracle).

Each request is kept as the exact JSON body sent, so a report can print it as a ``curl`` line.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

N_PROBS = 5
# Literal prompt ids are 128..255 and generation may not produce them, nor 256..271 (a merge and
# control tokens): a generated token is then never mistaken for a literal one in a common
# prefix (pcspec.live.fuzz). Generated tokens are ASCII bytes: a byte >= 128 that starts a
# UTF-8 sequence is held back as incomplete text, and the server then leaves its
# log-probabilities out of the reply (process_token), which the transparency oracle needs.
BANNED = range(128, 272)


@dataclass
class Reply:
    method: str
    path: str
    body: dict[str, Any] | None
    status: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == 200

    def curl(self, base: str = "http://127.0.0.1:8080") -> str:
        if self.body is None:
            return f'curl -s -X {self.method} "{base}{self.path}"'
        body = json.dumps(self.body, separators=(",", ":"))
        return f"curl -s -X {self.method} \"{base}{self.path}\" -H 'Content-Type: application/json' -d '{body}'"

    def to_json(self) -> dict[str, Any]:
        keep: dict[str, Any] = {k: self.data[k] for k in ("tokens_cached", "timings", "id_slot", "tokens",
                                          "n_saved", "n_written", "n_restored", "n_read", "n_erased")
                if k in self.data}
        if "completion_probabilities" in self.data:
            keep["top_logprobs"] = [[[i, round(lp, 5)] for i, lp in step] for step in top_logprobs(self)]
        return {"method": self.method, "path": self.path, "body": self.body, "status": self.status,
                "error": self.error, "timed_out": self.timed_out, "seconds": round(self.seconds, 3),
                "reply": keep}


def completion_body(tokens: list[int], *, n_predict: int, id_slot: int = -1, cache_prompt: bool = True,
                    n_probs: int = N_PROBS) -> dict[str, Any]:
    """``POST /completion`` at temperature 0 with top-k log-probabilities; EOS ignored so that
    every reply has exactly ``n_predict`` tokens."""
    body: dict[str, Any] = {
        "prompt": tokens, "n_predict": n_predict, "cache_prompt": cache_prompt, "temperature": 0,
        "n_probs": n_probs, "ignore_eos": True, "return_tokens": True, "seed": 42,
        "logit_bias": [[i, False] for i in BANNED],
    }
    if id_slot != -1:
        body["id_slot"] = id_slot
    return body


class Client:
    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        if not base_url.startswith("http://127.0.0.1:"):
            raise ValueError("pcspec live only talks to 127.0.0.1")
        self.base = base_url
        self.timeout = timeout

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             timeout: float | None = None) -> Reply:
        reply = Reply(method, path, body)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as r:
                reply.status = r.status
                raw = r.read()
        except urllib.error.HTTPError as exc:
            reply.status = exc.code
            raw = exc.read() or b""
        except TimeoutError:
            reply.timed_out, reply.error = True, "timed out"
            raw = b""
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            reply.timed_out = isinstance(reason, TimeoutError | socket.timeout)
            reply.error = f"no answer: {reason}"
            raw = b""
        reply.seconds = time.monotonic() - t0
        if raw:
            try:
                parsed = json.loads(raw)
                reply.data = parsed if isinstance(parsed, dict) else {"value": parsed}
            except ValueError:
                reply.error = reply.error or raw[:200].decode("utf-8", "replace")
        if reply.status not in (0, 200) and not reply.error:
            err = reply.data.get("error")
            reply.error = json.dumps(err) if err is not None else f"HTTP {reply.status}"
        return reply

    def completion(self, tokens: list[int], *, n_predict: int, id_slot: int = -1, cache_prompt: bool = True,
                   timeout: float | None = None) -> Reply:
        body = completion_body(tokens, n_predict=n_predict, id_slot=id_slot, cache_prompt=cache_prompt)
        return self.call("POST", "/completion", body, timeout)

    def slot_action(self, id_slot: int, action: str, filename: str = "", timeout: float | None = None) -> Reply:
        body = {"filename": filename} if action in ("save", "restore") else {}
        return self.call("POST", f"/slots/{id_slot}?action={action}", body, timeout)


# -- what a completion reply says ---------------------------------------------------------------


def generated(reply: Reply) -> list[int]:
    toks = reply.data.get("tokens")
    return [int(t) for t in toks] if isinstance(toks, list) else []


def cache_n(reply: Reply) -> int | None:
    t = reply.data.get("timings")
    return int(t["cache_n"]) if isinstance(t, dict) and "cache_n" in t else None


def prompt_n(reply: Reply) -> int | None:
    t = reply.data.get("timings")
    return int(t["prompt_n"]) if isinstance(t, dict) and "prompt_n" in t else None


TopK = list[list[tuple[int, float]]]


def top_logprobs(reply: Reply) -> TopK:
    """Per generated token, the top-k (id, logprob) pairs."""
    out: TopK = []
    for step in reply.data.get("completion_probabilities") or []:
        if isinstance(step, dict):
            out.append([(int(p["id"]), float(p["logprob"])) for p in step.get("top_logprobs", [])
                        if isinstance(p, dict)])
    return out
