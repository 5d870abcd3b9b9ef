"""The invariant catalogue, the expected-verdict oracle and the Hypothesis state machine.

Imported as ``pcspec.properties`` only (``pcspec/properties`` links to this folder): from
the repository root ``import properties`` would load a second copy of every module and of
the model under it, whose classes are not pcspec's (see ``model/__init__.py``).
"""

if __name__ != "pcspec.properties":
    raise ImportError(
        f"the pcspec properties are imported as 'pcspec.properties', not {__name__!r} "
        f"(write 'from pcspec.properties import ...'; see docs/ARCHITECTURE.md, Layout)"
    )

# The mutants make themselves known by name (a trace naming one reads back wherever
# pcspec.properties is imported).
from pcspec.properties import mutants as _mutants  # noqa: F401
