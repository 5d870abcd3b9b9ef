"""Helpers shared by the test folders, imported as ``from tests.support.<module> import ...``:

* ``paths``: the repository, tests/ and tests/data, wherever the importing test sits;
* ``common``: designs, event filters, the small KV and recurrent servers, trace files;
* ``state_builders``: sequence states built and read back (the real slot files included);
* ``file1_setup``: the FILE-1 set-up, shared with benchmarks/file1_campaign.py;
* ``nested_approx``: ``pytest.approx`` over nested numbers;
* ``pyport``: the Python port of ``fixed`` the conformance kit's tests run (also a script).
"""
