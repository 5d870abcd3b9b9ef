"""The core every tool stands on, above the model and below everything else: the errors
(``errors``), the operation vocabulary (``ops``), trace files (``trace``), the one loop from
operations to judged states (``loop``), the one result type (``results``), the one shrinker
(``shrink``), the draw interface the fuzzing rules are written against (``draw``), output
paths (``outdir``) and counterexamples as pytest files (``snippet``). It imports the model and
nothing else of pcspec."""
