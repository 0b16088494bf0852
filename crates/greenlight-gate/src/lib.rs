//! verify.yaml, gate execution, verdicts and renderers.
