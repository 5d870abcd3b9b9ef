"""The fuzzing engines that run the rules of ``pcspec.properties.rules``: the seeded walker
(``walker``), and Hypothesis through its public API (``hypothesis``); the surveys and hunts
``pcspec verify`` makes of the walker (``search``) and long campaigns over worker processes
(``campaign``)."""
