//! verify.yaml version 2: real YAML (serde-saphyr), every v1 key with its v1 meaning, plus
//! `needs`, `inputs`, `env`, `keys`, `cache`, `matchers` per gate and `jobs`, `cache`, `keys` in
//! the options.
//!
//! The file is read into a tree of nodes that keep their line and column, then checked by hand,
//! so every problem is reported at once, each at the node it is about: an unknown key, a wrong
//! type, a duplicate id, a need that names no gate or closes a cycle. Only a YAML syntax error
//! (which leaves no tree) stops the reading, with its own position.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use camino::Utf8Path;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::validate::is_valid_id;
use super::{
    CacheMode, Config, DEFAULT_MAX_LOG_TAIL_BYTES, DEFAULT_TIMEOUT_SEC, GateSpec, GateV2,
    MAX_COMMAND_BYTES, MAX_LOG_TAIL_BYTES, MAX_MUTEX_LEN, MAX_TIMEOUT_SEC, MatcherFileError,
    Options, OptionsV2, RESERVED_IDS, RemoteCache, RemoteOptions, RunOn, V2,
};

/// Every key a v2 gate may carry.
pub const GATE_KEYS_V2: &[&str] = &[
    "id",
    "command",
    "timeoutSec",
    "mutex",
    "retryOnFail",
    "flakyIsPass",
    "needs",
    "inputs",
    "env",
    "keys",
    "cache",
    "matchers",
    "run",
];
/// Every key v2 `options:` may carry.
pub const OPTIONS_KEYS_V2: &[&str] = &[
    "baseRef",
    "skipInPrimaryCheckout",
    "maxLogTailBytes",
    "requireCommit",
    "requireEnvClean",
    "jobs",
    "cache",
    "keys",
    "remote",
];
/// Every key `options.remote:` may carry.
pub const REMOTE_KEYS: &[&str] = &[
    "endpoint",
    "instance",
    "cache",
    "platform",
    "tokenFile",
    "caFile",
];
/// Most gates a v2 run may run at once.
pub const MAX_JOBS: u64 = 256;

/// A YAML node with what serde-saphyr tells of it.
#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

impl Node {
    fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(i128::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(i128::from(v)))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        Ok(Node::Int(i128::try_from(v).unwrap_or(i128::MAX)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry::<Spanned<Node>, Spanned<Node>>()? {
            entries.push(entry);
        }
        Ok(Node::Map(entries))
    }
}

/// A problem: 1-based line and column, and the message.
pub(super) type Problem = (usize, usize, String);

/// 1-based line and column of a node.
type At = (usize, usize);

/// A mapping's known keys, each with its key node and value node.
type Keys<'n> = BTreeMap<&'n str, (&'n Spanned<Node>, &'n Spanned<Node>)>;

fn at(node: &Spanned<Node>) -> (usize, usize) {
    let loc = node.referenced;
    (
        usize::try_from(loc.line()).unwrap_or(usize::MAX),
        usize::try_from(loc.column()).unwrap_or(usize::MAX),
    )
}

/// Reads one matcher file a gate names, given its resolved path: from disk, or from a
/// [`super::Snapshot`] taken earlier.
pub(super) type MatcherReader<'r> =
    &'r dyn Fn(
        &Utf8Path,
    ) -> Result<(String, greenlight_digest::matchers::MatcherSet), MatcherFileError>;

/// Collects problems while the tree is checked.
struct Checker<'r> {
    problems: Vec<Problem>,
    read_matchers: MatcherReader<'r>,
}

impl Checker<'_> {
    fn push(&mut self, node: &Spanned<Node>, message: String) {
        let (line, column) = at(node);
        self.problems.push((line, column, message));
    }

    fn string<'n>(&mut self, what: &str, node: &'n Spanned<Node>) -> Option<&'n str> {
        match &node.value {
            Node::Str(s) => Some(s),
            other => {
                self.push(
                    node,
                    format!("`{what}` must be a string, found {}", other.kind()),
                );
                None
            }
        }
    }

    fn boolean(&mut self, what: &str, node: &Spanned<Node>) -> Option<bool> {
        match &node.value {
            Node::Bool(b) => Some(*b),
            Node::Str(s) => {
                self.push(
                    node,
                    format!("`{what}` must be true or false, found the string `{s}`"),
                );
                None
            }
            other => {
                self.push(
                    node,
                    format!("`{what}` must be true or false, found {}", other.kind()),
                );
                None
            }
        }
    }

    fn integer(&mut self, what: &str, node: &Spanned<Node>, range: (u64, u64)) -> Option<u64> {
        let (lo, hi) = range;
        match &node.value {
            Node::Int(n) if *n >= i128::from(lo) && *n <= i128::from(hi) => u64::try_from(*n).ok(),
            Node::Int(n) => {
                self.push(
                    node,
                    format!("`{what}` must be between {lo} and {hi}, found {n}"),
                );
                None
            }
            Node::Str(s) => {
                self.push(
                    node,
                    format!(
                        "`{what}` must be an integer, found the string `{s}`; remove the quotes"
                    ),
                );
                None
            }
            other => {
                self.push(
                    node,
                    format!("`{what}` must be an integer, found {}", other.kind()),
                );
                None
            }
        }
    }

    /// A list of non-empty strings (a lone string is refused: a list is what the key means).
    fn strings(&mut self, what: &str, node: &Spanned<Node>) -> Vec<(String, (usize, usize))> {
        let Node::Seq(items) = &node.value else {
            self.push(
                node,
                format!(
                    "`{what}` must be a list of strings (`[a, b]` or `- a` lines), found {}",
                    node.value.kind()
                ),
            );
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            match &item.value {
                Node::Str(s) if !s.trim().is_empty() => out.push((s.clone(), at(item))),
                Node::Str(_) => self.push(item, format!("an item of `{what}` is empty")),
                other => self.push(
                    item,
                    format!("items of `{what}` must be strings, found {}", other.kind()),
                ),
            }
        }
        out
    }

    fn mapping<'n>(
        &mut self,
        what: &str,
        node: &'n Spanned<Node>,
        allowed: &[&str],
    ) -> Option<Keys<'n>> {
        let Node::Map(entries) = &node.value else {
            self.push(
                node,
                format!(
                    "{what} must be a mapping of keys, found {}",
                    node.value.kind()
                ),
            );
            return None;
        };
        let mut keys = BTreeMap::new();
        for (key, value) in entries {
            let Node::Str(name) = &key.value else {
                self.push(
                    key,
                    format!("keys of {what} must be strings, found {}", key.value.kind()),
                );
                continue;
            };
            if !allowed.contains(&name.as_str()) {
                self.push(
                    key,
                    format!(
                        "unknown key `{name}` in {what}; allowed: {}",
                        allowed.join(", ")
                    ),
                );
                continue;
            }
            keys.insert(name.as_str(), (key, value));
        }
        Some(keys)
    }
}

/// Parses a version 2 file. `Err` holds every problem found, in file order.
pub(super) fn parse(
    path: &Utf8Path,
    text: &str,
    read_matchers: MatcherReader<'_>,
) -> Result<(Config, V2), Vec<Problem>> {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.with_snippet = false;
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    let root: Spanned<Node> = match serde_saphyr::from_str_with_options(text, options) {
        Ok(root) => root,
        Err(error) => {
            let (line, column) = error
                .location()
                .map(|l| {
                    (
                        usize::try_from(l.line()).unwrap_or(1),
                        usize::try_from(l.column()).unwrap_or(1),
                    )
                })
                .unwrap_or((1, 1));
            return Err(vec![(line, column, yaml_error_message(&error.to_string()))]);
        }
    };
    let mut check = Checker {
        problems: Vec::new(),
        read_matchers,
    };
    let top = check
        .mapping("the file", &root, &["version", "gates", "options"])
        .unwrap_or_default();
    match top.get("version") {
        Some((_, value)) => match &value.value {
            Node::Int(2) => {}
            Node::Str(s) if s == "2" => {}
            _ => check.push(value, "`version` must be 2 in this format".to_owned()),
        },
        None => check.push(
            &root,
            "no `version: 2` key; add it as the first line".to_owned(),
        ),
    }
    let options = match top.get("options") {
        Some((_, node)) => read_options(&mut check, path, node),
        None => (Options::default(), OptionsV2::default()),
    };
    let gates = match top.get("gates") {
        Some((_, node)) => {
            // A written `options.remote`, even one with problems of its own, is a cluster
            // `run: remote` may name: its problems are reported there, not on every gate.
            let has_remote = top.get("options").is_some_and(|(_, options)| {
                matches!(&options.value, Node::Map(entries)
                    if entries.iter().any(|(k, _)| matches!(&k.value, Node::Str(s) if s == "remote")))
            });
            read_gates(&mut check, path, node, has_remote)
        }
        None => {
            check.push(
                &root,
                "no `gates:` key; add `gates:` with at least one `- id: …` item and its \
                 `command`"
                    .to_owned(),
            );
            Vec::new()
        }
    };
    if !check.problems.is_empty() {
        let mut problems = check.problems;
        problems.sort();
        return Err(problems);
    }
    let (common, extra): (Vec<_>, Vec<_>) = gates.into_iter().unzip();
    Ok((
        Config {
            path: path.to_owned(),
            gates: common,
            options: options.0,
        },
        V2 {
            gates: extra,
            options: options.1,
        },
    ))
}

/// The parser's message in the file's terms: its position is already in the prefix, and its
/// advice to programmers (which option to set) is replaced by what to do in the file.
fn yaml_error_message(raw: &str) -> String {
    let first = raw.lines().next().unwrap_or("invalid YAML");
    let mut text = first.to_owned();
    if let Some(at) = text.rfind(" at line ") {
        text.truncate(at);
    }
    if let Some(key) = text
        .strip_prefix("duplicate mapping key: ")
        .map(|rest| rest.split(',').next().unwrap_or(rest).trim().to_owned())
    {
        return format!(
            "not valid YAML: the key `{key}` is written twice in one mapping; keep one"
        );
    }
    format!("not valid YAML: {text}")
}

fn read_options(
    check: &mut Checker<'_>,
    path: &Utf8Path,
    node: &Spanned<Node>,
) -> (Options, OptionsV2) {
    let mut options = Options {
        max_log_tail_bytes: DEFAULT_MAX_LOG_TAIL_BYTES,
        ..Options::default()
    };
    let mut extra = OptionsV2::default();
    let Some(keys) = check.mapping("`options`", node, OPTIONS_KEYS_V2) else {
        return (options, extra);
    };
    for (name, (_, value)) in keys {
        match name {
            "baseRef" => {
                if let Some(s) = check.string("baseRef", value) {
                    if s.trim().is_empty() {
                        check.push(
                            value,
                            "`baseRef` is empty; name a ref or remove the key".into(),
                        );
                    } else {
                        options.base_ref = Some(s.to_owned());
                    }
                }
            }
            "skipInPrimaryCheckout" => {
                if let Some(b) = check.boolean(name, value) {
                    options.skip_in_primary_checkout = b;
                }
            }
            "requireCommit" => {
                if let Some(b) = check.boolean(name, value) {
                    options.require_commit = b;
                }
            }
            "requireEnvClean" => {
                if let Some(b) = check.boolean(name, value) {
                    options.require_env_clean = b;
                }
            }
            "maxLogTailBytes" => {
                if let Some(n) = check.integer(name, value, (0, MAX_LOG_TAIL_BYTES as u64)) {
                    options.max_log_tail_bytes = usize::try_from(n).unwrap_or(MAX_LOG_TAIL_BYTES);
                }
            }
            "jobs" => {
                if let Some(n) = check.integer(name, value, (1, MAX_JOBS)) {
                    extra.jobs = usize::try_from(n).ok();
                }
            }
            "cache" => match &value.value {
                Node::Str(s) if s == "local" => extra.cache = CacheMode::Local,
                Node::Str(s) if s == "off" => extra.cache = CacheMode::Off,
                Node::Bool(false) => extra.cache = CacheMode::Off,
                other => check.push(
                    value,
                    format!(
                        "`options.cache` must be `local` or `off`, found {}",
                        describe(other)
                    ),
                ),
            },
            "keys" => {
                extra.keys = commands(check, "options.keys", value);
            }
            "remote" => extra.remote = read_remote(check, path, value),
            _ => {}
        }
    }
    (options, extra)
}

/// `options.remote`: the cluster, checked as far as text can tell (whether it answers is
/// learnt at run time, where an unreachable cluster degrades to running here).
fn read_remote(
    check: &mut Checker<'_>,
    path: &Utf8Path,
    node: &Spanned<Node>,
) -> Option<RemoteOptions> {
    let keys = check.mapping("`options.remote`", node, REMOTE_KEYS)?;
    let base = path.parent().unwrap_or(Utf8Path::new("."));
    let mut remote = RemoteOptions {
        endpoint: String::new(),
        instance: String::new(),
        cache: RemoteCache::Shared,
        platform: BTreeMap::new(),
        token_file: None,
        ca_file: None,
    };
    let mut ok = true;
    match keys.get("endpoint") {
        Some((_, value)) => match check.string("remote.endpoint", value) {
            Some(found) => match endpoint_url(found) {
                Ok(url) => remote.endpoint = url,
                Err(why) => {
                    check.push(value, why);
                    ok = false;
                }
            },
            None => ok = false,
        },
        None => {
            check.push(
                node,
                "`options.remote` has no `endpoint`; add `endpoint: grpc://host:port`".into(),
            );
            ok = false;
        }
    }
    for (name, (_, value)) in &keys {
        match *name {
            "instance" => match check.string("remote.instance", value) {
                Some(found) => remote.instance = found.to_owned(),
                None => ok = false,
            },
            "cache" => match &value.value {
                Node::Str(s) if s == "shared" => remote.cache = RemoteCache::Shared,
                Node::Str(s) if s == "shared-read" => remote.cache = RemoteCache::SharedRead,
                Node::Str(s) if s == "off" => remote.cache = RemoteCache::Off,
                Node::Bool(false) => remote.cache = RemoteCache::Off,
                other => {
                    check.push(
                        value,
                        format!(
                            "`options.remote.cache` must be `shared`, `shared-read` or `off`, found {}",
                            describe(other)
                        ),
                    );
                    ok = false;
                }
            },
            "platform" => {
                let Node::Map(entries) = &value.value else {
                    check.push(
                        value,
                        format!(
                            "`options.remote.platform` must be a mapping of property names to values, found {}",
                            value.value.kind()
                        ),
                    );
                    ok = false;
                    continue;
                };
                for (key, property) in entries {
                    let Node::Str(key_name) = &key.value else {
                        check.push(key, "platform property names must be strings".into());
                        ok = false;
                        continue;
                    };
                    let text = match &property.value {
                        Node::Str(s) => s.clone(),
                        Node::Int(n) => n.to_string(),
                        Node::Bool(b) => b.to_string(),
                        other => {
                            check.push(
                                property,
                                format!(
                                    "platform property `{key_name}` must be a string, found {}",
                                    other.kind()
                                ),
                            );
                            ok = false;
                            continue;
                        }
                    };
                    if key_name.is_empty() || key_name.starts_with("greenlight.") {
                        check.push(
                            key,
                            format!("platform property `{key_name}` is not allowed: names are non-empty and `greenlight.` is greenlight's own prefix"),
                        );
                        ok = false;
                        continue;
                    }
                    remote.platform.insert(key_name.clone(), text);
                }
            }
            "tokenFile" | "caFile" => match check.string(name, value) {
                Some(found) if !found.trim().is_empty() => {
                    let full = base.join(found);
                    if *name == "tokenFile" {
                        remote.token_file = Some(full);
                    } else {
                        remote.ca_file = Some(full);
                    }
                }
                Some(_) => {
                    check.push(
                        value,
                        format!("`{name}` is empty; name a file or remove the key"),
                    );
                    ok = false;
                }
                None => ok = false,
            },
            _ => {}
        }
    }
    if remote.ca_file.is_some()
        && remote.endpoint.starts_with("http://")
        && let Some((_, value)) = keys.get("caFile")
    {
        check.push(
            value,
            "`caFile` is for `https://` (or `grpcs://`) endpoints; this one is plain".into(),
        );
        ok = false;
    }
    ok.then_some(remote)
}

/// An endpoint as a URL tonic dials: `grpc://` is `http://`, `grpcs://` is `https://`.
pub fn endpoint_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    let (scheme, rest) = text.split_once("://").ok_or_else(|| {
        format!("endpoint `{text}` has no scheme; write `grpc://host:port` or `grpcs://host:port`")
    })?;
    let scheme = match scheme {
        "grpc" | "http" => "http",
        "grpcs" | "https" => "https",
        other => {
            return Err(format!(
                "endpoint `{text}` has the scheme `{other}`; use grpc://, grpcs://, http:// or https://"
            ));
        }
    };
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') || host.contains(char::is_whitespace) {
        return Err(format!(
            "endpoint `{text}` must be `scheme://host:port` with no path"
        ));
    }
    Ok(format!("{scheme}://{host}"))
}

fn describe(node: &Node) -> String {
    match node {
        Node::Str(s) => format!("`{s}`"),
        Node::Int(n) => format!("`{n}`"),
        Node::Bool(b) => format!("`{b}`"),
        Node::Float(f) => format!("`{f}`"),
        other => other.kind().to_owned(),
    }
}

/// `keys` commands: strings a shell can start.
fn commands(check: &mut Checker<'_>, what: &str, node: &Spanned<Node>) -> Vec<String> {
    let mut out = Vec::new();
    for (command, (line, column)) in check.strings(what, node) {
        if command.contains('\0') || command.len() > MAX_COMMAND_BYTES {
            check.problems.push((
                line,
                column,
                format!(
                    "a command in `{what}` has a NUL byte or is over {MAX_COMMAND_BYTES} bytes"
                ),
            ));
        } else if !out.contains(&command) {
            out.push(command);
        }
    }
    out
}

type Gate = (GateSpec, GateV2);

fn read_gates(
    check: &mut Checker<'_>,
    path: &Utf8Path,
    node: &Spanned<Node>,
    has_remote: bool,
) -> Vec<Gate> {
    let Node::Seq(items) = &node.value else {
        check.push(
            node,
            format!(
                "`gates` must be a list of gates (`- id: …` items), found {}",
                node.value.kind()
            ),
        );
        return Vec::new();
    };
    if items.is_empty() {
        check.push(
            node,
            "no gates are defined; add at least one `- id: …` item and its `command`".into(),
        );
    }
    let mut gates = Vec::new();
    let mut first_use: HashMap<String, usize> = HashMap::new();
    // Needs are checked once every id is known: (gate index, need, where).
    let mut needs_at: Vec<Vec<(String, (usize, usize))>> = Vec::new();
    for item in items {
        let (gate, needs) = read_gate(check, path, item, &mut first_use, has_remote);
        if let Some(gate) = gate {
            gates.push(gate);
            needs_at.push(needs);
        }
    }
    let ids: Vec<&str> = gates.iter().map(|(g, _)| g.id.as_str()).collect();
    let known = ids.join(", ");
    let mut resolved: Vec<Vec<String>> = vec![Vec::new(); gates.len()];
    for (index, needs) in needs_at.iter().enumerate() {
        for (need, (line, column)) in needs {
            if need == ids[index] {
                check
                    .problems
                    .push((*line, *column, format!("gate `{need}` needs itself")));
            } else if !ids.contains(&need.as_str()) {
                check.problems.push((
                    *line,
                    *column,
                    format!("`needs` names `{need}`, which is no gate here; known: {known}"),
                ));
            } else if !resolved[index].contains(need) {
                resolved[index].push(need.clone());
            }
        }
    }
    if let Some(cycle) = find_cycle(&ids, &resolved) {
        let first = cycle[0];
        let line = gates[first].0.line;
        let path_text = cycle
            .iter()
            .chain(std::iter::once(&first))
            .map(|&i| ids[i])
            .collect::<Vec<_>>()
            .join(" → ");
        check.problems.push((
            line,
            1,
            format!("`needs` form a cycle: {path_text}; no gate of it could ever start"),
        ));
    }
    for ((_, extra), needs) in gates.iter_mut().zip(resolved) {
        extra.needs = needs;
    }
    gates
}

/// A cycle in the needs graph, as the gate indices along it, if there is one.
fn find_cycle(ids: &[&str], needs: &[Vec<String>]) -> Option<Vec<usize>> {
    let index = |id: &str| ids.iter().position(|i| *i == id);
    // 0 unvisited, 1 on the path, 2 done.
    let mut state = vec![0u8; ids.len()];
    let mut path = Vec::new();
    fn visit(
        at: usize,
        needs: &[Vec<String>],
        index: &dyn Fn(&str) -> Option<usize>,
        state: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        state[at] = 1;
        path.push(at);
        for need in &needs[at] {
            let Some(next) = index(need) else { continue };
            if state[next] == 1 {
                let start = path.iter().position(|&p| p == next).unwrap_or(0);
                return Some(path[start..].to_vec());
            }
            if state[next] == 0
                && let Some(cycle) = visit(next, needs, index, state, path)
            {
                return Some(cycle);
            }
        }
        path.pop();
        state[at] = 2;
        None
    }
    for start in 0..ids.len() {
        if state[start] == 0
            && let Some(cycle) = visit(start, needs, &index, &mut state, &mut path)
        {
            return Some(cycle);
        }
    }
    None
}

fn read_gate(
    check: &mut Checker<'_>,
    path: &Utf8Path,
    item: &Spanned<Node>,
    first_use: &mut HashMap<String, usize>,
    has_remote: bool,
) -> (Option<Gate>, Vec<(String, At)>) {
    let Some(keys) = check.mapping("a gate", item, GATE_KEYS_V2) else {
        return (None, Vec::new());
    };
    let (line, _) = at(item);
    let mut id = None;
    match keys.get("id") {
        Some((_, node)) => {
            if let Some(found) = check.string("id", node) {
                let (id_line, _) = at(node);
                if RESERVED_IDS.contains(&found) {
                    check.push(
                        node,
                        format!("gate id `{found}` is reserved for a built-in gate; pick another"),
                    );
                } else if !is_valid_id(found) {
                    check.push(
                        node,
                        format!(
                            "gate id `{found}` is not allowed; use 1-32 of a-z, 0-9 and `-`, \
                             starting with a letter or digit"
                        ),
                    );
                } else if let Some(first_line) = first_use.get(found) {
                    check.push(
                        node,
                        format!("gate id `{found}` is used again (first on line {first_line}); ids must be unique"),
                    );
                } else {
                    first_use.insert(found.to_owned(), id_line);
                    id = Some(found.to_owned());
                }
            }
        }
        None => check.push(item, "this gate has no `id`; add `id: <name>`".into()),
    }
    let mut command = None;
    match keys.get("command") {
        Some((_, node)) => {
            if let Some(found) = check.string("command", node) {
                if found.trim().is_empty() {
                    check.push(
                        node,
                        "`command` is empty; write the shell command to run".into(),
                    );
                } else if found.contains('\0') {
                    check.push(
                        node,
                        "`command` contains a NUL byte, which no shell can run".into(),
                    );
                } else if found.len() > MAX_COMMAND_BYTES {
                    check.push(
                        node,
                        format!(
                            "`command` is {} bytes; the limit is {MAX_COMMAND_BYTES} (put it in a script)",
                            found.len()
                        ),
                    );
                } else {
                    command = Some(found.to_owned());
                }
            }
        }
        None => check.push(
            item,
            "this gate has no `command`; add `command: <shell command>`".into(),
        ),
    }
    let mut spec_timeout = DEFAULT_TIMEOUT_SEC;
    let mut mutex = None;
    let mut retry_on_fail = false;
    let mut flaky_is_pass = None;
    let mut extra = GateV2::default();
    let mut needs = Vec::new();
    for (name, (_, value)) in &keys {
        match *name {
            "timeoutSec" => {
                if let Some(n) = check.integer(name, value, (1, u64::from(MAX_TIMEOUT_SEC))) {
                    spec_timeout = u32::try_from(n).unwrap_or(DEFAULT_TIMEOUT_SEC);
                }
            }
            "mutex" => {
                if let Some(found) = check.string(name, value) {
                    let ok = !found.is_empty()
                        && found.chars().count() <= MAX_MUTEX_LEN
                        && found
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
                    if ok {
                        mutex = Some(found.to_owned());
                    } else {
                        check.push(
                            value,
                            format!(
                                "mutex `{found}` is not allowed; use 1-{MAX_MUTEX_LEN} of A-Z, a-z, 0-9, `_`, `.` and `-`"
                            ),
                        );
                    }
                }
            }
            "retryOnFail" => match &value.value {
                Node::Int(0) | Node::Bool(false) => retry_on_fail = false,
                Node::Int(1) | Node::Bool(true) => retry_on_fail = true,
                other => check.push(
                    value,
                    format!("`retryOnFail` must be 0 or 1, found {}", describe(other)),
                ),
            },
            "flakyIsPass" => flaky_is_pass = check.boolean(name, value).map(|b| (b, *value)),
            "needs" => needs = check.strings("needs", value),
            "inputs" => {
                for (glob, (line, column)) in check.strings("inputs", value) {
                    match crate::cache::check_input_glob(&glob) {
                        Ok(()) => extra.inputs.push(glob),
                        Err(why) => check.problems.push((
                            line,
                            column,
                            format!("input `{glob}` is not usable: {why}"),
                        )),
                    }
                }
            }
            "env" => {
                for (name, (line, column)) in check.strings("env", value) {
                    let valid = name.bytes().enumerate().all(|(i, b)| {
                        b == b'_' || b.is_ascii_alphabetic() || (i > 0 && b.is_ascii_digit())
                    });
                    if valid {
                        if !extra.env.contains(&name) {
                            extra.env.push(name);
                        }
                    } else {
                        check.problems.push((
                            line,
                            column,
                            format!("`{name}` is not an environment variable name (letters, digits, `_`, not starting with a digit)"),
                        ));
                    }
                }
            }
            "keys" => extra.keys = commands(check, "keys", value),
            "run" => match &value.value {
                Node::Str(s) if s == "local" => extra.run = RunOn::Local,
                Node::Str(s) if s == "remote" => {
                    if has_remote {
                        extra.run = RunOn::Remote;
                    } else {
                        check.push(
                            value,
                            "`run: remote` needs a cluster: add `options.remote` with its `endpoint`"
                                .into(),
                        );
                    }
                }
                other => check.push(
                    value,
                    format!(
                        "`run` must be `local` or `remote`, found {}",
                        describe(other)
                    ),
                ),
            },
            "cache" => {
                if let Some(b) = check.boolean(name, value) {
                    extra.cache = b;
                }
            }
            "matchers" => {
                let base = path.parent().unwrap_or(Utf8Path::new("."));
                for (file, (line, column)) in check.strings("matchers", value) {
                    let full = base.join(&file);
                    let problem = match (check.read_matchers)(&full) {
                        Ok((text, set)) => {
                            extra.matcher_set.extend(set);
                            extra.matchers.push((full, text));
                            continue;
                        }
                        Err(MatcherFileError::Refused(error)) => {
                            format!("matcher file `{file}` is refused: {error}")
                        }
                        Err(MatcherFileError::NotUtf8) => {
                            format!("the matcher file `{full}` is not UTF-8; save it as UTF-8")
                        }
                        Err(MatcherFileError::Unreadable(reason)) => format!(
                            "cannot read the matcher file `{full}` ({reason}); paths are relative to the directory of this file"
                        ),
                    };
                    check.problems.push((line, column, problem));
                }
            }
            _ => {}
        }
    }
    let flaky = match flaky_is_pass {
        Some((true, node)) if !retry_on_fail => {
            check.push(
                node,
                "`flakyIsPass: true` needs `retryOnFail: 1`: without a retry nothing is ever FLAKY"
                    .into(),
            );
            false
        }
        Some((b, _)) => b,
        None => false,
    };
    let (Some(id), Some(command)) = (id, command) else {
        return (None, needs);
    };
    let spec = GateSpec {
        id,
        command,
        timeout_sec: spec_timeout,
        mutex,
        retry_on_fail,
        flaky_is_pass: flaky,
        line,
    };
    (Some((spec, extra)), needs)
}
