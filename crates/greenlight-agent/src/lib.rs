//! Agent runtimes (claude, codex, any command) behind one `Dispatcher` seam.
