//! What v1 values mean: ranges, names, defaults, and the rules between keys.
//!
//! Every rule is checked on every gate and option, whatever failed before it, so a file's
//! problems all surface in one run. Each problem points at the line of the key at fault.

use std::collections::HashMap;

use super::lines::{GateKey, OptionKey, Problem, RawFile, RawGate};
use super::{
    ConfigErrorKind, DEFAULT_TIMEOUT_SEC, GateSpec, MAX_COMMAND_BYTES, MAX_LOG_TAIL_BYTES,
    MAX_MUTEX_LEN, MAX_TIMEOUT_SEC, Options, RESERVED_IDS,
};

/// Interprets the raw keys. The returned gates and options are meaningful only when no problem
/// was added.
pub(super) fn interpret(raw: &RawFile, problems: &mut Vec<Problem>) -> (Vec<GateSpec>, Options) {
    let mut first_use: HashMap<&str, usize> = HashMap::new();
    let mut gates = Vec::with_capacity(raw.gates.len());
    for gate in &raw.gates {
        if let Some(spec) = interpret_gate(gate, &mut first_use, problems) {
            gates.push(spec);
        }
    }
    (gates, interpret_options(raw, problems))
}

fn interpret_gate<'a>(
    gate: &'a RawGate,
    first_use: &mut HashMap<&'a str, usize>,
    problems: &mut Vec<Problem>,
) -> Option<GateSpec> {
    let mut problem = |line: usize, kind: ConfigErrorKind| problems.push((Some(line), kind));

    let id = gate.value(GateKey::Id);
    if let Some((line, id)) = id {
        if RESERVED_IDS.contains(&id) {
            problem(line, ConfigErrorKind::ReservedId { id: id.to_owned() });
        } else if !is_valid_id(id) {
            problem(line, ConfigErrorKind::InvalidId { id: id.to_owned() });
        } else if let Some(&first_line) = first_use.get(id) {
            problem(
                line,
                ConfigErrorKind::DuplicateId {
                    id: id.to_owned(),
                    first_line,
                },
            );
        } else {
            first_use.insert(id, line);
        }
    }

    let mut timeout_sec = DEFAULT_TIMEOUT_SEC;
    if let Some((line, found)) = gate.value(GateKey::TimeoutSec) {
        match parse_decimal(found) {
            None => problem(
                line,
                ConfigErrorKind::TimeoutNotInteger {
                    found: found.to_owned(),
                },
            ),
            Some(Ok(n)) if (1..=u64::from(MAX_TIMEOUT_SEC)).contains(&n) => {
                timeout_sec = u32::try_from(n).unwrap_or(DEFAULT_TIMEOUT_SEC);
            }
            Some(_) => problem(
                line,
                ConfigErrorKind::TimeoutOutOfRange {
                    found: found.to_owned(),
                },
            ),
        }
    }

    let mut mutex = None;
    if let Some((line, found)) = gate.value(GateKey::Mutex) {
        let len = found.chars().count();
        if len > MAX_MUTEX_LEN {
            problem(
                line,
                ConfigErrorKind::MutexTooLong {
                    found: found.to_owned(),
                    len,
                },
            );
        } else if !found
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            problem(
                line,
                ConfigErrorKind::InvalidMutex {
                    found: found.to_owned(),
                },
            );
        } else {
            mutex = Some(found.to_owned());
        }
    }

    // `None` while the value is unusable, so the flakyIsPass rule below is not judged against
    // a retry count nobody wrote.
    let mut retry_on_fail = Some(false);
    if let Some((line, found)) = gate.value(GateKey::RetryOnFail) {
        retry_on_fail = match found {
            "0" => Some(false),
            "1" => Some(true),
            _ => {
                let found = found.to_owned();
                problem(
                    line,
                    if parse_decimal(&found).is_some() {
                        ConfigErrorKind::RetryOutOfRange { found }
                    } else {
                        ConfigErrorKind::RetryNotInteger { found }
                    },
                );
                None
            }
        };
    }

    let mut flaky_is_pass = false;
    if let Some((line, found)) = gate.value(GateKey::FlakyIsPass) {
        match parse_bool(found) {
            Some(value) => {
                flaky_is_pass = value;
                if value && retry_on_fail == Some(false) {
                    problem(line, ConfigErrorKind::FlakyWithoutRetry);
                }
            }
            None => problem(
                line,
                ConfigErrorKind::FlakyNotBoolean {
                    found: found.to_owned(),
                },
            ),
        }
    }

    let command = gate.value(GateKey::Command);
    let mut command_usable = true;
    if let Some((line, command)) = command {
        // Both would make the operating system refuse to start `/bin/sh -c <command>`: found
        // here, with the line, instead of as one gate's failure at run time.
        if let Some(offset) = command.find('\0') {
            problem(line, ConfigErrorKind::CommandHasNul { offset: offset + 1 });
            command_usable = false;
        }
        if command.len() > MAX_COMMAND_BYTES {
            problem(line, ConfigErrorKind::CommandTooLong { len: command.len() });
            command_usable = false;
        }
    }

    let (_, id) = id?;
    let (_, command) = command.filter(|_| command_usable)?;
    Some(GateSpec {
        id: id.to_owned(),
        command: command.to_owned(),
        timeout_sec,
        mutex,
        retry_on_fail: retry_on_fail.unwrap_or(false),
        flaky_is_pass,
        line: gate.line,
    })
}

fn interpret_options(raw: &RawFile, problems: &mut Vec<Problem>) -> Options {
    let mut options = Options::default();
    if let Some((_, base_ref)) = raw.option(OptionKey::BaseRef) {
        options.base_ref = Some(base_ref.to_owned());
    }
    for (key, slot) in [
        (
            OptionKey::SkipInPrimaryCheckout,
            &mut options.skip_in_primary_checkout,
        ),
        (OptionKey::RequireCommit, &mut options.require_commit),
        (OptionKey::RequireEnvClean, &mut options.require_env_clean),
    ] {
        if let Some((line, found)) = raw.option(key) {
            match parse_bool(found) {
                Some(value) => *slot = value,
                None => problems.push((
                    Some(line),
                    ConfigErrorKind::OptionNotBoolean {
                        key: key.name(),
                        found: found.to_owned(),
                    },
                )),
            }
        }
    }
    if let Some((line, found)) = raw.option(OptionKey::MaxLogTailBytes) {
        let found_owned = || found.to_owned();
        match parse_decimal(found) {
            None => problems.push((
                Some(line),
                ConfigErrorKind::MaxLogTailNotInteger {
                    found: found_owned(),
                },
            )),
            Some(Ok(n)) if n <= MAX_LOG_TAIL_BYTES as u64 => {
                options.max_log_tail_bytes = usize::try_from(n).unwrap_or(MAX_LOG_TAIL_BYTES);
            }
            Some(_) => problems.push((
                Some(line),
                ConfigErrorKind::MaxLogTailOutOfRange {
                    found: found_owned(),
                },
            )),
        }
    }
    options
}

/// `^[a-z0-9][a-z0-9-]{0,31}$`.
pub(super) fn is_valid_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    !bytes.is_empty() && bytes.len() <= 32 && bytes[0] != b'-' && bytes.iter().all(allowed)
}

/// Digits only (no sign, no spaces), as CommandMate checks integers. `None`: not digits-only;
/// `Some(Err(()))`: digits, but too large for any range v1 allows.
fn parse_decimal(text: &str) -> Option<Result<u64, ()>> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse::<u64>().map_err(|_| ()))
}

/// Exactly `true` or `false`: YAML 1.1 spellings like `yes` or `True` are rejected, because
/// CommandMate's line reader rejects them.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_pattern_matches_commandmate() {
        for good in ["a", "0", "lint", "e2e-port", "a-", &"a".repeat(32)] {
            assert!(is_valid_id(good), "{good}");
        }
        for bad in ["", "-a", "A", "a_b", "a.b", "ü", &"a".repeat(33)] {
            assert!(!is_valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn decimal_accepts_leading_zeros_and_flags_overflow() {
        assert_eq!(parse_decimal("0600"), Some(Ok(600)));
        assert_eq!(parse_decimal("99999999999999999999999"), Some(Err(())));
        assert_eq!(parse_decimal("+5"), None);
        assert_eq!(parse_decimal("5 "), None);
        assert_eq!(parse_decimal("٣"), None);
    }
}
