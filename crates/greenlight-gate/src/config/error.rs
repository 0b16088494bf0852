//! What can be wrong with a verify.yaml, one variant per mistake a user can make.
//!
//! A message reads after `path:line:` and names the key, the value found and what is allowed, so
//! the user can fix the file without opening the documentation.

use std::fmt;

use camino::Utf8PathBuf;

use super::{
    DEFAULT_MAX_LOG_TAIL_BYTES, GATE_KEYS, MAX_COMMAND_BYTES, MAX_LOG_TAIL_BYTES, MAX_MUTEX_LEN,
    MAX_TIMEOUT_SEC, OPTIONS_KEYS, RESERVED_IDS,
};

/// One problem in a config file, located by path and (when it has one) line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The config file the problem is in.
    pub path: Utf8PathBuf,
    /// 1-based line of the offending text; `None` for whole-file problems (missing version, no
    /// gates, unreadable file).
    pub line: Option<usize>,
    /// What is wrong.
    pub kind: ConfigErrorKind,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, &self.kind) {
            (Some(line), ConfigErrorKind::V2 { column, message }) => {
                write!(f, "{}:{line}:{column}: {message}", self.path)
            }
            (Some(line), _) => write!(f, "{}:{}: {}", self.path, line, self.kind),
            (None, _) => write!(f, "{}: {}", self.path, self.kind),
        }
    }
}

impl std::error::Error for ConfigError {}

/// All problems of one file, in line order (whole-file problems last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// How many problems the file has.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there is no problem (never the case for a returned `Err`).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, in line order.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Lists allowed keys in messages, so the list can never drift from the parser's.
struct KeyList(&'static [&'static str]);

impl fmt::Display for KeyList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(", "))
    }
}

/// The thing a user got wrong. Messages are short and exact: they name the key, quote the value
/// found, and say what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigErrorKind {
    // --- the file itself -------------------------------------------------------------------
    /// The file does not exist.
    #[error("config file not found; create it or point to an existing file")]
    NotFound,
    /// The file exists but could not be read.
    #[error("cannot read the config file ({reason}); check that it is a readable regular file")]
    Unreadable {
        /// The operating system's explanation.
        reason: String,
    },
    /// The file is not UTF-8.
    #[error("byte {offset} is not valid UTF-8; save the file as UTF-8")]
    NotUtf8 {
        /// 0-based byte offset of the first invalid byte in the file.
        offset: usize,
    },
    /// The file starts with a UTF-8 byte order mark, which the line-based v1 format rejects.
    #[error("the file starts with a byte order mark; save it as UTF-8 without one")]
    ByteOrderMark,

    /// A problem in a version 2 file, at a line and column; the message names the key, the
    /// value found and what is allowed.
    #[error("{message}")]
    V2 {
        /// 1-based column of the offending node.
        column: usize,
        /// What is wrong and what to do.
        message: String,
    },

    // --- line shape ------------------------------------------------------------------------
    /// A tab character anywhere on a line.
    #[error("tab characters are not allowed: v1 allows spaces only (2 per level)")]
    Tab,
    /// Leading spaces not a multiple of 2.
    #[error("indentation must be a multiple of 2 spaces, found {spaces}")]
    OddIndentation {
        /// Leading spaces found.
        spaces: usize,
    },
    /// An indentation level that has no meaning where it appears.
    #[error(
        "unexpected indentation of {spaces} spaces; top-level keys use 0, gate items and \
         options keys 2, gate keys 4"
    )]
    UnexpectedIndentation {
        /// Leading spaces found.
        spaces: usize,
    },
    /// An indented line under `version:` or at the top of the file.
    #[error("indented line `{found}` is not under `gates:` or `options:`")]
    IndentedOutsideSection {
        /// The line's text without its indentation.
        found: String,
    },
    /// A line that should be `key: value` is not (no colon, or the key is not a plain word).
    #[error("expected `key: value` {place}, found `{found}`")]
    ExpectedKeyValue {
        /// Where the line is (`at the top level`, `in a gate`, `under options:`).
        place: &'static str,
        /// The line's text without its indentation.
        found: String,
    },

    // --- top level -------------------------------------------------------------------------
    /// A top-level key other than version, gates, options.
    #[error("unknown top-level key `{key}`; allowed: version, gates, options")]
    UnknownTopLevelKey {
        /// The key found.
        key: String,
    },
    /// `version` is not 1.
    #[error("version must be 1, found `{found}`")]
    BadVersion {
        /// The value as written.
        found: String,
    },
    /// `version: 2` in CommandMate's home (or any file outside `.greenlight/`), which CommandMate
    /// refuses: version 2 is greenlight's format and lives in greenlight's own home.
    #[error(
        "version must be 1, found `2`: this file is read as CommandMate reads it, and version 2 is greenlight's own format, read only from .greenlight/verify.yaml; run `greenlight config move` to move .commandmate/verify.yaml there (or put a version 2 file in a .greenlight directory)"
    )]
    VersionTwoOutsideGreenlightHome,
    /// `version` is 2 but not the file's first key, so the file was read as version 1.
    #[error(
        "`version: 2` is read only as the file's first key (comments may precede it); this file was read as version 1: move `version: 2` to the top"
    )]
    VersionTwoNotFirst,
    /// A `version` greenlight has no reader for.
    #[error(
        "`version` must be 1 (CommandMate's format) or 2 (greenlight's, as the first key; docs/verify-v2.md), found `{found}`"
    )]
    UnknownVersion {
        /// The value as written.
        found: String,
    },
    /// `version` appears twice.
    #[error("`version` is declared again (first on line {first_line}); keep one")]
    DuplicateVersion {
        /// Line of the first declaration.
        first_line: usize,
    },
    /// `gates:` or `options:` appears twice.
    #[error("`{key}:` is declared again (first on line {first_line}); merge the two")]
    DuplicateSection {
        /// `gates` or `options`.
        key: &'static str,
        /// Line of the first declaration.
        first_line: usize,
    },
    /// `gates:` or `options:` with something after the colon.
    #[error(
        "`{key}:` must end its line, with its entries indented below it; found `{found}` after it"
    )]
    SectionHasValue {
        /// `gates` or `options`.
        key: &'static str,
        /// The text after the colon.
        found: String,
    },
    /// No `version` line in the file.
    #[error("missing top-level `version: 1` line; add it at the top of the file")]
    MissingVersion,
    /// No gate item in the file.
    #[error(
        "no gates are defined; add `gates:` with at least one `- id: …` item and its `command`"
    )]
    NoGates,

    // --- gates -----------------------------------------------------------------------------
    /// A line at indentation 2 under `gates:` that does not open an item.
    #[error("a gate item must start with `- `, found `{found}`")]
    GateItemWithoutDash {
        /// The line's text without its indentation.
        found: String,
    },
    /// A gate key at indentation 4 before any `- ` item.
    #[error("gate key line `{found}` comes before any `- ` item under `gates:`")]
    GateKeyOutsideItem {
        /// The line's text without its indentation.
        found: String,
    },
    /// A key gates do not have.
    #[error("unknown gate key: {key}; allowed: {}", KeyList(GATE_KEYS))]
    UnknownGateKey {
        /// The key found.
        key: String,
    },
    /// A gate key given twice in one gate.
    #[error("gate key `{key}` is given again in the same gate (first on line {first_line})")]
    DuplicateGateKey {
        /// The key.
        key: &'static str,
        /// Line of the first occurrence.
        first_line: usize,
    },
    /// A gate item without `id`.
    #[error("gate is missing id: add `id: <name>`")]
    MissingId,
    /// A gate item without `command`.
    #[error("gate is missing command: add `command: <shell command>`")]
    MissingCommand,
    /// `id` is one of the names the runner uses for its own gates.
    #[error(
        "gate id is reserved: {id} (the built-in gates are {}); choose another name",
        KeyList(RESERVED_IDS)
    )]
    ReservedId {
        /// The id found.
        id: String,
    },
    /// `id` does not match `^[a-z0-9][a-z0-9-]{0,31}$`.
    #[error(
        "invalid gate id: {id}; use 1 to 32 characters of a-z, 0-9 and `-`, not starting \
         with `-`"
    )]
    InvalidId {
        /// The id found.
        id: String,
    },
    /// Two gates share an `id`.
    #[error("duplicate gate id: {id} (already used by the gate on line {first_line})")]
    DuplicateId {
        /// The id found.
        id: String,
        /// Line of the first gate's `id`.
        first_line: usize,
    },
    /// `command` holds a NUL byte, which no program argument can carry.
    #[error(
        "`command` holds a NUL byte (byte {offset} of the value), which no command line can \
         carry; remove it"
    )]
    CommandHasNul {
        /// 1-based byte position of the first NUL in the value.
        offset: usize,
    },
    /// `command` is longer than the operating system lets one argument be.
    #[error(
        "`command` is {len} bytes long; the operating system starts no command longer than \
         {MAX_COMMAND_BYTES} bytes. Move it into a script and run that"
    )]
    CommandTooLong {
        /// The value's length in bytes.
        len: usize,
    },
    /// `timeoutSec` is not a plain decimal integer.
    #[error(
        "timeoutSec must be an integer number of seconds from 1 to {MAX_TIMEOUT_SEC}, found `{found}`"
    )]
    TimeoutNotInteger {
        /// The value found (unquoted).
        found: String,
    },
    /// `timeoutSec` is an integer outside 1..=7200.
    #[error("timeoutSec must be 1..{MAX_TIMEOUT_SEC} (seconds), found `{found}`")]
    TimeoutOutOfRange {
        /// The value found (unquoted).
        found: String,
    },
    /// `mutex` is longer than 64 characters.
    #[error("mutex must be at most {MAX_MUTEX_LEN} characters, found {len}: `{found}`")]
    MutexTooLong {
        /// The value found (unquoted).
        found: String,
        /// Its length in characters.
        len: usize,
    },
    /// `mutex` uses characters outside `A-Za-z0-9_.-`.
    #[error("invalid mutex name: {found}; use only A-Z, a-z, 0-9, `_`, `.` and `-`")]
    InvalidMutex {
        /// The value found (unquoted).
        found: String,
    },
    /// `retryOnFail` is not an integer.
    #[error("retryOnFail must be 0 or 1, found `{found}`")]
    RetryNotInteger {
        /// The value found (unquoted).
        found: String,
    },
    /// `retryOnFail` is an integer other than 0 or 1.
    #[error("retryOnFail must be 0 or 1 (a gate is re-run at most once), found `{found}`")]
    RetryOutOfRange {
        /// The value found (unquoted).
        found: String,
    },
    /// `flakyIsPass` is not exactly `true` or `false`.
    #[error("flakyIsPass must be true or false, found `{found}`")]
    FlakyNotBoolean {
        /// The value found (unquoted).
        found: String,
    },
    /// `flakyIsPass: true` on a gate that is never re-run, so it could never be FLAKY.
    #[error(
        "flakyIsPass: true requires retryOnFail: 1 in the same gate; without a re-run the gate \
         can never be FLAKY"
    )]
    FlakyWithoutRetry,

    // --- options ---------------------------------------------------------------------------
    /// A key `options:` does not have.
    #[error("unknown options key: {key}; allowed: {}", KeyList(OPTIONS_KEYS))]
    UnknownOptionsKey {
        /// The key found.
        key: String,
    },
    /// An options key given twice.
    #[error("options key `{key}` is given again (first on line {first_line}); keep one")]
    DuplicateOptionsKey {
        /// The key.
        key: &'static str,
        /// Line of the first occurrence.
        first_line: usize,
    },
    /// A boolean option that is not exactly `true` or `false`.
    #[error("options.{key} must be true or false, found `{found}`")]
    OptionNotBoolean {
        /// skipInPrimaryCheckout, requireCommit or requireEnvClean.
        key: &'static str,
        /// The value found (unquoted).
        found: String,
    },
    /// `maxLogTailBytes` is not a plain decimal integer.
    #[error(
        "`options.maxLogTailBytes` must be an integer number of bytes from 0 to \
         {MAX_LOG_TAIL_BYTES} (default {DEFAULT_MAX_LOG_TAIL_BYTES}), found `{found}`"
    )]
    MaxLogTailNotInteger {
        /// The value found (unquoted).
        found: String,
    },
    /// `maxLogTailBytes` is above 1048576.
    #[error("`options.maxLogTailBytes` must be from 0 to {MAX_LOG_TAIL_BYTES}, found `{found}`")]
    MaxLogTailOutOfRange {
        /// The value found (unquoted).
        found: String,
    },

    // --- values ----------------------------------------------------------------------------
    /// `key:` with nothing after it, or a quoted empty string.
    #[error("`{key}` has an empty value; give it a value or remove the line")]
    EmptyValue {
        /// The key.
        key: String,
    },
    /// A value starting with `&` or `*`.
    #[error("`{key}`: anchors/aliases are not supported in v1 (YAML `&`, `*`), found `{found}`")]
    AnchorOrAlias {
        /// The key.
        key: String,
        /// The value as written.
        found: String,
    },
    /// A value starting with `[` or `{`.
    #[error(
        "`{key}`: flow-style values are not supported in v1 (`[…]`, `{{…}}`), found `{found}`; \
         quote the value if it is a string"
    )]
    FlowStyle {
        /// The key.
        key: String,
        /// The value as written.
        found: String,
    },
    /// A value that opens a block scalar (`|`, `>`, with optional indicators).
    #[error(
        "`{key}`: block scalars are not supported in v1 (`|`, `>`), found `{found}`; write the \
         value on one line"
    )]
    BlockScalar {
        /// The key.
        key: String,
        /// The value as written.
        found: String,
    },
}
