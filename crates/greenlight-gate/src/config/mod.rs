//! verify.yaml version 1: the gates and options exactly as CommandMate's own runner reads them.
//!
//! The rule: accept only what CommandMate's strict line-based reader accepts, never more, and
//! report every problem of a file at once, each with its line. v1 is a line grammar, not YAML:
//! one `key: value` per line, 2-space indentation, no tabs, `#` comments only as whole lines,
//! values split at the first colon and taken literally (one pair of surrounding quotes removed,
//! no escapes). A file outside that grammar is refused rather than guessed at, because a guess
//! that drops a gate reports green for work nobody checked.
//!
//! Reading happens in two passes: `lines` turns text into keys with line numbers and checks
//! the shape of each line; `validate` checks what the values mean. Both push every problem
//! they find and carry on.
//!
//! Where CommandMate's reader accepts a file by accident of its encoding, this reader refuses
//! it, because a YAML loader (CommandMate's other runner) would read it differently:
//! a repeated `gates:`/`options:` header or options key, a quoted empty value (`""`), and
//! integers too large for the runner's shell arithmetic.

pub mod edit;
mod error;
mod lines;
mod validate;

use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

pub use error::{ConfigError, ConfigErrorKind, ConfigErrors};

/// Timeout of a gate that declares no `timeoutSec`, in seconds (CommandMate's default).
pub const DEFAULT_TIMEOUT_SEC: u32 = 600;
/// Largest `timeoutSec` v1 allows: two hours (CommandMate's limit).
pub const MAX_TIMEOUT_SEC: u32 = 7200;
/// Log tail kept per failed gate when `maxLogTailBytes` is not given (CommandMate's default).
pub const DEFAULT_MAX_LOG_TAIL_BYTES: usize = 8192;
/// Largest `maxLogTailBytes` v1 allows: 1 MiB (CommandMate's limit).
pub const MAX_LOG_TAIL_BYTES: usize = 1_048_576;
/// Longest `mutex` name, in characters. CommandMate turns the name into a lock directory
/// `<root>/<name>.lock`, so the limit keeps it a short, safe path segment.
pub const MAX_MUTEX_LEN: usize = 64;
/// Longest `command`, in bytes. Linux refuses to start a program with any single argument of
/// 32 pages (131072 bytes) or more, counting its terminating NUL (`MAX_ARG_STRLEN`), and the
/// command is one argument of `/bin/sh -c`.
pub const MAX_COMMAND_BYTES: usize = 131_071;
/// Gate ids that name the runner's built-in gates and so may not name a user's gate.
pub const RESERVED_IDS: &[&str] = &["work-evidence", "scope", "env-clean"];
/// Every key a gate may carry.
pub const GATE_KEYS: &[&str] = &[
    "id",
    "command",
    "timeoutSec",
    "mutex",
    "retryOnFail",
    "flakyIsPass",
];
/// Every key `options:` may carry.
pub const OPTIONS_KEYS: &[&str] = &[
    "baseRef",
    "skipInPrimaryCheckout",
    "maxLogTailBytes",
    "requireCommit",
    "requireEnvClean",
];

/// A valid v1 config: the gates in file order and the options with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Config {
    /// The file it was read from.
    #[serde(serialize_with = "serialize_path")]
    pub path: Utf8PathBuf,
    /// The gates, in the order they run.
    pub gates: Vec<GateSpec>,
    /// The options (defaults for every key not written).
    pub options: Options,
}

/// One declared gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateSpec {
    /// Its name, unique in the file: `^[a-z0-9][a-z0-9-]{0,31}$`, not a reserved id.
    pub id: String,
    /// The shell command, exactly as written (quotes around the whole value removed).
    pub command: String,
    /// Seconds the command may run; also how long it may wait for its mutex. 1..=7200.
    pub timeout_sec: u32,
    /// Machine-wide lock name: gates with the same name never run at the same time.
    pub mutex: Option<String>,
    /// Re-run once after a failure, to tell FLAKY from FAIL.
    pub retry_on_fail: bool,
    /// Count a FLAKY outcome as a pass (only meaningful with `retry_on_fail`).
    pub flaky_is_pass: bool,
    /// 1-based line of the gate's `- ` item, for messages that point back into the file.
    pub line: usize,
}

/// The `options:` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Options {
    /// Ref that work-evidence counts commits from; `None` means resolve `origin/HEAD` at run time.
    pub base_ref: Option<String>,
    /// Run no command gate in the primary checkout (only in linked worktrees).
    pub skip_in_primary_checkout: bool,
    /// Bytes of a failed gate's output shown as its tail; 0 disables the tail.
    pub max_log_tail_bytes: usize,
    /// work-evidence requires a commit, not just uncommitted changes.
    pub require_commit: bool,
    /// Report the built-in env-clean gate (which needs a baseline this runner does not have).
    pub require_env_clean: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            base_ref: None,
            skip_in_primary_checkout: true,
            max_log_tail_bytes: DEFAULT_MAX_LOG_TAIL_BYTES,
            require_commit: false,
            require_env_clean: false,
        }
    }
}

fn serialize_path<S: serde::Serializer>(
    path: &Utf8PathBuf,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(path.as_str())
}

/// Parses the text of a v1 verify.yaml. `path` only labels the config and its errors.
///
/// Returns every problem of the file, in line order, or the config when there is none.
pub fn parse_v1(path: &Utf8Path, text: &str) -> Result<Config, ConfigErrors> {
    let (raw, mut problems) = lines::read(text);
    let (gates, options) = validate::interpret(&raw, &mut problems);
    if problems.is_empty() {
        return Ok(Config {
            path: path.to_owned(),
            gates,
            options,
        });
    }
    // Stable: problems on one line keep the order they were found in; whole-file ones go last.
    problems.sort_by_key(|(line, _)| (line.is_none(), *line));
    Err(ConfigErrors(
        problems
            .into_iter()
            .map(|(line, kind)| ConfigError {
                path: path.to_owned(),
                line,
                kind,
            })
            .collect(),
    ))
}

/// Reads and parses a v1 verify.yaml. A missing, unreadable or non-UTF-8 file is one
/// [`ConfigError`] naming the path.
pub fn load(path: &Utf8Path) -> Result<Config, ConfigErrors> {
    let one = |line: Option<usize>, kind: ConfigErrorKind| {
        ConfigErrors(vec![ConfigError {
            path: path.to_owned(),
            line,
            kind,
        }])
    };
    // Bounded and non-blocking: a FIFO or a symlink to /dev/zero in a cloned repository must
    // be refused, not hang or exhaust memory.
    let bytes = match crate::file::read_bounded(path.as_std_path(), crate::file::MAX_CONFIG_BYTES) {
        Ok(bytes) => bytes,
        Err(error) if error.is_not_found() => {
            return Err(one(None, ConfigErrorKind::NotFound));
        }
        Err(error) => {
            return Err(one(
                None,
                ConfigErrorKind::Unreadable {
                    reason: error.reason(),
                },
            ));
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            let offset = error.utf8_error().valid_up_to();
            let before = error.as_bytes().get(..offset).unwrap_or_default();
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            return Err(one(Some(line), ConfigErrorKind::NotUtf8 { offset }));
        }
    };
    parse_v1(path, &text)
}
