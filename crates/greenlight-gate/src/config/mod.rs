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
mod home;
mod lines;
mod matcher_file;
mod relocate;
mod snapshot;
pub(crate) mod v2;
mod validate;

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

pub use error::{ConfigError, ConfigErrorKind, ConfigErrors};
pub use home::{
    COMMANDMATE_DIR, FILE_NAME, GREENLIGHT_DIR, Home, Located, MOVE_COMMAND, locate, root_of,
};
pub use matcher_file::{MatcherFileError, read_matcher_file};
pub use relocate::{MoveError, Moved, move_to_greenlight_home};
pub use snapshot::Snapshot;
pub use v2::{GATE_KEYS_V2, MAX_JOBS, OPTIONS_KEYS_V2};

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

/// A loaded verify.yaml of either version: the part both versions share (dereferences to
/// [`Config`]) and, for a version 2 file, what only v2 has.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Gates and options as v1 knows them (for v2, the same keys with the same meaning).
    pub config: Config,
    /// `Some` for a `version: 2` file.
    pub v2: Option<V2>,
}

impl std::ops::Deref for Loaded {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.config
    }
}

impl std::ops::DerefMut for Loaded {
    fn deref_mut(&mut self) -> &mut Config {
        &mut self.config
    }
}

impl Loaded {
    /// 1 or 2.
    pub fn version(&self) -> u8 {
        if self.v2.is_some() { 2 } else { 1 }
    }

    /// The v2 settings of gate `index` (defaults for a v1 file: no needs, whole workspace, no
    /// cache).
    pub fn gate_v2(&self, index: usize) -> Option<&GateV2> {
        self.v2.as_ref().and_then(|v2| v2.gates.get(index))
    }

    /// How many gates may run at once: 1 for v1 (CommandMate runs them in order).
    pub fn jobs(&self) -> usize {
        match &self.v2 {
            None => 1,
            Some(v2) => v2.options.jobs.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
            }),
        }
    }

    /// Whether results may be replayed from the local cache (never for v1).
    pub fn cache(&self) -> CacheMode {
        self.v2
            .as_ref()
            .map_or(CacheMode::Off, |v2| v2.options.cache)
    }
}

/// What a version 2 file adds, gate by gate (same order as [`Config::gates`]) and in options.
#[derive(Debug, Clone, Default)]
pub struct V2 {
    /// Per gate, in the order of `Config::gates`.
    pub gates: Vec<GateV2>,
    /// The options only v2 has.
    pub options: OptionsV2,
}

/// The keys a v2 gate may add.
#[derive(Debug, Clone)]
pub struct GateV2 {
    /// Ids of gates that must pass before this one starts.
    pub needs: Vec<String>,
    /// Globs (relative to the worktree) of what the gate reads; empty: the whole workspace.
    pub inputs: Vec<String>,
    /// Environment variables passed through and part of the cache key.
    pub env: Vec<String>,
    /// Commands whose output is part of the cache key.
    pub keys: Vec<String>,
    /// Whether this gate's result may be cached (`cache: false` opts out).
    pub cache: bool,
    /// Problem matcher files (resolved path, text), in the order written.
    pub matchers: Vec<(Utf8PathBuf, String)>,
    /// The matchers of those files, merged.
    pub matcher_set: greenlight_digest::matchers::MatcherSet,
    /// Where the gate runs: here, or on the remote cluster of `options.remote`.
    pub run: RunOn,
}

impl Default for GateV2 {
    fn default() -> Self {
        GateV2 {
            needs: Vec::new(),
            inputs: Vec::new(),
            env: Vec::new(),
            keys: Vec::new(),
            cache: true,
            matchers: Vec::new(),
            matcher_set: greenlight_digest::matchers::MatcherSet::default(),
            run: RunOn::Local,
        }
    }
}

/// The options only v2 has.
#[derive(Debug, Clone, Default)]
pub struct OptionsV2 {
    /// Gates run at once; `None`: the number of CPUs.
    pub jobs: Option<usize>,
    /// `local` (default) or `off`.
    pub cache: CacheMode,
    /// Commands whose output is part of every gate's cache key.
    pub keys: Vec<String>,
    /// A Remote Execution API cluster: a shared result cache and remote runs.
    pub remote: Option<RemoteOptions>,
}

/// Where a v2 gate runs (`run:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunOn {
    /// Here, in the worktree (the default).
    #[default]
    Local,
    /// On a worker of the `options.remote` cluster, through its Execution service.
    Remote,
}

/// `options.remote`: a cluster speaking the Remote Execution API v2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// `http://host:port` or `https://host:port` (`grpc://` and `grpcs://` are read as those).
    pub endpoint: String,
    /// The REAPI instance name; empty by default.
    pub instance: String,
    /// How the cluster's action cache is used.
    pub cache: RemoteCache,
    /// Platform properties every gate's action carries (matched against workers' properties).
    pub platform: BTreeMap<String, String>,
    /// A file holding a bearer token sent with every call (resolved against the config's
    /// directory).
    pub token_file: Option<Utf8PathBuf>,
    /// A PEM file of the CA that signed the cluster's certificate (`https` only).
    pub ca_file: Option<Utf8PathBuf>,
}

/// `options.remote.cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteCache {
    /// Look results up before running; publish local results after (the default).
    #[default]
    Shared,
    /// Look results up, never publish (machines that may read but not write the cache).
    SharedRead,
    /// Neither: the cluster only runs `run: remote` gates.
    Off,
}

/// Where gate results may be replayed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheMode {
    /// The per-user cache under `$XDG_CACHE_HOME/greenlight`.
    #[default]
    Local,
    /// Never replay, never store.
    Off,
}

/// Whether `text` declares `version: 2` as its first key (comments and blank lines before it
/// allowed), which selects the YAML reader.
pub fn is_v2(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "---" {
            continue;
        }
        let Some(rest) = line.strip_prefix("version:") else {
            return false;
        };
        let value = rest.split(" #").next().unwrap_or("").trim();
        return matches!(value, "2" | "\"2\"" | "'2'");
    }
    false
}

/// The v1 reader knows only version 1 (its errors are CommandMate's contract); greenlight's
/// home also reads version 2, so there the message says why a `version: 2` further down was
/// not seen, and in CommandMate's it says where version 2 belongs.
fn name_the_versions(home: Home, mut errors: ConfigErrors) -> ConfigErrors {
    for error in &mut errors.0 {
        if let ConfigErrorKind::BadVersion { found } = &error.kind {
            let two = found.trim_matches(['"', '\'']) == "2";
            error.kind = match (home, two) {
                (Home::CommandMate, true) => ConfigErrorKind::VersionTwoOutsideGreenlightHome,
                (Home::CommandMate, false) => continue,
                (Home::Greenlight, true) => ConfigErrorKind::VersionTwoNotFirst,
                (Home::Greenlight, false) => ConfigErrorKind::UnknownVersion {
                    found: found.clone(),
                },
            };
        }
    }
    errors
}

/// Parses the text of a verify.yaml by the rules of its home ([`Home::of`] its path): in
/// greenlight's home `version: 2` as the first key selects v2 and anything else is read as v1;
/// everywhere else the file is read exactly as CommandMate reads it, version 1 only.
pub fn parse(path: &Utf8Path, text: &str) -> Result<Loaded, ConfigErrors> {
    parse_reading(path, text, &|full: &Utf8Path| {
        read_matcher_file(full.as_std_path(), full.as_str())
    })
}

/// [`parse`], with the matcher files a v2 gate names read by `read_matchers` (given each
/// file's resolved path) instead of from disk.
fn parse_reading(
    path: &Utf8Path,
    text: &str,
    read_matchers: v2::MatcherReader<'_>,
) -> Result<Loaded, ConfigErrors> {
    let home = Home::of(path.as_std_path());
    if !(home.reads_v2() && is_v2(text)) {
        if home == Home::CommandMate && is_v2(text) {
            // The rest of a v2 file is not v1; CommandMate stops at the version, and so does this.
            return Err(ConfigErrors(vec![ConfigError {
                path: path.to_owned(),
                line: first_key_line(text),
                kind: ConfigErrorKind::VersionTwoOutsideGreenlightHome,
            }]));
        }
        return parse_v1(path, text)
            .map(|config| Loaded { config, v2: None })
            .map_err(|errors| name_the_versions(home, errors));
    }
    match v2::parse(path, text, read_matchers) {
        Ok((config, v2)) => Ok(Loaded {
            config,
            v2: Some(v2),
        }),
        Err(problems) => Err(ConfigErrors(
            problems
                .into_iter()
                .map(|(line, column, message)| ConfigError {
                    path: path.to_owned(),
                    line: Some(line),
                    kind: ConfigErrorKind::V2 { column, message },
                })
                .collect(),
        )),
    }
}

/// The 1-based line of the first key (what [`is_v2`] reads).
fn first_key_line(text: &str) -> Option<usize> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines()
        .position(|line| {
            let trimmed = line.trim();
            !(trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "---")
        })
        .map(|index| index + 1)
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

/// Reads and parses a v1 verify.yaml, exactly as CommandMate does (a `version: 2` file is
/// refused here; [`load_any`] reads both). A missing, unreadable or non-UTF-8 file is one
/// [`ConfigError`] naming the path.
pub fn load(path: &Utf8Path) -> Result<Config, ConfigErrors> {
    let text = read_text(path)?;
    parse_v1(path, &text)
}

/// Reads and parses a verify.yaml by the rules of its home ([`parse`]): what `greenlight
/// verify`, the hook, the goal loop and the MCP server read.
pub fn load_any(path: &Utf8Path) -> Result<Loaded, ConfigErrors> {
    let text = read_text(path)?;
    parse(path, &text)
}

/// The text of a verify.yaml, read as [`load`] and [`load_any`] read it (bounded, regular files
/// only, UTF-8), for a caller that needs the text as well as what it means.
pub fn read_text(path: &Utf8Path) -> Result<String, ConfigErrors> {
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
    Ok(text)
}
