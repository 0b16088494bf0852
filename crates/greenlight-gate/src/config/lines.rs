//! The v1 line grammar: turns text into raw keys and values, each with its line number.
//!
//! One line is one fact. Nothing here interprets a value beyond its shape (empty, anchor, flow,
//! block scalar, quotes); what a value means is `validate`'s business. Every line that breaks the
//! grammar yields exactly one problem and is then ignored, so one typo never hides the next.

use super::ConfigErrorKind;

/// A problem with the line it belongs to (`None` for whole-file problems).
pub(super) type Problem = (Option<usize>, ConfigErrorKind);

/// The keys a gate item may carry, in the order the documentation lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GateKey {
    Id,
    Command,
    TimeoutSec,
    Mutex,
    RetryOnFail,
    FlakyIsPass,
}

impl GateKey {
    const ALL: [GateKey; 6] = [
        GateKey::Id,
        GateKey::Command,
        GateKey::TimeoutSec,
        GateKey::Mutex,
        GateKey::RetryOnFail,
        GateKey::FlakyIsPass,
    ];

    fn name(self) -> &'static str {
        super::GATE_KEYS[self as usize]
    }

    fn from_name(name: &str) -> Option<GateKey> {
        GateKey::ALL.into_iter().find(|key| key.name() == name)
    }
}

/// The keys `options:` may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OptionKey {
    BaseRef,
    SkipInPrimaryCheckout,
    MaxLogTailBytes,
    RequireCommit,
    RequireEnvClean,
}

impl OptionKey {
    const ALL: [OptionKey; 5] = [
        OptionKey::BaseRef,
        OptionKey::SkipInPrimaryCheckout,
        OptionKey::MaxLogTailBytes,
        OptionKey::RequireCommit,
        OptionKey::RequireEnvClean,
    ];

    pub(super) fn name(self) -> &'static str {
        super::OPTIONS_KEYS[self as usize]
    }

    fn from_name(name: &str) -> Option<OptionKey> {
        OptionKey::ALL.into_iter().find(|key| key.name() == name)
    }
}

/// A key as it appeared: its line, and its unquoted value when the value had an accepted shape.
/// `value: None` means the key was written but its value was rejected (already reported), so
/// the key must not also be reported as missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Field {
    pub(super) line: usize,
    pub(super) value: Option<String>,
}

/// One `- ` item under `gates:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RawGate {
    /// Line of the `- ` that opened the item.
    pub(super) line: usize,
    fields: [Option<Field>; 6],
}

impl RawGate {
    pub(super) fn field(&self, key: GateKey) -> Option<&Field> {
        self.fields[key as usize].as_ref()
    }

    /// The accepted value of `key` with its line, if the key was written with a good shape.
    pub(super) fn value(&self, key: GateKey) -> Option<(usize, &str)> {
        let field = self.field(key)?;
        field.value.as_deref().map(|value| (field.line, value))
    }
}

/// Everything the grammar pass found.
#[derive(Debug, Default)]
pub(super) struct RawFile {
    pub(super) gates: Vec<RawGate>,
    options: [Option<Field>; 5],
}

impl RawFile {
    /// The accepted value of an options key with its line.
    pub(super) fn option(&self, key: OptionKey) -> Option<(usize, &str)> {
        let field = self.options[key as usize].as_ref()?;
        field.value.as_deref().map(|value| (field.line, value))
    }
}

/// Which top-level block the following indented lines belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Start of file, or after `version:`: nothing may be indented here.
    None,
    Gates,
    Options,
    /// Under a top-level line that was already reported (unknown key, malformed line): its
    /// children are not judged, because one wrong parent would otherwise yield a cascade.
    Ignored,
}

struct Reader {
    raw: RawFile,
    problems: Vec<Problem>,
    section: Section,
    open_gate: Option<RawGate>,
    version_line: Option<usize>,
    gates_line: Option<usize>,
    options_line: Option<usize>,
    /// Set after a rejected block scalar (`key: |`) whose key sits at this column: the lines
    /// indented deeper are its content, already covered by that one problem.
    block_content_deeper_than: Option<usize>,
}

/// Reads `text` line by line. Returns what it understood and every problem it met.
pub(super) fn read(text: &str) -> (RawFile, Vec<Problem>) {
    let mut reader = Reader {
        raw: RawFile::default(),
        problems: Vec::new(),
        section: Section::None,
        open_gate: None,
        version_line: None,
        gates_line: None,
        options_line: None,
        block_content_deeper_than: None,
    };
    // `split('\n')` rather than `lines()`: a lone `\r` inside a line is content, and only one
    // trailing `\r` per line is a line ending (CommandMate's reader strips exactly one).
    for (index, raw_line) in text.split('\n').enumerate() {
        reader.line(index + 1, raw_line);
    }
    reader.close_gate();
    if reader.version_line.is_none() {
        reader
            .problems
            .push((None, ConfigErrorKind::MissingVersion));
    }
    if reader.raw.gates.is_empty() {
        reader.problems.push((None, ConfigErrorKind::NoGates));
    }
    (reader.raw, reader.problems)
}

impl Reader {
    fn problem(&mut self, line: usize, kind: ConfigErrorKind) {
        self.problems.push((Some(line), kind));
    }

    fn line(&mut self, n: usize, raw_line: &str) {
        let mut line = raw_line.strip_suffix('\r').unwrap_or(raw_line);
        if n == 1
            && let Some(rest) = line.strip_prefix('\u{feff}')
        {
            self.problem(n, ConfigErrorKind::ByteOrderMark);
            line = rest;
        }
        if let Some(column) = self.block_content_deeper_than {
            let body = line.trim_start_matches(' ');
            if body.is_empty() || line.len() - body.len() > column {
                return;
            }
            self.block_content_deeper_than = None;
        }
        if line.contains('\t') {
            self.problem(n, ConfigErrorKind::Tab);
            return;
        }
        let body = line.trim_start_matches(' ');
        // Comments exist only as whole lines: a `#` after other text is part of the value.
        if body.is_empty() || body.starts_with('#') {
            return;
        }
        let spaces = line.len() - body.len();
        if !spaces.is_multiple_of(2) {
            self.problem(n, ConfigErrorKind::OddIndentation { spaces });
            return;
        }
        match (spaces, self.section) {
            (0, _) => self.top_level(n, body),
            (_, Section::Ignored) => {}
            (2, Section::Gates) => self.gate_item(n, body),
            (2, Section::Options) => self.option(n, body),
            (2, Section::None) => self.problem(
                n,
                ConfigErrorKind::IndentedOutsideSection {
                    found: body.to_owned(),
                },
            ),
            (4, Section::Gates) => {
                if self.open_gate.is_some() {
                    self.gate_key(n, body);
                } else {
                    self.problem(
                        n,
                        ConfigErrorKind::GateKeyOutsideItem {
                            found: body.to_owned(),
                        },
                    );
                }
            }
            _ => self.problem(n, ConfigErrorKind::UnexpectedIndentation { spaces }),
        }
    }

    fn top_level(&mut self, n: usize, body: &str) {
        self.close_gate();
        let Some((key, value)) = split_key_value(body) else {
            self.problem(
                n,
                ConfigErrorKind::ExpectedKeyValue {
                    place: "at the top level",
                    found: body.to_owned(),
                },
            );
            self.section = Section::Ignored;
            return;
        };
        match key {
            "version" => {
                self.section = Section::None;
                if let Some(first_line) = self.version_line {
                    self.problem(n, ConfigErrorKind::DuplicateVersion { first_line });
                    return;
                }
                self.version_line = Some(n);
                if value.is_empty() {
                    self.problem(
                        n,
                        ConfigErrorKind::EmptyValue {
                            key: key.to_owned(),
                        },
                    );
                } else if unquote(value) != "1" {
                    self.problem(
                        n,
                        ConfigErrorKind::BadVersion {
                            found: value.to_owned(),
                        },
                    );
                }
            }
            "gates" => {
                self.section = Section::Gates;
                self.section_header(n, "gates", value);
            }
            "options" => {
                self.section = Section::Options;
                self.section_header(n, "options", value);
            }
            _ => {
                self.section = Section::Ignored;
                self.problem(
                    n,
                    ConfigErrorKind::UnknownTopLevelKey {
                        key: key.to_owned(),
                    },
                );
            }
        }
    }

    /// `gates:` / `options:`. A repeated header is rejected rather than merged: CommandMate's
    /// line reader would merge the two blocks while a YAML loader rejects or overrides the
    /// duplicate key, so such a file means different things to the two runners.
    fn section_header(&mut self, n: usize, key: &'static str, value: &str) {
        let seen = match key {
            "gates" => &mut self.gates_line,
            _ => &mut self.options_line,
        };
        if let Some(first_line) = *seen {
            self.problem(n, ConfigErrorKind::DuplicateSection { key, first_line });
        } else {
            *seen = Some(n);
        }
        if !value.is_empty() {
            self.problem(
                n,
                ConfigErrorKind::SectionHasValue {
                    key,
                    found: value.to_owned(),
                },
            );
        }
    }

    fn gate_item(&mut self, n: usize, body: &str) {
        let Some(rest) = body.strip_prefix("- ") else {
            self.problem(
                n,
                ConfigErrorKind::GateItemWithoutDash {
                    found: body.to_owned(),
                },
            );
            return;
        };
        self.close_gate();
        self.open_gate = Some(RawGate {
            line: n,
            fields: Default::default(),
        });
        self.gate_key(n, rest.trim_matches(' '));
    }

    fn gate_key(&mut self, n: usize, body: &str) {
        let Some((name, value)) = split_key_value(body) else {
            self.problem(
                n,
                ConfigErrorKind::ExpectedKeyValue {
                    place: "in a gate",
                    found: body.to_owned(),
                },
            );
            return;
        };
        let Some(key) = GateKey::from_name(name) else {
            self.problem(
                n,
                ConfigErrorKind::UnknownGateKey {
                    key: name.to_owned(),
                },
            );
            return;
        };
        let Some(gate) = self.open_gate.as_mut() else {
            return;
        };
        if let Some(first) = &gate.fields[key as usize] {
            let first_line = first.line;
            self.problem(
                n,
                ConfigErrorKind::DuplicateGateKey {
                    key: key.name(),
                    first_line,
                },
            );
            return;
        }
        // Gate keys sit at column 4, whether on the `- ` line or below it.
        let value = self.accept_value(n, 4, key.name(), value);
        if let Some(gate) = self.open_gate.as_mut() {
            gate.fields[key as usize] = Some(Field { line: n, value });
        }
    }

    fn option(&mut self, n: usize, body: &str) {
        let Some((name, value)) = split_key_value(body) else {
            self.problem(
                n,
                ConfigErrorKind::ExpectedKeyValue {
                    place: "under `options:`",
                    found: body.to_owned(),
                },
            );
            return;
        };
        let Some(key) = OptionKey::from_name(name) else {
            self.problem(
                n,
                ConfigErrorKind::UnknownOptionsKey {
                    key: name.to_owned(),
                },
            );
            return;
        };
        // Rejected rather than last-wins, for the same reason as a repeated section header.
        if let Some(first) = &self.raw.options[key as usize] {
            let first_line = first.line;
            self.problem(
                n,
                ConfigErrorKind::DuplicateOptionsKey {
                    key: key.name(),
                    first_line,
                },
            );
            return;
        }
        let value = self.accept_value(n, 2, key.name(), value);
        self.raw.options[key as usize] = Some(Field { line: n, value });
    }

    /// The value if its shape is accepted; otherwise reports why and returns `None`.
    fn accept_value(&mut self, n: usize, column: usize, key: &str, value: &str) -> Option<String> {
        match checked_value(key, value) {
            Ok(value) => Some(value),
            Err(kind) => {
                if matches!(kind, ConfigErrorKind::BlockScalar { .. }) {
                    self.block_content_deeper_than = Some(column);
                }
                self.problems.push((Some(n), kind));
                None
            }
        }
    }

    /// Ends the open gate item, reporting what it lacks at the line of its `- `.
    fn close_gate(&mut self) {
        let Some(gate) = self.open_gate.take() else {
            return;
        };
        if gate.field(GateKey::Id).is_none() {
            self.problem(gate.line, ConfigErrorKind::MissingId);
        }
        if gate.field(GateKey::Command).is_none() {
            self.problem(gate.line, ConfigErrorKind::MissingCommand);
        }
        self.raw.gates.push(gate);
    }
}

/// Splits `key: value` at the first colon; both sides lose surrounding spaces. `None` when
/// there is no colon or the key is not a plain word (`^[A-Za-z][A-Za-z0-9]*$`).
fn split_key_value(text: &str) -> Option<(&str, &str)> {
    let (key, value) = text.split_once(':')?;
    let key = key.trim_matches(' ');
    let mut chars = key.chars();
    let first = chars.next()?;
    if !first.is_ascii_alphabetic() || !chars.all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some((key, value.trim_matches(' ')))
}

/// Rejects value shapes the line grammar cannot represent, then unquotes.
fn checked_value(key: &str, value: &str) -> Result<String, ConfigErrorKind> {
    let key = key.to_owned();
    let found = value.to_owned();
    let mut chars = value.chars();
    match chars.next() {
        None => return Err(ConfigErrorKind::EmptyValue { key }),
        Some('&' | '*') => return Err(ConfigErrorKind::AnchorOrAlias { key, found }),
        Some('[' | '{') => return Err(ConfigErrorKind::FlowStyle { key, found }),
        Some('|' | '>') if chars.all(|c| c == '-' || c == '+' || c.is_ascii_digit()) => {
            return Err(ConfigErrorKind::BlockScalar { key, found });
        }
        Some(_) => {}
    }
    let unquoted = unquote(value);
    // CommandMate's line reader takes `""` as "key not given" and applies the default; a YAML
    // loader sees an empty string. Rejecting it is the one reading both runners agree is wrong.
    if unquoted.is_empty() {
        return Err(ConfigErrorKind::EmptyValue { key });
    }
    Ok(unquoted.to_owned())
}

/// Strips one pair of matching `"` or `'` around the whole value. No escapes are processed: the
/// inside is taken byte for byte, as CommandMate's reader does.
fn unquote(value: &str) -> &str {
    // A lone quote character is not a pair: once its prefix is stripped nothing is left to strip
    // the suffix from, so it stays as written.
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_enums_match_the_published_key_lists() {
        assert_eq!(GateKey::ALL.len(), crate::config::GATE_KEYS.len());
        for key in GateKey::ALL {
            assert_eq!(GateKey::from_name(key.name()), Some(key));
        }
        assert_eq!(OptionKey::ALL.len(), crate::config::OPTIONS_KEYS.len());
        for key in OptionKey::ALL {
            assert_eq!(OptionKey::from_name(key.name()), Some(key));
        }
    }

    #[test]
    fn split_takes_the_first_colon_and_trims_spaces_only() {
        assert_eq!(
            split_key_value("command:  sh -c 'a:b'  "),
            Some(("command", "sh -c 'a:b'"))
        );
        assert_eq!(split_key_value("a1:"), Some(("a1", "")));
        assert_eq!(split_key_value("no colon"), None);
        assert_eq!(split_key_value("1a: x"), None);
        assert_eq!(split_key_value("a-b: x"), None);
        assert_eq!(split_key_value(": x"), None);
    }

    #[test]
    fn unquote_needs_a_matching_pair() {
        assert_eq!(unquote("\"x\""), "x");
        assert_eq!(unquote("'x'"), "x");
        assert_eq!(unquote("\"x'"), "\"x'");
        assert_eq!(unquote("\""), "\"");
        assert_eq!(unquote("\"\""), "");
        assert_eq!(unquote("\"a\" && \"b\""), "a\" && \"b");
    }

    #[test]
    fn block_scalar_shape_is_only_an_indicator_line() {
        assert!(matches!(
            checked_value("command", "|-"),
            Err(ConfigErrorKind::BlockScalar { .. })
        ));
        assert!(matches!(
            checked_value("command", ">+2"),
            Err(ConfigErrorKind::BlockScalar { .. })
        ));
        assert_eq!(
            checked_value("command", "| grep x").as_deref(),
            Ok("| grep x")
        );
        assert_eq!(checked_value("command", "> out").as_deref(), Ok("> out"));
    }

    #[test]
    fn quoted_shapes_are_plain_strings() {
        assert_eq!(checked_value("command", "\"[x]\"").as_deref(), Ok("[x]"));
        assert_eq!(checked_value("command", "'*'").as_deref(), Ok("*"));
        assert!(matches!(
            checked_value("mutex", "''"),
            Err(ConfigErrorKind::EmptyValue { .. })
        ));
    }
}
