"""``pcspec live``: drive a real llama-server with fuzzed workloads and check every request
against the model, the server's own log and the cache-transparency oracle (docs/LIVE.md).

Data flow: ``fuzz`` makes operations (``ops``); ``driver`` sends them to a ``process`` through
``client`` and records replies and log ranges; ``analyze`` judges a run: ``transparency``
(against a reference server), ``predict`` (the model following the log's ``schedule``, under
the ``october`` rule set of model/variants.py), ``compare`` over the shared records of
``pcspec.model.logged`` (the model's ``Event.logged``, the log's ``pcspec.logcheck.logged``),
``waste`` and the log checker; ``explain`` names known causes; ``session``
is one run, ``shrink`` re-runs to minimise, ``campaign`` loops over runs, ``report`` writes
the files. ``build`` and ``models`` make the server binary and the GGUF files.
"""
