"""A smoke run of a built server: does this binary run the code its design changes?

On the tiny SWA model (window 32; ``pcspec/live/models.py``), one slot, ``--cache-ram 64``,
8 checkpoints 64 tokens apart:

1. prompt A (300 tokens): context checkpoints are created near its end;
2. prompt B: A's state goes to the prompt cache with its checkpoints (the copy #30137 and
   #27451 make cheap);
3. prompt A again: A comes back from the cache, and the slot restores one of its checkpoints
   (the window no longer holds the start of the prompt);
4. ``POST /slots/0?action=save``: the slot file (its size must be the reply's ``n_written``).

    pcspec smoke --design pr30137      # the design's cached build
    pcspec smoke --server PATH         # any build

prints the log lines of each step, and exits 1 when a step is missing or a request failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pcspec.core.errors import PcspecError
from pcspec.live import build
from pcspec.live.client import Client, Reply
from pcspec.live.designs import DesignUnavailable, design_of
from pcspec.live.models import ensure_model
from pcspec.live.process import Flags, ServerDied, ServerProcess
from pcspec.logcheck import events as ev
from pcspec.logcheck import read_events
from pcspec.logcheck.excerpt import cache_lines

FLAGS = Flags(n_slots=1, n_ctx=2048, n_batch=64, n_ubatch=64, cache_ram_mib=64, ctx_checkpoints=8,
              checkpoint_min_step=64)
PROMPT_A = [128 + (7 * i) % 128 for i in range(300)]
PROMPT_B = [128 + (13 * i + 5) % 128 for i in range(300)]
# what each step logs (0c1e570: create_checkpoint, server_slot::prompt_save,
# server_prompt_cache::load, the checkpoint restore of update_slots); the slot save logs no line
# of its own (server-context.cpp:2526-2575): its reply and its file show it
STEPS: tuple[tuple[str, type[ev.Event]], ...] = (
    ("checkpoint created", ev.CheckpointCreated),
    ("prompt saved to the cache", ev.PromptSave),
    ("prompt loaded from the cache", ev.LoadFound),
    ("checkpoint restored", ev.CheckpointRestored),
)
SLOT_FILE = "smoke.bin"


@dataclass
class SmokeResult:
    binary: Path
    log: str
    replies: list[Reply] = field(default_factory=list)
    slot_file_bytes: int = 0  # the size of the file the save wrote (0: none)

    @property
    def completions_ok(self) -> bool:
        return all(r.ok for r in self.replies if r.path == "/completion") and len(self.replies) >= 3

    def _save(self, key: str) -> int:
        save = [r for r in self.replies if "action=save" in r.path]
        return int(save[0].data.get(key, 0)) if save and save[0].ok else 0

    @property
    def n_saved(self) -> int:
        """Tokens the slot save wrote, by its reply."""
        return self._save("n_saved")

    @property
    def saved_whole(self) -> bool:
        """The save wrote a file of the size its reply gives (``n_written``)."""
        return self.n_saved > 0 and self.slot_file_bytes == self._save("n_written") > 0

    @cached_property
    def events(self) -> list[ev.Event]:
        return read_events(self.log)

    def lines(self, kind: type[ev.Event]) -> list[str]:
        """The log's lines of ``kind``."""
        text = self.log.split("\n")
        return [text[e.line - 1] for e in self.events if isinstance(e, kind)]

    def records(self) -> list[str]:
        """The checkpoint and cache lines two designs are compared on (the patches change no log
        line a healthy run prints, and not the cache accounting either), without their time
        stamps and addresses."""
        return cache_lines(self.log)

    def missing(self) -> list[str]:
        return [what for what, kind in STEPS if not self.lines(kind)]

    def summary(self) -> str:
        out = [f"{self.binary}"]
        out += [f"  {r.method} {r.path}: {r.status} {r.error}".rstrip() for r in self.replies]
        out.append(f"  slot save: n_saved = {self.n_saved}, n_written = {self._save('n_written')}, "
                   f"file {SLOT_FILE}: {self.slot_file_bytes} bytes")
        for what, kind in STEPS:
            found = self.lines(kind)
            out.append(f"  {what}: {len(found)} line(s)")
            out += [f"    {line.strip()[:200]}" for line in found[:2]]
        return "\n".join(out)


def smoke(binary: Path, workdir: Path, timeout: float = 60.0) -> SmokeResult:
    """Run the four steps on a fresh server in ``workdir``; the server is stopped on return."""
    model = ensure_model("swa", workdir / "models")
    replies: list[Reply] = []
    server = ServerProcess(binary, model, FLAGS, workdir, name="smoke")
    try:
        with server:
            client = Client(server.url, timeout=timeout)
            for prompt in (PROMPT_A, PROMPT_B, PROMPT_A):
                replies.append(client.completion(prompt, n_predict=4))
            replies.append(client.slot_action(0, "save", SLOT_FILE))
    except ServerDied as exc:
        return SmokeResult(binary, server.log_bytes().decode("utf-8", "replace") + f"\n{exc}", replies)
    slot_file = server.slot_dir / SLOT_FILE
    size = slot_file.stat().st_size if slot_file.is_file() else 0
    return SmokeResult(binary, server.log_bytes().decode("utf-8", "replace"), replies, size)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``pcspec smoke`` (and of ``python -m pcspec.live.smoke``)."""
    which = p.add_mutually_exclusive_group()
    which.add_argument("--design", metavar="NAME", help="the cached build of a design (default baseline)")
    which.add_argument("--server", type=Path, help="a llama-server binary")
    p.add_argument("--keep", type=Path, help="run in this folder and keep the log there")


def command(args: argparse.Namespace) -> int:
    """Smoke-test the server ``args`` name; bad input raises ``PcspecError``."""
    if args.server is not None:
        binary: Path | None = args.server if args.server.is_file() else None
        if binary is None:
            raise PcspecError(f"no such server binary: {args.server}")
    else:
        try:
            d = design_of(args.design or "baseline")
        except DesignUnavailable as exc:
            raise PcspecError(str(exc)) from None
        binary = build.find_server(d.tree, d.patch_paths(), d.flags)
        if binary is None:
            raise PcspecError(f"design {d.name} is not built: pcspec build --design {d.name}")
    if args.keep is not None:
        res = smoke(binary, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="pcspec-smoke-") as tmp:
            res = smoke(binary, Path(tmp))
    print(res.summary())
    return 0 if res.completions_ok and res.saved_whole and not res.missing() else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m pcspec.live.smoke``: ``pcspec smoke`` outside the command line."""
    p = argparse.ArgumentParser(prog="python -m pcspec.live.smoke", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    try:
        return command(p.parse_args(argv))
    except PcspecError as exc:
        print(f"pcspec live smoke: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
