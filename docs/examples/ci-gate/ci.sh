#!/usr/bin/env bash
# Three ways to gate a CI job on a design of your own; each exits 1 while the design breaks a
# property pcspec checks (and 3 if a time cap left something unknown: never a pass).
set -u
status=0
# 1. In your test run: the pytest plugin fuzzes the variant with Hypothesis (derandomized).
python -m pytest -q -p no:cacheprovider --pcspec-variant my_variants:NOROLLBACK || status=1
# 2. The seeded fuzzer, for the properties you care about (the same result on every machine).
pcspec fuzz --variant-module my_variants:NOROLLBACK --property RB-1 --property RB-2 --out pcspec-out || status=1
# 3. The Z3 obligations (a counterexample is replayed in the model).
pcspec prove --variant-module my_variants:NOROLLBACK --obligation RB-2 --out pcspec-out/proofs || status=1
exit $status
