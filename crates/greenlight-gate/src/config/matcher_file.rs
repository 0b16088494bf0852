//! Reading one problem matcher file as verify.yaml v2 reads it, for every caller that takes
//! matcher files (a gate's `matchers`, `greenlight digest --matcher`): a regular file of at
//! most 1 MiB, UTF-8, refused where GitHub's runner would refuse it.

use std::path::Path;

use greenlight_digest::matchers::{MatcherError, MatcherSet};

/// Why a matcher file cannot be used; each caller words it for where the file was named.
#[derive(Debug)]
pub enum MatcherFileError {
    /// Missing, not a regular file, too large, or unreadable: the reason.
    Unreadable(String),
    /// Its bytes are not UTF-8.
    NotUtf8,
    /// GitHub would refuse it: where in the file, and why.
    Refused(MatcherError),
}

/// Reads the matcher file at `path`; `source` names it in the parser's messages. Returns its
/// text (what a cache key hashes) and its matchers.
pub fn read_matcher_file(
    path: &Path,
    source: &str,
) -> Result<(String, MatcherSet), MatcherFileError> {
    let bytes = crate::file::read_bounded(path, crate::file::MAX_CONFIG_BYTES)
        .map_err(|error| MatcherFileError::Unreadable(error.reason()))?;
    let text = String::from_utf8(bytes).map_err(|_| MatcherFileError::NotUtf8)?;
    let set = MatcherSet::parse(source, &text).map_err(MatcherFileError::Refused)?;
    Ok((text, set))
}
