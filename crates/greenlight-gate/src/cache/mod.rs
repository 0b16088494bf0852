//! The result cache of version 2 gates: what a gate's key is made of, and why a gate ran
//! instead of replaying.
//!
//! A gate's key is BLAKE3 over: the content of its inputs (the workspace listing — every
//! tracked and untracked-not-ignored file by content, as the workspace key reads it — narrowed
//! to the gate's `inputs` globs), its command, its settings (timeout, retry, flaky rule, tail
//! size, the directory it runs in relative to the worktree), the values of its declared `env`
//! variables, the outputs of its `keys` commands and of `options.keys`, its matcher files, and
//! greenlight's version. HEAD is not in it: a commit that changes no byte of a gate's inputs
//! replays its result (a gate that reads history says so with `keys: [git rev-parse HEAD]`).
//!
//! What stays out: files git ignores, files outside the worktree, the network, the clock, and
//! every variable not declared. docs/cache.md says so to users.

mod store;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

pub use store::{DEFAULT_MAX_BYTES, Entry, Stats, Store, StoredAttempt, created_now};

use crate::config::{GateSpec, GateV2};
use crate::workspace_key::{ListedFile, Listing};

/// Bumped when the key's recipe changes, so older entries are never read as current.
const RECIPE: &str = "greenlight-gate-cache 1";

/// Where the cache lives and what this run does with it.
#[derive(Debug, Clone)]
pub struct CacheSettings {
    /// The cache directory (`$XDG_CACHE_HOME/greenlight`, never in a worktree).
    pub dir: PathBuf,
    /// The per-user MAC key (0600, in the state directory).
    pub key_file: PathBuf,
    /// The bound of the whole cache.
    pub max_bytes: u64,
    /// `--no-cache`: run every gate, and store the fresh results.
    pub refresh: bool,
    /// `--explain`: say per gate why it ran or replayed.
    pub explain: bool,
}

impl CacheSettings {
    /// The default places: `$GREENLIGHT_CACHE_DIR`, else `$XDG_CACHE_HOME/greenlight`, else
    /// `~/.cache/greenlight`; the key file `cache.key` in `state_dir`. `None` when no directory
    /// can be chosen (no HOME), which turns the cache off.
    pub fn locate(
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
        state_dir: &Path,
    ) -> Option<Self> {
        let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = set("GREENLIGHT_CACHE_DIR")
            .or_else(|| {
                set("XDG_CACHE_HOME")
                    .filter(|p| p.is_absolute())
                    .map(|p| p.join("greenlight"))
            })
            .or_else(|| set("HOME").map(|h| h.join(".cache").join("greenlight")))?;
        Some(CacheSettings {
            dir,
            key_file: state_dir.join("cache.key"),
            max_bytes: DEFAULT_MAX_BYTES,
            refresh: false,
            explain: false,
        })
    }

    /// Opens the store these settings name.
    pub fn open(&self) -> Result<Store, String> {
        Store::open(&self.dir, &self.key_file, self.max_bytes)
    }
}

/// Checks one `inputs` glob: relative to the worktree, no `..`, a glob the matcher accepts. A
/// leading `!` excludes what it matches.
pub fn check_input_glob(glob: &str) -> Result<(), String> {
    let body = glob.strip_prefix('!').unwrap_or(glob);
    if body.is_empty() {
        return Err("it is empty".into());
    }
    if body.starts_with('/') {
        return Err("inputs are relative to the worktree; remove the leading `/`".into());
    }
    if body.split('/').any(|part| part == "..") {
        return Err("inputs cannot leave the worktree (`..`); declare files inside it".into());
    }
    compile(body).map(|_| ())
}

fn compile(glob: &str) -> Result<globset::Glob, String> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| e.kind().to_string())
}

/// A gate's inputs as a matcher: included by any positive glob and by no `!` glob.
struct Inputs {
    include: GlobSet,
    exclude: GlobSet,
}

impl Inputs {
    fn new(globs: &[String]) -> Result<Inputs, String> {
        let mut include = GlobSetBuilder::new();
        let mut exclude = GlobSetBuilder::new();
        for glob in globs {
            match glob.strip_prefix('!') {
                Some(body) => exclude.add(compile(body)?),
                None => include.add(compile(glob)?),
            };
            // A directory named as itself (`src`) means everything under it, as users expect.
            if !glob.contains(['*', '?', '[', '{']) {
                let under = format!("{}/**", glob.trim_start_matches('!').trim_end_matches('/'));
                match glob.strip_prefix('!') {
                    Some(_) => exclude.add(compile(&under)?),
                    None => include.add(compile(&under)?),
                };
            }
        }
        Ok(Inputs {
            include: include.build().map_err(|e| e.to_string())?,
            exclude: exclude.build().map_err(|e| e.to_string())?,
        })
    }

    fn matches(&self, path: &[u8]) -> bool {
        self.matches_candidate(&globset::Candidate::new(Path::new(OsStr::from_bytes(path))))
    }

    fn matches_candidate(&self, path: &globset::Candidate<'_>) -> bool {
        self.include.is_match_candidate(path) && !self.exclude.is_match_candidate(path)
    }
}

/// Everything a gate's key was made of, kept so the next run can say what differs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct KeyParts {
    /// The command.
    pub command: String,
    /// Timeout, retry, flaky rule, tail size, directory.
    pub settings: String,
    /// Declared variable → hash of its value (`unset` when absent); values are never kept.
    pub env: BTreeMap<String, String>,
    /// Key command → hash of its output.
    pub keys: BTreeMap<String, String>,
    /// Hash of the matcher files.
    pub matchers: String,
    /// Hash of the inputs' listing.
    pub inputs_hash: String,
    /// Input path → id, kept only for explaining (filled when a record is written).
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
}

/// A gate's key and its parts.
#[derive(Debug, Clone)]
pub struct GateKey {
    /// The key, hex.
    pub key: String,
    /// What it was made of.
    pub parts: KeyParts,
}

fn hash_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// What one verify run computes once for all gates' keys.
pub struct KeyContext<'a> {
    /// The workspace listing.
    pub listing: &'a Listing,
    /// Where the gates run, relative to the worktree's top (`.` at the top).
    pub cwd_in_worktree: &'a str,
    /// Output hash of every key command (gate `keys` and `options.keys`).
    pub key_outputs: &'a HashMap<String, String>,
    /// `options.keys`.
    pub option_keys: &'a [String],
    /// `maxLogTailBytes`, which shapes the stored output.
    pub tail_bytes: usize,
    /// Hash of the whole listing, for gates without `inputs`.
    whole_listing: String,
    /// Every listed path prepared once for glob matching (each gate with `inputs` tests them
    /// all; preparing a path per gate was most of a replay's own time on 20,000 files).
    candidates: Vec<globset::Candidate<'a>>,
}

impl<'a> KeyContext<'a> {
    /// The context of one listing of the worktree; the hash of the whole listing (every gate
    /// without `inputs` shares it) is computed here, once.
    pub fn new(
        listing: &'a Listing,
        cwd_in_worktree: &'a str,
        key_outputs: &'a HashMap<String, String>,
        option_keys: &'a [String],
        tail_bytes: usize,
    ) -> Self {
        KeyContext {
            listing,
            cwd_in_worktree,
            key_outputs,
            option_keys,
            tail_bytes,
            whole_listing: files_hash(listing.entries.iter()),
            candidates: listing
                .entries
                .iter()
                .map(|f| globset::Candidate::new(Path::new(OsStr::from_bytes(&f.path))))
                .collect(),
        }
    }
}

/// The hash of some files of a listing.
fn files_hash<'a>(files: impl Iterator<Item = &'a ListedFile>) -> String {
    let mut hasher = blake3::Hasher::new();
    for file in files {
        for part in [file.mode, b" ", &file.id, b"\t", &file.path, b"\0"] {
            hasher.update(part);
        }
    }
    hasher.finalize().to_hex().to_string()
}

/// The indices, in order, of the entries (sorted by path) that gate `v2`'s `inputs` can match:
/// those under one of its literal roots ([`input_roots`]: every path a positive glob matches
/// starts with the part of the glob before its first wildcard), else all. Only a shortcut: the
/// globs still decide each entry, so the files kept are those a test of every entry keeps.
fn candidate_range(entries: &[ListedFile], globs: &[String]) -> impl Iterator<Item = usize> {
    let mut spans: Vec<(usize, usize)> = match roots_of(globs) {
        Some(roots) => roots
            .iter()
            .map(|root| {
                let start = entries.partition_point(|e| e.path.as_slice() < root.as_slice());
                let len = entries[start..]
                    .iter()
                    .take_while(|e| e.path.starts_with(root))
                    .count();
                (start, start + len)
            })
            .collect(),
        None => vec![(0, entries.len())],
    };
    spans.sort_unstable();
    // Overlapping roots (`src`, `src/lib`) give each entry once, in order.
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged.into_iter().flat_map(|(start, end)| start..end)
}

/// The key of `gate` in `context`, reading the declared variables through `env`.
pub fn gate_key(
    context: &KeyContext<'_>,
    gate: &GateSpec,
    v2: &GateV2,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<GateKey, String> {
    let inputs_hash = if v2.inputs.is_empty() {
        context.whole_listing.clone()
    } else {
        let inputs = Inputs::new(&v2.inputs)?;
        let entries = &context.listing.entries;
        files_hash(
            candidate_range(entries, &v2.inputs)
                .filter(|&i| inputs.matches_candidate(&context.candidates[i]))
                .map(|i| &entries[i]),
        )
    };
    let mut parts = KeyParts {
        command: gate.command.clone(),
        settings: format!(
            "timeout={} retry={} flaky={} tail={} cwd={}",
            gate.timeout_sec,
            gate.retry_on_fail,
            gate.flaky_is_pass,
            context.tail_bytes,
            context.cwd_in_worktree
        ),
        inputs_hash,
        ..KeyParts::default()
    };
    for name in &v2.env {
        let value = match env(name) {
            Some(v) => hash_hex(v.as_bytes()),
            None => "unset".to_owned(),
        };
        parts.env.insert(name.clone(), value);
    }
    for command in context.option_keys.iter().chain(&v2.keys) {
        let out = context
            .key_outputs
            .get(command)
            .cloned()
            .unwrap_or_else(|| "not-run".to_owned());
        parts.keys.insert(command.clone(), out);
    }
    let mut matchers = blake3::Hasher::new();
    for (path, text) in &v2.matchers {
        matchers.update(path.as_str().as_bytes());
        matchers.update(b"\0");
        matchers.update(text.as_bytes());
        matchers.update(b"\0");
    }
    parts.matchers = matchers.finalize().to_hex().to_string();

    let mut hasher = blake3::Hasher::new();
    let mut field = |name: &str, value: &str| {
        hasher.update(name.as_bytes());
        hasher.update(b"=");
        hasher.update(&(value.len() as u64).to_le_bytes());
        hasher.update(value.as_bytes());
        hasher.update(b"\n");
    };
    field("recipe", RECIPE);
    field("greenlight", env!("CARGO_PKG_VERSION"));
    field("command", &parts.command);
    field("settings", &parts.settings);
    for (name, value) in &parts.env {
        field(&format!("env {name}"), value);
    }
    for (command, value) in &parts.keys {
        field(&format!("key {command}"), value);
    }
    field("matchers", &parts.matchers);
    field("inputs", &parts.inputs_hash);
    Ok(GateKey {
        key: hasher.finalize().to_hex().to_string(),
        parts,
    })
}

/// The input files of a gate, path → id, for explain records.
pub fn input_map(listing: &Listing, v2: &GateV2) -> BTreeMap<String, String> {
    let inputs = if v2.inputs.is_empty() {
        None
    } else {
        Inputs::new(&v2.inputs).ok()
    };
    listing
        .entries
        .iter()
        .filter(|file| inputs.as_ref().is_none_or(|i| i.matches(&file.path)))
        .map(|file| {
            (
                String::from_utf8_lossy(&file.path).into_owned(),
                String::from_utf8_lossy(&file.id).into_owned(),
            )
        })
        .collect()
}

/// A gate's inputs as a path test (`None` for the whole workspace).
fn inputs_of(v2: &GateV2) -> Result<Option<Inputs>, String> {
    if v2.inputs.is_empty() {
        Ok(None)
    } else {
        Inputs::new(&v2.inputs).map(Some)
    }
}

/// Why gate `v2` cannot be cached against `listing`: one of its inputs cannot be keyed exactly.
pub fn uncacheable(listing: &Listing, v2: &GateV2) -> Option<String> {
    let inputs = inputs_of(v2).ok()?;
    let (path, why) = listing.first_unkeyable(|p| inputs.as_ref().is_none_or(|i| i.matches(p)))?;
    Some(format!(
        "uncacheable for this run: {} cannot be keyed exactly ({why})",
        String::from_utf8_lossy(path)
    ))
}

/// The directories (or files) that hold everything gate `v2` may read, worktree-relative, for
/// a second listing of only those: the part of each `inputs` glob before its first wildcard.
/// `None` when a glob can match anywhere (or there are no `inputs`): list everything.
pub fn input_roots(v2: &GateV2) -> Option<Vec<Vec<u8>>> {
    roots_of(&v2.inputs)
}

/// [`input_roots`] of the globs `inputs`.
fn roots_of(inputs: &[String]) -> Option<Vec<Vec<u8>>> {
    if inputs.is_empty() {
        return None;
    }
    let mut roots = Vec::new();
    for glob in inputs.iter().filter(|g| !g.starts_with('!')) {
        let literal: Vec<&str> = glob
            .trim_end_matches('/')
            .split('/')
            .take_while(|part| !part.contains(['*', '?', '[', '{', '\\']))
            .collect();
        if literal.is_empty() {
            return None;
        }
        roots.push(literal.join("/").into_bytes());
    }
    Some(roots)
}

/// Whether everything gate `v2` depends on in `before` is the same in `after` (taken after the
/// gate): the same paths, and for each the same mode, id and metadata (size, mtime and ctime in
/// nanoseconds, inode), so a file that changed and changed back counts as changed. `Err` says
/// the first difference.
pub fn inputs_unchanged(before: &Listing, after: &Listing, v2: &GateV2) -> Result<(), String> {
    let inputs = inputs_of(v2)?;
    let keep = |p: &[u8]| inputs.as_ref().is_none_or(|i| i.matches(p));
    if let Some((path, why)) = after.first_unkeyable(keep) {
        return Err(format!(
            "{} cannot be keyed exactly ({why})",
            String::from_utf8_lossy(path)
        ));
    }
    let mut old = before.entries.iter().filter(|f| keep(&f.path));
    let mut new = after.entries.iter().filter(|f| keep(&f.path));
    loop {
        match (old.next(), new.next()) {
            (None, None) => return Ok(()),
            (Some(a), Some(b)) if a == b => {}
            (a, b) => {
                let path = a
                    .or(b)
                    .map(|f| String::from_utf8_lossy(&f.path).into_owned());
                return Err(format!("{} changed while it ran", path.unwrap_or_default()));
            }
        }
    }
}

/// The name of a gate's explain record: one per worktree and gate.
pub fn record_name(top: &Path, gate_id: &str) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(top.as_os_str().as_bytes());
    hasher.update(b"\0");
    hasher.update(gate_id.as_bytes());
    format!("{}.json", &hasher.finalize().to_hex()[..32])
}

/// Why a gate with key `now` did not replay, compared with the record of its last stored run.
pub fn explain_miss(
    last: Option<&KeyParts>,
    now: &KeyParts,
    listing: &Listing,
    v2: &GateV2,
) -> String {
    let Some(last) = last else {
        return "no entry: this gate has no stored result for this worktree yet".to_owned();
    };
    let mut why = Vec::new();
    if last.command != now.command {
        why.push("the command changed".to_owned());
    }
    if last.settings != now.settings {
        why.push(format!(
            "settings changed ({} → {})",
            last.settings, now.settings
        ));
    }
    for (name, value) in &now.env {
        if last.env.get(name) != Some(value) {
            why.push(format!("env {name} differs"));
        }
    }
    for (command, value) in &now.keys {
        if last.keys.get(command) != Some(value) {
            why.push(format!("key `{command}` printed something else"));
        }
    }
    if last.matchers != now.matchers {
        why.push("a matcher file changed".to_owned());
    }
    if last.inputs_hash != now.inputs_hash {
        let current = input_map(listing, v2);
        let mut changed = Vec::new();
        for (path, id) in &current {
            match last.inputs.get(path) {
                None => changed.push(format!("+{path}")),
                Some(old) if old != id => changed.push(format!("~{path}")),
                Some(_) => {}
            }
        }
        for path in last.inputs.keys() {
            if !current.contains_key(path) {
                changed.push(format!("-{path}"));
            }
        }
        let text = if changed.is_empty() {
            "inputs differ".to_owned()
        } else {
            let shown: Vec<&str> = changed.iter().take(5).map(String::as_str).collect();
            let more = changed.len() - shown.len();
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("inputs differ: {}{more}", shown.join(" "))
        };
        why.push(text);
    }
    if why.is_empty() {
        // Same parts, other key: the entry was evicted, corrupt, or written by another user.
        return "no usable entry: the last one was evicted, damaged or not written by this user"
            .to_owned();
    }
    why.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut keeps exactly the files a test of every entry keeps, for globs with and
    /// without literal roots, overlapping roots, exclusions, a directory named as itself, and
    /// names that share a root's bytes without being under it (`src/m1x`, `src/m1.txt`).
    #[test]
    fn the_roots_shortcut_keeps_what_testing_every_entry_keeps() {
        let mut paths = vec![
            "README.md",
            "src",
            "src.txt",
            "src/m1",
            "src/m1.txt",
            "src/m1/a.rs",
            "src/m1/b/c.rs",
            "src/m10/a.rs",
            "src/m1x/a.rs",
            "src/m2/a.rs",
            "src/m2/a.txt",
            "src/lib/x.rs",
            "tests/t.rs",
            "z/src/m1/a.rs",
        ];
        paths.sort_unstable();
        let entries: Vec<ListedFile> = paths
            .iter()
            .map(|p| ListedFile {
                path: p.as_bytes().to_vec(),
                mode: b"100644",
                id: b"id".to_vec(),
                stat: None,
            })
            .collect();
        let cases: &[&[&str]] = &[
            &["src/m1/**"],
            &["src/m1"],
            &["src/m1/**", "src/**/*.rs"],
            &["src/**", "src/m2/**", "!src/m2/*.txt"],
            &["**/*.rs"],
            &["src/m?/**"],
            &["src/{m1,m2}/**"],
            &["tests", "README.md"],
            &["nothing/**"],
        ];
        for globs in cases {
            let globs: Vec<String> = globs.iter().map(|g| g.to_string()).collect();
            let inputs = Inputs::new(&globs).expect("globs");
            let every: Vec<&[u8]> = entries
                .iter()
                .filter(|e| inputs.matches(&e.path))
                .map(|e| e.path.as_slice())
                .collect();
            let shortcut: Vec<&[u8]> = candidate_range(&entries, &globs)
                .filter(|&i| inputs.matches(&entries[i].path))
                .map(|i| entries[i].path.as_slice())
                .collect();
            assert_eq!(shortcut, every, "{globs:?}");
        }
    }
}
