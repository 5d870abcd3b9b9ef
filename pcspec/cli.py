"""The ``pcspec`` command line.

Each sub-command lives in its own module exposing ``register(subparsers)``; the module sets
``func`` on its parser to a callable ``(args) -> int`` (the exit code). Exit codes: 0 when
everything matched expectations, 1 when a check found something (a violation, a deviation,
a mismatch with the oracle), 2 for bad input or usage, 3 when a time cap or a solver limit left
something unknown (never a pass). A reader that closes the pipe early (``| head -1``) ends the
command quietly, as it ends ``grep``: no traceback, exit 141 (128 + SIGPIPE).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from pcspec import __version__
from pcspec.core.errors import PcspecError

# Sub-command modules, in the order ``pcspec --help`` lists them.
COMMAND_MODULES = (
    "pcspec.commands.verify",
    "pcspec.commands.fuzz",
    "pcspec.commands.prove",
    "pcspec.commands.replay",
    "pcspec.commands.check_log",
    "pcspec.commands.slotfile",
    "pcspec.commands.live",
    "pcspec.commands.bench",
    "pcspec.commands.conform",
    "pcspec.commands.campaign",
    # the live checker's servers and models, one action each
    "pcspec.commands.build",
    "pcspec.commands.smoke",
    "pcspec.commands.models",
    "pcspec.commands.decision",
)


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line, like every other error (the usage is one ``--help`` away).
    Sub-command parsers are of the same class (``add_subparsers`` makes them so)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="pcspec",
        description="Executable specification and verifier of llama-server's prompt cache and context checkpoints.",
    )
    parser.add_argument("--version", action="version", version=f"pcspec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # not written yet: the command is simply absent
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, a usage error: main returns codes, never exits
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # (here, so that a closed pipe is seen here, not at the interpreter's exit)
    except BrokenPipeError:
        _discard_stdout()
        return 141
    except PcspecError as exc:
        print(f"pcspec: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pcspec: interrupted", file=sys.stderr)
        return 130
    return code


def _discard_stdout() -> None:
    """Point standard output at /dev/null: the interpreter flushes it once more at exit, which
    would raise again on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
