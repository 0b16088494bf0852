//! Scripted fake `claude` and `codex` executables that reproduce measured CLI behaviour.
