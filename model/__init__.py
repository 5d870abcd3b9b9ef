"""The reference model of llama-server (the spec). Imports no checker, no hypothesis, no z3."""
