"""The conformance kit: the protocol a port of the core speaks, the lowering of model traces to
it, the reference observations, the golden suite, and the session that compares a port with the
model (``pcspec conform``). docs/SPEC.md is the written form; ``pcspec.tools.specgen`` generates its
tables from the modules here.

Modules, one idea each:

* ``protocol``: the operations, events and observations a port speaks (schema version, fields,
  the C++ each operation mirrors, JSON Schemas), and the byte encoding of states;
* ``tags``: content identities of the model (state images) as the small integers ports see;
* ``observe``: an observation of the model's state (the port-visible variables);
* ``lower``: a model trace turned into core operations with the expected observations;
* ``canon``: canonical ids and the comparison of two observations;
* ``judge``: the catalogue's checks over a port's observations, loaded into model objects
  (what names a divergence);
* ``case``: a conformance case and its file format (the golden files);
* ``scenarios``, ``witnesses``: the model traces of the golden suite (hand-written; and the
  counterexamples of ``pcspec verify``, one per property); ``golden``: the suite, regenerated
  and checked for drift;
* ``fuzz``: fuzzed model traces from pcspec's seeded walker;
* ``port``: running a port program; ``session``: comparing it, shrinking a divergence;
  ``run``: the whole ``pcspec conform`` run; ``report``: its text and JSON;
* ``suite/``, ``witnesses.jsonl``: the golden suite's files and its witnesses (package data).

The ports themselves live outside the package: ``ports/cpp/`` (C++), and a small Python port the
kit's tests run (``tests/support/pyport.py``).
"""
