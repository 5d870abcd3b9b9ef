"""The reference model of llama-server (the spec). Imports no checker, no hypothesis, no z3.

Its one import name is ``pcspec.model`` (``pcspec/model`` links to this folder). From the
repository root ``import model`` would also find this folder and load a second copy of every
module: its ``Config``, ``Server`` and ``PcspecError`` would be other classes than the ones
pcspec uses, so ``isinstance`` checks and ``except`` clauses would silently miss them. That
import is refused here, with the name to use instead.
"""

if __name__ != "pcspec.model":
    raise ImportError(
        f"the pcspec model is imported as 'pcspec.model', not {__name__!r} "
        f"(write 'from pcspec.model import ...'; see docs/ARCHITECTURE.md, Layout)"
    )
