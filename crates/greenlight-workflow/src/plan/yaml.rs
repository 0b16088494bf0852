//! The plan file as a YAML tree whose every node keeps its line and column, and the typed reads
//! of it that record a problem at the node instead of stopping.
//!
//! Reading by hand (not with `#[derive(Deserialize)]`) is what lets a plan report every problem at
//! once, each at the node it is about; only a YAML syntax error, which leaves no tree, stops the
//! reading.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A 1-based line and column in the plan file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct At {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

/// One node of the tree: where it stands and what it holds.
#[derive(Debug)]
pub struct Yaml {
    pub at: At,
    pub value: Value,
}

/// What a node holds. A mapping keeps its entries in file order, each key with its position.
#[derive(Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    List(Vec<Yaml>),
    Map(Vec<(Yaml, Yaml)>),
}

impl Value {
    fn described(&self) -> &'static str {
        match self {
            Value::Null => "nothing (null)",
            Value::Bool(_) => "true/false",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number with a fraction",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// A problem found in the plan: where, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// Where the problem is.
    pub at: At,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.at.line, self.at.column, self.message)
    }
}

/// Most YAML events aliases may replay. A plan has no use for aliases beyond a few repeated
/// lists; the library's default (a million) lets a short file expand into a tree that takes
/// seconds to check.
const MAX_REPLAYED_EVENTS: usize = 10_000;

/// Parses `text` into a tree, or the one syntax problem that prevents it.
pub fn parse(text: &str) -> Result<Yaml, Problem> {
    let mut options = serde_saphyr::Options::default();
    // `yes`/`no` stay strings: a boolean is written `true` or `false`.
    options.strict_booleans = true;
    options.with_snippet = false;
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    options.alias_limits.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    match serde_saphyr::from_str_with_options::<Spanned<Raw>>(text, options) {
        Ok(root) => Ok(root.into()),
        Err(error) => {
            let at = error.location().map_or(At { line: 1, column: 1 }, |l| At {
                line: usize::try_from(l.line()).unwrap_or(1),
                column: usize::try_from(l.column()).unwrap_or(1),
            });
            let raw = error.to_string();
            let first = raw.lines().next().unwrap_or("invalid YAML");
            let text = first.split(" at line ").next().unwrap_or(first);
            let message = if text.contains("alias replay limit") {
                format!(
                    "the file's aliases (`*name`) expand to more than {MAX_REPLAYED_EVENTS} \
                     nodes; a plan needs no more, so write the repeated values out"
                )
            } else {
                format!("not valid YAML: {text}")
            };
            Err(Problem { at, message })
        }
    }
}

/// What serde-saphyr hands over, before positions are folded into each node.
enum Raw {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    List(Vec<Spanned<Raw>>),
    Map(Vec<(Spanned<Raw>, Spanned<Raw>)>),
}

impl From<Spanned<Raw>> for Yaml {
    fn from(node: Spanned<Raw>) -> Self {
        let at = At {
            line: usize::try_from(node.referenced.line()).unwrap_or(usize::MAX),
            column: usize::try_from(node.referenced.column()).unwrap_or(usize::MAX),
        };
        let value = match node.value {
            Raw::Null => Value::Null,
            Raw::Bool(b) => Value::Bool(b),
            Raw::Int(n) => Value::Int(n),
            Raw::Float(x) => Value::Float(x),
            Raw::Str(s) => Value::Str(s),
            Raw::List(items) => Value::List(items.into_iter().map(Yaml::from).collect()),
            Raw::Map(entries) => Value::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| (Yaml::from(k), Yaml::from(v)))
                    .collect(),
            ),
        };
        Yaml { at, value }
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML node")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        Raw::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Raw, E> {
        Ok(Raw::Int(n.into()))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Raw, E> {
        Ok(Raw::Int(n.into()))
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Raw, E> {
        Ok(Raw::Float(x))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Raw, E> {
        Ok(Raw::Str(s.to_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Raw::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Raw::Map(entries))
    }
}

/// A mapping's entries by key, once its keys were held to the allowed set. `x-` keys are kept
/// apart: recorded and digested, never read as settings.
pub struct Fields<'t> {
    pub at: At,
    known: BTreeMap<&'t str, &'t Yaml>,
    pub extensions: BTreeMap<String, serde_json::Value>,
}

impl<'t> Fields<'t> {
    /// No keys at all, standing at `at` (for a part that is missing, so its required keys are
    /// reported once, at the part's parent).
    pub fn empty(at: At) -> Self {
        Fields {
            at,
            known: BTreeMap::new(),
            extensions: BTreeMap::new(),
        }
    }

    /// The value of `key`, when written.
    pub fn get(&self, key: &str) -> Option<&'t Yaml> {
        self.known.get(key).copied()
    }
}

/// Collects every problem while the tree is read.
#[derive(Default)]
pub struct Reader {
    pub problems: Vec<Problem>,
}

impl Reader {
    /// Records a problem at `at`.
    pub fn problem(&mut self, at: At, message: impl Into<String>) {
        self.problems.push(Problem {
            at,
            message: message.into(),
        });
    }

    fn wrong(&mut self, what: &str, node: &Yaml, expected: &str) {
        self.problem(
            node.at,
            format!(
                "{what} must be {expected}, found {}",
                node.value.described()
            ),
        );
    }

    /// A mapping whose keys are all in `allowed` or begin with `x-`; anything else is a problem
    /// naming the allowed keys.
    pub fn fields<'t>(&mut self, what: &str, node: &'t Yaml, allowed: &[&str]) -> Fields<'t> {
        let mut fields = Fields {
            at: node.at,
            known: BTreeMap::new(),
            extensions: BTreeMap::new(),
        };
        let Value::Map(entries) = &node.value else {
            self.wrong(what, node, "a mapping of keys");
            return fields;
        };
        for (key, value) in entries {
            let Value::Str(name) = &key.value else {
                self.wrong(&format!("a key of {what}"), key, "a string");
                continue;
            };
            if name.starts_with("x-") {
                fields.extensions.insert(name.clone(), to_json(value));
            } else if allowed.contains(&name.as_str()) {
                fields.known.insert(name.as_str(), value);
            } else {
                self.problem(
                    key.at,
                    format!(
                        "unknown key `{name}` in {what}; allowed: {} (or an `x-` key of your own)",
                        allowed.join(", ")
                    ),
                );
            }
        }
        fields
    }

    /// A required key: its value, or a problem at the mapping saying what to add.
    pub fn required<'t>(&mut self, fields: &Fields<'t>, what: &str, key: &str) -> Option<&'t Yaml> {
        let found = fields.get(key);
        if found.is_none() {
            self.problem(fields.at, format!("{what} has no `{key}`; add it"));
        }
        found
    }

    /// A non-empty string.
    pub fn string(&mut self, what: &str, node: &Yaml) -> Option<String> {
        match &node.value {
            Value::Str(s) if !s.trim().is_empty() => Some(s.clone()),
            Value::Str(_) => {
                self.problem(node.at, format!("{what} is empty; write a value"));
                None
            }
            _ => {
                self.wrong(what, node, "a string");
                None
            }
        }
    }

    /// `true` or `false`.
    pub fn boolean(&mut self, what: &str, node: &Yaml) -> Option<bool> {
        match &node.value {
            Value::Bool(b) => Some(*b),
            _ => {
                self.wrong(what, node, "true or false");
                None
            }
        }
    }

    /// An integer from `lo` to `hi`.
    pub fn integer(&mut self, what: &str, node: &Yaml, lo: u64, hi: u64) -> Option<u64> {
        match &node.value {
            Value::Int(n) if (i128::from(lo)..=i128::from(hi)).contains(n) => {
                u64::try_from(*n).ok()
            }
            Value::Int(n) => {
                self.problem(
                    node.at,
                    format!("{what} must be from {lo} to {hi}, found {n}"),
                );
                None
            }
            Value::Str(s) => {
                self.problem(
                    node.at,
                    format!("{what} must be an integer, found the string `{s}`; remove the quotes"),
                );
                None
            }
            _ => {
                self.wrong(what, node, "an integer");
                None
            }
        }
    }

    /// A positive number up to `hi` (an integer is read as one).
    pub fn number(&mut self, what: &str, node: &Yaml, hi: f64) -> Option<f64> {
        let x = match &node.value {
            // An integer this large is beyond every domain a plan checks; the cast only has to
            // keep it large.
            #[allow(clippy::cast_precision_loss)]
            Value::Int(n) => *n as f64,
            Value::Float(x) => *x,
            _ => {
                self.wrong(what, node, "a number");
                return None;
            }
        };
        if x.is_finite() && x > 0.0 && x <= hi {
            Some(x)
        } else {
            self.problem(
                node.at,
                format!("{what} must be above 0 and at most {hi}, found {x}"),
            );
            None
        }
    }

    /// A list of non-empty strings, each with its position. A lone string is refused: the key
    /// means a list.
    pub fn strings(&mut self, what: &str, node: &Yaml) -> Vec<(String, At)> {
        let Value::List(items) = &node.value else {
            self.wrong(what, node, "a list of strings (`[a, b]` or `- a` lines)");
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|item| {
                self.string(&format!("an item of {what}"), item)
                    .map(|s| (s, item.at))
            })
            .collect()
    }

    /// One of the `words` (each a member's text form).
    pub fn word<W: Copy>(&mut self, what: &str, node: &Yaml, words: &[(&str, W)]) -> Option<W> {
        let text = self.string(what, node)?;
        let found = words
            .iter()
            .find(|(name, _)| *name == text)
            .map(|(_, w)| *w);
        if found.is_none() {
            let names: Vec<_> = words.iter().map(|(name, _)| *name).collect();
            self.problem(
                node.at,
                format!("{what} must be one of {}, found `{text}`", names.join(", ")),
            );
        }
        found
    }
}

/// A node as JSON, mapping keys sorted, so an `x-` value digests the same whatever its key order
/// and whichever way serde_json keeps maps in this build.
fn to_json(node: &Yaml) -> serde_json::Value {
    use serde_json::Value as J;
    match &node.value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(n) => i64::try_from(*n).map_or_else(|_| J::String(n.to_string()), J::from),
        Value::Float(x) => serde_json::Number::from_f64(*x).map_or(J::Null, J::Number),
        Value::Str(s) => J::String(s.clone()),
        Value::List(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Map(entries) => {
            let sorted: BTreeMap<String, serde_json::Value> = entries
                .iter()
                .map(|(k, v)| {
                    let key = match &k.value {
                        Value::Str(s) => s.clone(),
                        other => format!("{other:?}"),
                    };
                    (key, to_json(v))
                })
                .collect();
            J::Object(sorted.into_iter().collect())
        }
    }
}
