//! The one error type of the drafter: every variant names the input at fault and the way out.

use std::path::PathBuf;

/// What can stop a draft: only a repository directory that cannot be read (a source file that
/// cannot be used is reported in the draft's skipped list instead).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A directory or file could not be read.
    #[error("cannot read {path}: {source}; check that it exists and is readable")]
    Read {
        /// The path that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}
