"""Z3 proof obligations over the model's rules: immutability after publication, no leaked
uninitialized bytes, rollback on failed saves, dedup accounting (``docs/PROOFS.md``).

Each obligation (``obligations.py``) proves its claim for a variant within a stated scope --
unbounded over uninterpreted sorts (``world*.py``, ``setsum.py``) or for every cache of up to
N entries and K checkpoints with every size symbolic (``cache*.py``) -- and searches the
canvas (``canvas.py``, ``search_*.py``) for a counterexample that the model then replays
(``replay.py``). ``suite.py`` runs the pairs ``pairs.py`` draws from the oracle; ``solver.py``
and ``recheck.py`` are the two solvers. The encodings are checked against the model by the
tests (``tests/proofs/conform_*.py``).
"""
