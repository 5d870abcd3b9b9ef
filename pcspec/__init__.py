"""pcspec: the executable specification and verifier of llama-server's prompt cache and
context checkpoints.

Sub-packages (see docs/ARCHITECTURE.md for where to start reading):

* ``pcspec.model``      the reference implementation (the spec) and its variants;
* ``pcspec.properties`` the invariant catalogue, the oracle and the Hypothesis machine;
* ``pcspec.proofs``     Z3 obligations;
* the rest of ``pcspec`` is glue: the CLI, trace files, reports, the log checker.
"""

__version__ = "0.1.0"
