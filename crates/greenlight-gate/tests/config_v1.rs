//! verify.yaml v1 through the public API: one test per configuration CommandMate's runner
//! rejects, the variants it accepts, and the guarantee that every problem is reported at once.

use camino::{Utf8Path, Utf8PathBuf};
use greenlight_gate::config::{
    Config, ConfigError, ConfigErrorKind, GateSpec, Options, load, parse_v1,
};
use proptest::prelude::*;

const PATH: &str = ".commandmate/verify.yaml";

fn parse(text: &str) -> Result<Config, Vec<ConfigError>> {
    parse_v1(Utf8Path::new(PATH), text).map_err(|errors| errors.0)
}

fn accepted(text: &str) -> Config {
    match parse(text) {
        Ok(config) => config,
        Err(errors) => panic!("expected the config to be accepted, got {errors:#?}"),
    }
}

fn rejected(text: &str) -> Vec<ConfigError> {
    match parse(text) {
        Ok(config) => panic!("expected the config to be rejected, got {config:#?}"),
        Err(errors) => errors,
    }
}

/// The file's single problem: asserts there is exactly one, on `line`, whose message contains
/// every `needle` (the key and the offending value).
fn single(text: &str, line: Option<usize>, needles: &[&str]) -> ConfigErrorKind {
    let errors = rejected(text);
    assert_eq!(
        errors.len(),
        1,
        "expected exactly one problem, got {errors:#?}"
    );
    let error = &errors[0];
    assert_eq!(error.line, line, "wrong line for {error}");
    assert_eq!(error.path, Utf8PathBuf::from(PATH));
    let message = error.to_string();
    for needle in needles {
        assert!(
            message.contains(needle),
            "`{message}` does not mention `{needle}`"
        );
    }
    error.kind.clone()
}

/// A valid file with one gate, to which a test appends or into which it splices lines.
const ONE_GATE: &str = "version: 1\ngates:\n  - id: lint\n    command: make lint\n";

// --- the rejection classes of CommandMate's suite, one test each -------------------------

#[test]
fn bad_version() {
    let kind = single(
        "version: 2\ngates:\n  - id: a\n    command: true\n",
        Some(1),
        &["version must be 1", "`2`"],
    );
    assert_eq!(kind, ConfigErrorKind::BadVersion { found: "2".into() });
}

#[test]
fn missing_version() {
    let kind = single(
        "gates:\n  - id: a\n    command: true\n",
        None,
        &["version: 1"],
    );
    assert_eq!(kind, ConfigErrorKind::MissingVersion);
    let message = rejected("gates:\n  - id: a\n    command: true\n")[0].to_string();
    assert!(message.starts_with(&format!("{PATH}: ")), "{message}");
}

#[test]
fn duplicate_id() {
    let text = "version: 1\ngates:\n  - id: a\n    command: true\n  - id: a\n    command: false\n";
    let kind = single(text, Some(5), &["duplicate gate id: a", "line 3"]);
    assert_eq!(
        kind,
        ConfigErrorKind::DuplicateId {
            id: "a".into(),
            first_line: 3
        }
    );
}

#[test]
fn reserved_id_work_evidence() {
    let text = "version: 1\ngates:\n  - id: work-evidence\n    command: true\n";
    let kind = single(
        text,
        Some(3),
        &["gate id is reserved: work-evidence", "reserved"],
    );
    assert_eq!(
        kind,
        ConfigErrorKind::ReservedId {
            id: "work-evidence".into()
        }
    );
}

#[test]
fn reserved_id_env_clean() {
    let text = "version: 1\ngates:\n  - command: true\n    id: env-clean\n";
    let kind = single(
        text,
        Some(4),
        &["gate id is reserved: env-clean", "reserved"],
    );
    assert_eq!(
        kind,
        ConfigErrorKind::ReservedId {
            id: "env-clean".into()
        }
    );
}

#[test]
fn reserved_id_scope() {
    let text = "version: 1\ngates:\n  - id: \"scope\"\n    command: true\n";
    single(text, Some(3), &["gate id is reserved: scope", "reserved"]);
}

#[test]
fn invalid_id() {
    let text = "version: 1\ngates:\n  - id: Lint_Gate\n    command: true\n";
    let kind = single(text, Some(3), &["invalid gate id: Lint_Gate", "a-z, 0-9"]);
    assert_eq!(
        kind,
        ConfigErrorKind::InvalidId {
            id: "Lint_Gate".into()
        }
    );
    // 33 characters is one too many; 32 is fine.
    single(
        &ONE_GATE.replace("lint", &"a".repeat(33)),
        Some(3),
        &["invalid"],
    );
    accepted(&ONE_GATE.replace("lint", &"a".repeat(32)));
}

#[test]
fn timeout_out_of_range() {
    for (value, ok) in [("0", false), ("1", true), ("7200", true), ("7201", false)] {
        let text = format!("{ONE_GATE}    timeoutSec: {value}\n");
        if ok {
            assert_eq!(accepted(&text).gates[0].timeout_sec.to_string(), value);
        } else {
            let kind = single(
                &text,
                Some(5),
                &["timeoutSec must be 1..7200", &format!("`{value}`"), "7200"],
            );
            assert_eq!(
                kind,
                ConfigErrorKind::TimeoutOutOfRange {
                    found: value.into()
                }
            );
        }
    }
}

/// CommandMate's shell compares with `[ -gt ]`, which silently passes a number too large for
/// it; here every digit string outside 1..=7200 is refused.
#[test]
fn timeout_too_large_for_any_integer_is_out_of_range() {
    let text = format!("{ONE_GATE}    timeoutSec: 99999999999999999999999\n");
    let kind = single(
        &text,
        Some(5),
        &["timeoutSec must be 1..7200", "99999999999999999999999"],
    );
    assert!(
        matches!(kind, ConfigErrorKind::TimeoutOutOfRange { .. }),
        "{kind:?}"
    );
}

#[test]
fn timeout_not_an_integer() {
    for value in ["ten", "1.5", "-1", "+5", "1e3", "'6 00'"] {
        let text = format!("{ONE_GATE}    timeoutSec: {value}\n");
        let kind = single(
            &text,
            Some(5),
            &["timeoutSec must be an integer", "integer"],
        );
        assert!(
            matches!(kind, ConfigErrorKind::TimeoutNotInteger { .. }),
            "{value}: {kind:?}"
        );
        assert!(
            kind.to_string().contains(value.trim_matches('\'')),
            "{kind}"
        );
    }
}

#[test]
fn missing_command() {
    let text = "version: 1\ngates:\n  - id: a\n    timeoutSec: 5\n  - id: b\n    command: true\n";
    let kind = single(text, Some(3), &["gate is missing command:"]);
    assert_eq!(kind, ConfigErrorKind::MissingCommand);
}

#[test]
fn missing_id() {
    let text =
        "version: 1\ngates:\n  - id: a\n    command: true\n  - command: true\n    timeoutSec: 5\n";
    let kind = single(text, Some(5), &["gate is missing id:"]);
    assert_eq!(kind, ConfigErrorKind::MissingId);
}

#[test]
fn unknown_gate_key() {
    let text = format!("{ONE_GATE}    retries: 3\n");
    let kind = single(
        &text,
        Some(5),
        &["unknown gate key: retries", "retryOnFail"],
    );
    assert_eq!(
        kind,
        ConfigErrorKind::UnknownGateKey {
            key: "retries".into()
        }
    );
}

#[test]
fn unknown_options_key() {
    let text = format!("{ONE_GATE}options:\n  parallel: true\n");
    let kind = single(
        &text,
        Some(6),
        &["unknown options key: parallel", "baseRef"],
    );
    assert_eq!(
        kind,
        ConfigErrorKind::UnknownOptionsKey {
            key: "parallel".into()
        }
    );
}

#[test]
fn non_boolean_option() {
    let text = format!("{ONE_GATE}options:\n  skipInPrimaryCheckout: yes\n");
    let kind = single(
        &text,
        Some(6),
        &["skipInPrimaryCheckout", "`yes`", "must be true or false"],
    );
    assert_eq!(
        kind,
        ConfigErrorKind::OptionNotBoolean {
            key: "skipInPrimaryCheckout",
            found: "yes".into()
        }
    );
}

#[test]
fn non_boolean_require_commit() {
    let text = format!("{ONE_GATE}options:\n  requireCommit: True\n");
    let kind = single(&text, Some(6), &["requireCommit", "`True`"]);
    assert_eq!(
        kind,
        ConfigErrorKind::OptionNotBoolean {
            key: "requireCommit",
            found: "True".into()
        }
    );
}

#[test]
fn flow_style_value() {
    let text = "version: 1\ngates:\n  - id: a\n    command: [make, test]\n";
    let kind = single(text, Some(4), &["`command`", "flow-style", "[make, test]"]);
    assert!(matches!(kind, ConfigErrorKind::FlowStyle { .. }));
    single(
        &format!("{ONE_GATE}options:\n  baseRef: {{a: b}}\n"),
        Some(6),
        &["`baseRef`", "flow-style"],
    );
}

#[test]
fn anchor_or_alias() {
    let text = "version: 1\ngates:\n  - id: a\n    command: &cmd make test\n  - id: b\n    command: *cmd\n";
    let errors = rejected(text);
    assert_eq!(
        errors.iter().map(|e| e.line).collect::<Vec<_>>(),
        [Some(4), Some(6)]
    );
    for error in &errors {
        assert!(
            matches!(error.kind, ConfigErrorKind::AnchorOrAlias { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("`command`"), "{error}");
    }
    assert!(errors[1].to_string().contains("*cmd"));
}

#[test]
fn block_scalar() {
    for indicator in ["|", ">", "|-", ">+", "|2"] {
        let text =
            format!("version: 1\ngates:\n  - id: a\n    command: {indicator}\n      make test\n");
        let kind = single(
            &text,
            Some(4),
            &["`command`", "block scalar", &format!("`{indicator}`")],
        );
        assert!(matches!(kind, ConfigErrorKind::BlockScalar { .. }));
    }
}

/// The content lines of a rejected block scalar are covered by its one problem; judging starts
/// again at the next line that is not deeper than the key.
#[test]
fn block_scalar_content_lines_are_not_judged_again() {
    let text = "\
version: 1
gates:
  - id: a
    command: >-
      make
      \tlint

       odd
    timeoutSec: 0
  - id: b
    command: true
options:
  baseRef: |
    main
\tx: 1
";
    let errors = rejected(text);
    let got: Vec<_> = errors
        .iter()
        .map(|e| (e.line, std::mem::discriminant(&e.kind)))
        .collect();
    let block = std::mem::discriminant(&ConfigErrorKind::BlockScalar {
        key: String::new(),
        found: String::new(),
    });
    let tab = std::mem::discriminant(&ConfigErrorKind::Tab);
    let range = std::mem::discriminant(&ConfigErrorKind::TimeoutOutOfRange {
        found: String::new(),
    });
    // A tab line at column 0 is not deeper than `baseRef`, so it is judged.
    assert_eq!(
        got,
        [
            (Some(4), block),
            (Some(9), range),
            (Some(13), block),
            (Some(15), tab)
        ]
    );
}

#[test]
fn indentation_not_a_multiple_of_two() {
    let text = "version: 1\ngates:\n  - id: a\n     command: echo hi\n    command: echo hi\n";
    let kind = single(
        text,
        Some(4),
        &["multiple of 2 spaces, found 5", "multiple of 2"],
    );
    assert_eq!(kind, ConfigErrorKind::OddIndentation { spaces: 5 });
}

#[test]
fn tab() {
    let text = "version: 1\ngates:\n  - id: a\n    command: true\n\ttimeoutSec: 5\n";
    let kind = single(text, Some(5), &["tab"]);
    assert_eq!(kind, ConfigErrorKind::Tab);
    // Anywhere on the line, comments included.
    single(&format!("{ONE_GATE}# a\tcomment\n"), Some(5), &["tab"]);
    single(&format!("{ONE_GATE}    mutex: a\tb\n"), Some(5), &["tab"]);
}

#[test]
fn no_gates() {
    for text in [
        "version: 1\n",
        "version: 1\ngates:\noptions:\n  requireCommit: true\n",
    ] {
        let kind = single(text, None, &["no gates"]);
        assert_eq!(kind, ConfigErrorKind::NoGates);
    }
}

#[test]
fn retry_on_fail_out_of_range() {
    let text = format!("{ONE_GATE}    retryOnFail: 2\n");
    let kind = single(
        &text,
        Some(5),
        &["retryOnFail must be 0 or 1", "0 or 1", "`2`"],
    );
    assert_eq!(kind, ConfigErrorKind::RetryOutOfRange { found: "2".into() });
    single(
        &format!("{ONE_GATE}    retryOnFail: 01\n"),
        Some(5),
        &["`01`"],
    );
}

#[test]
fn retry_on_fail_not_an_integer() {
    let text = format!("{ONE_GATE}    retryOnFail: true\n");
    let kind = single(
        &text,
        Some(5),
        &["retryOnFail must be 0 or 1", "0 or 1", "`true`"],
    );
    assert_eq!(
        kind,
        ConfigErrorKind::RetryNotInteger {
            found: "true".into()
        }
    );
}

#[test]
fn flaky_is_pass_true_without_retry_on_fail_1() {
    for retry in ["", "    retryOnFail: 0\n"] {
        let text = format!("{ONE_GATE}{retry}    flakyIsPass: true\n");
        let line = text.lines().count();
        let kind = single(
            &text,
            Some(line),
            &[
                "flakyIsPass: true requires retryOnFail: 1",
                "retryOnFail: 1 in the same gate",
            ],
        );
        assert_eq!(kind, ConfigErrorKind::FlakyWithoutRetry);
    }
    // `false` alone is only the default written out.
    accepted(&format!("{ONE_GATE}    flakyIsPass: false\n"));
}

#[test]
fn flaky_is_pass_not_a_boolean() {
    let text = format!("{ONE_GATE}    retryOnFail: 1\n    flakyIsPass: 1\n");
    let kind = single(
        &text,
        Some(6),
        &["flakyIsPass must be true or false", "`1`", "true or false"],
    );
    assert_eq!(kind, ConfigErrorKind::FlakyNotBoolean { found: "1".into() });
}

#[test]
fn invalid_mutex_name() {
    let text = format!("{ONE_GATE}    mutex: e2e/port\n");
    let kind = single(
        &text,
        Some(5),
        &["invalid mutex name", "invalid mutex name: e2e/port"],
    );
    assert_eq!(
        kind,
        ConfigErrorKind::InvalidMutex {
            found: "e2e/port".into()
        }
    );
    single(
        &format!("{ONE_GATE}    mutex: \"a b\"\n"),
        Some(5),
        &["invalid mutex name: a b"],
    );
}

#[test]
fn mutex_longer_than_64() {
    let name = "m".repeat(65);
    let kind = single(
        &format!("{ONE_GATE}    mutex: {name}\n"),
        Some(5),
        &["mutex must be at most 64 characters", "64", "65", &name],
    );
    assert_eq!(
        kind,
        ConfigErrorKind::MutexTooLong {
            found: name,
            len: 65
        }
    );
    let name = "M".repeat(64);
    assert_eq!(
        accepted(&format!("{ONE_GATE}    mutex: {name}\n")).gates[0].mutex,
        Some(name)
    );
}

#[test]
fn require_env_clean_not_a_boolean() {
    let text = format!("{ONE_GATE}options:\n  requireEnvClean: 'no'\n");
    let kind = single(&text, Some(6), &["requireEnvClean", "`no`"]);
    assert_eq!(
        kind,
        ConfigErrorKind::OptionNotBoolean {
            key: "requireEnvClean",
            found: "no".into()
        }
    );
}

// --- rejections beyond the suite's list ----------------------------------------------------

#[test]
fn max_log_tail_bytes_out_of_range_or_not_an_integer() {
    let text = format!("{ONE_GATE}options:\n  maxLogTailBytes: 1048577\n");
    let kind = single(&text, Some(6), &["maxLogTailBytes", "1048576", "`1048577`"]);
    assert!(matches!(kind, ConfigErrorKind::MaxLogTailOutOfRange { .. }));
    let text = format!("{ONE_GATE}options:\n  maxLogTailBytes: 8k\n");
    let kind = single(&text, Some(6), &["maxLogTailBytes", "`8k`"]);
    assert!(matches!(kind, ConfigErrorKind::MaxLogTailNotInteger { .. }));
}

#[test]
fn empty_values_are_refused_bare_or_quoted() {
    for value in ["", "\"\"", "''"] {
        let text = format!("{ONE_GATE}    timeoutSec: {value}\n");
        let kind = single(&text, Some(5), &["`timeoutSec`", "empty"]);
        assert_eq!(
            kind,
            ConfigErrorKind::EmptyValue {
                key: "timeoutSec".into()
            }
        );
    }
    single(
        &format!("{ONE_GATE}options:\n  baseRef: \"\"\n"),
        Some(6),
        &["`baseRef`", "empty"],
    );
    single(
        "version:\ngates:\n  - id: a\n    command: true\n",
        Some(1),
        &["`version`", "empty"],
    );
}

/// A key written with a rejected value is not also "missing".
#[test]
fn a_rejected_id_is_not_also_reported_missing() {
    single(
        "version: 1\ngates:\n  - id: [a]\n    command: true\n",
        Some(3),
        &["`id`", "flow-style"],
    );
}

#[test]
fn a_gate_key_given_twice_in_one_gate() {
    let text = format!("{ONE_GATE}    command: make test\n");
    let kind = single(&text, Some(5), &["`command`", "line 4"]);
    assert_eq!(
        kind,
        ConfigErrorKind::DuplicateGateKey {
            key: "command",
            first_line: 4
        }
    );
}

#[test]
fn repeated_top_level_keys() {
    let kind = single(
        &format!("{ONE_GATE}version: 1\n"),
        Some(5),
        &["`version`", "line 1"],
    );
    assert_eq!(kind, ConfigErrorKind::DuplicateVersion { first_line: 1 });
    let text = format!("{ONE_GATE}gates:\n  - id: b\n    command: true\n");
    let kind = single(&text, Some(5), &["`gates:`", "line 2"]);
    assert_eq!(
        kind,
        ConfigErrorKind::DuplicateSection {
            key: "gates",
            first_line: 2
        }
    );
    let text = format!("{ONE_GATE}options:\n  baseRef: main\noptions:\n  requireCommit: true\n");
    single(&text, Some(7), &["`options:`", "line 5"]);
    let text = format!("{ONE_GATE}options:\n  baseRef: main\n  baseRef: dev\n");
    let kind = single(&text, Some(7), &["`baseRef`", "line 6"]);
    assert_eq!(
        kind,
        ConfigErrorKind::DuplicateOptionsKey {
            key: "baseRef",
            first_line: 6
        }
    );
}

#[test]
fn unknown_top_level_key_does_not_cascade_into_its_children() {
    let text = format!("{ONE_GATE}env:\n  FOO: bar\n    deeper: x\n");
    let kind = single(&text, Some(5), &["`env`", "version, gates, options"]);
    assert_eq!(
        kind,
        ConfigErrorKind::UnknownTopLevelKey { key: "env".into() }
    );
}

#[test]
fn misplaced_lines() {
    // Indented under `version:`.
    let kind = single(
        &format!("version: 1\n  gates:\n{}", &ONE_GATE[11..]),
        Some(2),
        &["`gates:`", "not under"],
    );
    assert!(matches!(
        kind,
        ConfigErrorKind::IndentedOutsideSection { .. }
    ));
    // An item without its dash.
    let text = format!("{ONE_GATE}  id: b\n");
    let kind = single(&text, Some(5), &["`- `", "`id: b`"]);
    assert!(matches!(kind, ConfigErrorKind::GateItemWithoutDash { .. }));
    // A gate key before any item.
    let text = "version: 1\ngates:\n    id: a\n  - id: b\n    command: true\n";
    let kind = single(text, Some(3), &["`id: a`", "before any"]);
    assert!(matches!(kind, ConfigErrorKind::GateKeyOutsideItem { .. }));
    // Depth 4 under options, depth 6 anywhere.
    let text = format!("{ONE_GATE}options:\n    baseRef: main\n");
    let kind = single(&text, Some(6), &["4 spaces"]);
    assert_eq!(kind, ConfigErrorKind::UnexpectedIndentation { spaces: 4 });
    single(
        &format!("{ONE_GATE}      more: x\n"),
        Some(5),
        &["6 spaces"],
    );
    // `gates:` with an inline value.
    single(
        "version: 1\ngates: []\n  - id: a\n    command: true\n",
        Some(2),
        &["`gates:`", "`[]`"],
    );
}

#[test]
fn lines_that_are_not_key_value() {
    let kind = single(
        &format!("{ONE_GATE}    just words\n"),
        Some(5),
        &["`key: value`", "just words"],
    );
    assert!(matches!(kind, ConfigErrorKind::ExpectedKeyValue { .. }));
    // A quoted key is not a plain word: v1 keys are written bare.
    let errors = rejected("\"version\": 1\ngates:\n  - id: a\n    command: true\n");
    let kinds: Vec<_> = errors.iter().map(|e| (e.line, e.kind.clone())).collect();
    assert_eq!(
        kinds,
        [
            (
                Some(1),
                ConfigErrorKind::ExpectedKeyValue {
                    place: "at the top level",
                    found: "\"version\": 1".into()
                }
            ),
            (None, ConfigErrorKind::MissingVersion),
        ]
    );
    // A gate item with nothing after the dash.
    let errors = rejected(&format!("{ONE_GATE}  - \n"));
    let kinds: Vec<_> = errors.iter().map(|e| (e.line, e.kind.clone())).collect();
    assert_eq!(
        kinds,
        [
            (
                Some(5),
                ConfigErrorKind::ExpectedKeyValue {
                    place: "in a gate",
                    found: String::new()
                }
            ),
            (Some(5), ConfigErrorKind::MissingId),
            (Some(5), ConfigErrorKind::MissingCommand),
        ]
    );
}

#[test]
fn byte_order_mark_is_refused_but_the_rest_is_still_read() {
    let text = format!("\u{feff}{ONE_GATE}");
    let kind = single(&text, Some(1), &["byte order mark"]);
    assert_eq!(kind, ConfigErrorKind::ByteOrderMark);
}

#[test]
fn every_problem_is_reported_at_once_in_line_order() {
    let text = "\
version: 1
gates:
  - id: Bad_Id
    command: true
    timeoutSec: 0
  - id: ok
    command: true
options:
  parallel: true
";
    let errors = rejected(text);
    let lines: Vec<_> = errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [Some(3), Some(5), Some(9)], "{errors:#?}");
    assert!(matches!(errors[0].kind, ConfigErrorKind::InvalidId { .. }));
    assert!(matches!(
        errors[1].kind,
        ConfigErrorKind::TimeoutOutOfRange { .. }
    ));
    assert!(matches!(
        errors[2].kind,
        ConfigErrorKind::UnknownOptionsKey { .. }
    ));
}

#[test]
fn syntax_and_meaning_problems_interleave_by_line_and_file_problems_come_last() {
    let text = "\
gates:
  - id: a
    command: true
    retryOnFail: 3
\tmutex: x
  - id: a
    command: true
";
    let errors = rejected(text);
    let got: Vec<_> = errors
        .iter()
        .map(|e| (e.line, std::mem::discriminant(&e.kind)))
        .collect();
    let want = [
        (
            Some(4),
            std::mem::discriminant(&ConfigErrorKind::RetryOutOfRange {
                found: String::new(),
            }),
        ),
        (Some(5), std::mem::discriminant(&ConfigErrorKind::Tab)),
        (
            Some(6),
            std::mem::discriminant(&ConfigErrorKind::DuplicateId {
                id: String::new(),
                first_line: 0,
            }),
        ),
        (
            None,
            std::mem::discriminant(&ConfigErrorKind::MissingVersion),
        ),
    ];
    assert_eq!(got, want, "{errors:#?}");
}

#[test]
fn display_is_path_line_message_one_per_line() {
    let text = "version: 3\ngates:\n";
    let errors = parse_v1(Utf8Path::new(PATH), text)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        errors.as_deref(),
        Some(
            ".commandmate/verify.yaml:1: version must be 1, found `3`\n\
             .commandmate/verify.yaml: no gates are defined; add `gates:` with at least one \
             `- id: …` item and its `command`"
        )
    );
}

// --- accepted variants -----------------------------------------------------------------------

#[test]
fn quoted_version_is_accepted() {
    for version in ["\"1\"", "'1'"] {
        accepted(&ONE_GATE.replace("version: 1", &format!("version: {version}")));
    }
    single(
        &ONE_GATE.replace("version: 1", "version: 1.0"),
        Some(1),
        &["`1.0`"],
    );
}

#[test]
fn quoted_timeout_is_accepted() {
    let config = accepted(&format!("{ONE_GATE}    timeoutSec: \"900\"\n"));
    assert_eq!(config.gates[0].timeout_sec, 900);
    let config = accepted(&format!("{ONE_GATE}    timeoutSec: '0900'\n"));
    assert_eq!(config.gates[0].timeout_sec, 900);
}

#[test]
fn hash_inside_a_value_is_kept() {
    let text = "version: 1\ngates:\n  - id: a\n    command: echo one # two\n  - id: b\n    command: \"echo #x\"\n";
    let config = accepted(text);
    assert_eq!(config.gates[0].command, "echo one # two");
    assert_eq!(config.gates[1].command, "echo #x");
}

#[test]
fn colons_after_the_first_stay_in_the_value() {
    let text = "version: 1\ngates:\n  - id: a\n    command: sh -c \"echo a:b\"\n    mutex: port.8080\noptions:\n  baseRef: refs/remotes/origin/main\n";
    let config = accepted(text);
    assert_eq!(config.gates[0].command, "sh -c \"echo a:b\"");
    // A value needs no space after the colon, as in CommandMate's reader.
    let config = accepted("version:1\ngates:\n  - id:a\n    command:echo x:y\n");
    assert_eq!(config.gates[0].command, "echo x:y");
}

#[test]
fn quotes_are_removed_once_without_escapes() {
    let text = "version: 1\ngates:\n  - id: a\n    command: \"printf '%s\\n' \"x\"\"\n  - id: b\n    command: 'it''s'\n";
    let config = accepted(text);
    assert_eq!(config.gates[0].command, "printf '%s\\n' \"x\"");
    assert_eq!(config.gates[1].command, "it''s");
}

#[test]
fn crlf_line_endings_are_accepted() {
    let text =
        "version: 1\r\ngates:\r\n  - id: a\r\n    command: make test\r\n    timeoutSec: 30\r\n";
    let config = accepted(text);
    assert_eq!(config.gates[0].command, "make test");
    assert_eq!(config.gates[0].timeout_sec, 30);
    // Line numbers stay right under CRLF.
    single(
        "version: 1\r\ngates:\r\n  - id: a\r\n    command: x\r\n    nope: 1\r\n",
        Some(5),
        &["unknown gate key: nope"],
    );
}

#[test]
fn comments_and_blank_lines_anywhere() {
    let text = "\
# verify.yaml
\n   \nversion: 1
  # indented comment under version
gates:
# column-0 comment inside the list
  - id: a
   # odd-indented comment

    command: true
      # deep comment
  - id: b
    command: false
options:
    # comment
  requireCommit: true
# trailing
";
    let config = accepted(text);
    assert_eq!(config.gates.len(), 2);
    assert_eq!(config.gates[0].line, 8);
    assert_eq!(config.gates[1].line, 13);
    assert!(config.options.require_commit);
}

#[test]
fn a_file_without_a_final_newline_is_read_whole() {
    let config = accepted("version: 1\ngates:\n  - id: a\n    command: true");
    assert_eq!(config.gates[0].command, "true");
}

#[test]
fn defaults_are_applied() {
    let config = accepted(ONE_GATE);
    assert_eq!(
        config,
        Config {
            path: PATH.into(),
            gates: vec![GateSpec {
                id: "lint".into(),
                command: "make lint".into(),
                timeout_sec: 600,
                mutex: None,
                retry_on_fail: false,
                flaky_is_pass: false,
                line: 3,
            }],
            options: Options {
                base_ref: None,
                skip_in_primary_checkout: true,
                max_log_tail_bytes: 8192,
                require_commit: false,
                require_env_clean: false,
            },
        }
    );
    assert_eq!(config.options, Options::default());
}

#[test]
fn every_key_is_parsed() {
    let text = "\
version: 1
gates:
  - id: e2e
    command: npm run test:e2e
    timeoutSec: 1800
    mutex: e2e-port
    retryOnFail: 1
    flakyIsPass: true
  - mutex: Db_1.lock
    command: cargo test
    id: \"0unit\"
    retryOnFail: \"0\"
    flakyIsPass: false
options:
  baseRef: origin/develop
  skipInPrimaryCheckout: false
  maxLogTailBytes: 0
  requireCommit: true
  requireEnvClean: \"true\"
";
    let config = accepted(text);
    assert_eq!(
        config.gates,
        [
            GateSpec {
                id: "e2e".into(),
                command: "npm run test:e2e".into(),
                timeout_sec: 1800,
                mutex: Some("e2e-port".into()),
                retry_on_fail: true,
                flaky_is_pass: true,
                line: 3,
            },
            GateSpec {
                id: "0unit".into(),
                command: "cargo test".into(),
                timeout_sec: 600,
                mutex: Some("Db_1.lock".into()),
                retry_on_fail: false,
                flaky_is_pass: false,
                line: 9,
            },
        ]
    );
    assert_eq!(
        config.options,
        Options {
            base_ref: Some("origin/develop".into()),
            skip_in_primary_checkout: false,
            max_log_tail_bytes: 0,
            require_commit: true,
            require_env_clean: true,
        }
    );
    let config = accepted(&format!("{ONE_GATE}options:\n  maxLogTailBytes: 1048576\n"));
    assert_eq!(config.options.max_log_tail_bytes, 1_048_576);
}

#[test]
fn options_block_may_be_empty() {
    assert_eq!(
        accepted(&format!("{ONE_GATE}options:\n")).options,
        Options::default()
    );
}

#[test]
fn config_serializes_for_the_json_report() {
    let config = accepted(&format!(
        "{ONE_GATE}    mutex: m\noptions:\n  baseRef: main\n"
    ));
    let json = serde_json::to_value(&config).map_err(|e| e.to_string());
    let expected = serde_json::json!({
        "path": PATH,
        "gates": [{
            "id": "lint", "command": "make lint", "timeout_sec": 600, "mutex": "m",
            "retry_on_fail": false, "flaky_is_pass": false, "line": 3
        }],
        "options": {
            "base_ref": "main", "skip_in_primary_checkout": true, "max_log_tail_bytes": 8192,
            "require_commit": false, "require_env_clean": false
        }
    });
    assert_eq!(json, Ok(expected));
}

// --- load --------------------------------------------------------------------------------------

fn temp_dir() -> (tempfile::TempDir, Utf8PathBuf) {
    let dir = tempfile::tempdir().map_err(|e| e.to_string());
    let dir = match dir {
        Ok(dir) => dir,
        Err(e) => panic!("cannot create a temp dir: {e}"),
    };
    let path = match Utf8PathBuf::from_path_buf(dir.path().to_path_buf()) {
        Ok(path) => path,
        Err(path) => panic!("temp dir is not UTF-8: {}", path.display()),
    };
    (dir, path)
}

fn write(path: &Utf8Path, bytes: &[u8]) {
    if let Err(e) = std::fs::write(path, bytes) {
        panic!("cannot write {path}: {e}");
    }
}

#[test]
fn load_reads_a_file_and_labels_the_config_with_its_path() {
    let (_guard, dir) = temp_dir();
    let path = dir.join("verify.yaml");
    write(&path, ONE_GATE.as_bytes());
    match load(&path) {
        Ok(config) => {
            assert_eq!(config.path, path);
            assert_eq!(config.gates[0].id, "lint");
        }
        Err(errors) => panic!("{errors}"),
    }
}

#[test]
fn load_reports_a_missing_file_with_its_path() {
    let (_guard, dir) = temp_dir();
    let path = dir.join("nope.yaml");
    let errors = load(&path).err().map(|e| e.0);
    let Some([error]) = errors.as_deref() else {
        panic!("expected one error, got {errors:?}")
    };
    assert_eq!(error.kind, ConfigErrorKind::NotFound);
    assert_eq!(error.line, None);
    assert!(
        error
            .to_string()
            .starts_with(&format!("{path}: config file not found")),
        "{error}"
    );
}

#[test]
fn load_reports_a_directory_as_unreadable() {
    let (_guard, dir) = temp_dir();
    let errors = load(&dir).err().map(|e| e.0);
    let Some([error]) = errors.as_deref() else {
        panic!("expected one error, got {errors:?}")
    };
    assert!(
        matches!(error.kind, ConfigErrorKind::Unreadable { .. }),
        "{error}"
    );
    assert!(error.to_string().contains(dir.as_str()), "{error}");
}

#[test]
fn load_reports_non_utf8_with_line_and_offset() {
    let (_guard, dir) = temp_dir();
    let path = dir.join("verify.yaml");
    write(
        &path,
        b"version: 1\ngates:\n  - id: a\n    command: echo \xff\n",
    );
    let errors = load(&path).err().map(|e| e.0);
    let Some([error]) = errors.as_deref() else {
        panic!("expected one error, got {errors:?}")
    };
    assert_eq!(error.kind, ConfigErrorKind::NotUtf8 { offset: 46 });
    assert_eq!(error.line, Some(4));
    assert!(error.to_string().contains("UTF-8"), "{error}");
}

#[test]
fn load_reports_every_problem_of_the_file() {
    let (_guard, dir) = temp_dir();
    let path = dir.join("verify.yaml");
    write(&path, b"version: 2\ngates:\n  - id: a\n");
    let errors = load(&path).err().map(|e| e.to_string());
    assert_eq!(
        errors,
        Some(format!(
            "{path}:1: version must be 1, found `2`\n{path}:3: gate is missing command: add \
             `command: <shell command>`"
        ))
    );
}

// --- no input panics; what is accepted is always well-formed -----------------------------------

/// Lines built from the grammar's own pieces reach far deeper than random text.
fn yamlish_line() -> impl Strategy<Value = String> {
    let indent = prop::sample::select(vec!["", " ", "  ", "   ", "    ", "      "]);
    let head = prop::sample::select(vec![
        "",
        "- ",
        "#",
        "version",
        "gates",
        "options",
        "id",
        "command",
        "timeoutSec",
        "mutex",
        "retryOnFail",
        "flakyIsPass",
        "baseRef",
        "skipInPrimaryCheckout",
        "maxLogTailBytes",
        "requireCommit",
        "requireEnvClean",
        "- id",
        "- command",
        "x",
    ]);
    let colon = prop::sample::select(vec![":", ": ", "", " : "]);
    let value = prop::sample::select(vec![
        "",
        "1",
        "0",
        "2",
        "true",
        "false",
        "\"1\"",
        "'a'",
        "\"\"",
        "a",
        "ab-c",
        "&x",
        "*x",
        "[1]",
        "{a: b}",
        "|",
        ">-",
        "7200",
        "7201",
        "1048576",
        "99999999999999999999",
        "\t",
        "\r",
        "é",
        "\u{feff}",
        "work-evidence",
        "#c",
        "a:b",
    ]);
    (indent, head, colon, value).prop_map(|(i, h, c, v)| format!("{i}{h}{c}{v}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = parse(&text);
    }

    #[test]
    fn grammar_shaped_text_never_panics_and_errors_are_in_line_order(
        lines in prop::collection::vec(yamlish_line(), 0..24),
        crlf in any::<bool>(),
    ) {
        let text = lines.join(if crlf { "\r\n" } else { "\n" });
        match parse(&text) {
            Ok(config) => {
                prop_assert!(!config.gates.is_empty());
                let mut ids: Vec<_> = config.gates.iter().map(|g| g.id.as_str()).collect();
                ids.sort_unstable();
                ids.dedup();
                prop_assert_eq!(ids.len(), config.gates.len());
                for gate in &config.gates {
                    prop_assert!((1..=7200).contains(&gate.timeout_sec));
                    prop_assert!(!gate.command.is_empty());
                    prop_assert!(!gate.flaky_is_pass || gate.retry_on_fail);
                }
                prop_assert!(config.options.max_log_tail_bytes <= 1_048_576);
            }
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                let keys: Vec<_> = errors.iter().map(|e| (e.line.is_none(), e.line)).collect();
                let mut sorted = keys.clone();
                sorted.sort();
                prop_assert_eq!(keys, sorted);
                let line_count = text.split('\n').count();
                for error in &errors {
                    prop_assert!(error.line.is_none_or(|l| (1..=line_count).contains(&l)));
                }
            }
        }
    }

    /// Any valid gate list round-trips its values exactly.
    #[test]
    fn generated_valid_gates_are_read_back_exactly(
        gates in prop::collection::vec(
            ("[a-z0-9][a-z0-9-]{0,31}", "[a-z][ -~]{0,40}", 1u32..=7200, prop::option::of("[A-Za-z0-9_.-]{1,64}"), any::<bool>()),
            1..6,
        )
    ) {
        let mut text = String::from("version: 1\ngates:\n");
        let mut expected = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (id, command, timeout, mutex, retry) in gates {
            if ["work-evidence", "scope", "env-clean"].contains(&id.as_str()) || !seen.insert(id.clone()) {
                continue;
            }
            let command = command.trim_end().to_owned();
            let line = text.lines().count() + 1;
            text.push_str(&format!("  - id: {id}\n    command: {command}\n    timeoutSec: {timeout}\n"));
            if let Some(m) = &mutex {
                text.push_str(&format!("    mutex: {m}\n"));
            }
            text.push_str(&format!("    retryOnFail: {}\n", u8::from(retry)));
            expected.push(GateSpec { id, command, timeout_sec: timeout, mutex, retry_on_fail: retry, flaky_is_pass: false, line });
        }
        prop_assume!(!expected.is_empty());
        let config = parse(&text);
        prop_assert_eq!(config.map(|c| c.gates), Ok(expected));
    }
}
