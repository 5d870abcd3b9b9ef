"""The test suite: one folder per package of pcspec (tests/core, tests/model, ...), tests/project
for the documents, the packaging and the import contract, and tests/support for the helpers the
folders share (``from tests.support.common import ...``). docs/ARCHITECTURE.md, "Tests"."""
