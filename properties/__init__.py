"""The invariant catalogue, the expected-verdict oracle and the Hypothesis state machine."""
