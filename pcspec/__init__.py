"""pcspec: the executable specification and verifier of llama-server's prompt cache and
context checkpoints.

Sub-packages (see docs/ARCHITECTURE.md for where to start reading):

* ``pcspec.model``      the reference implementation (the spec) and its variants;
* ``pcspec.properties`` the invariant catalogue, the oracle and the Hypothesis machine;
* ``pcspec.proofs``     Z3 obligations;
* the rest of ``pcspec`` is glue: the CLI, trace files, reports, the log checker.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"  # the one place: pyproject.toml reads it, `pcspec --version` prints it

# The three sub-packages are symbolic links to the top-level folders. A checkout made without
# symbolic links (Windows without core.symlinks) has one-line text files in their place, and a
# wheel built from it has no sub-packages at all: say that and the fix once, here, instead of a
# bare "No module named 'pcspec.model'" at the first import.
for _name in ("model", "properties", "proofs"):
    if not (_Path(__file__).parent / _name).is_dir():
        raise ImportError(
            f"pcspec/{_name} is not a folder: this copy of pcspec was made without symbolic links. "
            "Clone again with them (git config --global core.symlinks true; on Windows also "
            "Developer Mode), or install a wheel built from such a clone (docs/ARCHITECTURE.md)"
        )
