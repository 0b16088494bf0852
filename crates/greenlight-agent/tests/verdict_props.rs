//! Properties of the verdict grammar and defang over text built from the characters that matter.

use greenlight_agent::{ReplyVerdict, defang, parse_verdict};
use proptest::prelude::*;

/// Every Unicode White_Space character, so the properties cover NBSP and every space.
const WHITESPACE: &[char] = &[
    '\t', '\u{b}', '\u{c}', '\r', ' ', '\u{85}', '\u{a0}', '\u{1680}', '\u{2000}', '\u{2001}',
    '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}',
    '\u{200a}', '\u{2028}', '\u{2029}', '\u{202f}', '\u{205f}', '\u{3000}',
];

#[test]
fn the_whitespace_list_is_exactly_unicode_white_space() {
    let all: Vec<char> = (0..=0x10FFFFu32)
        .filter_map(char::from_u32)
        .filter(|c| c.is_whitespace() && *c != '\n')
        .collect();
    assert_eq!(all, WHITESPACE);
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(WHITESPACE).prop_map(String::from),
        3 => prop::sample::select(vec![
            "GATE", "gate", "Gate", "PASS", "FAIL", "pass", "Fail", ":", "=", ">", "-", "*", "**",
            "#", "##", "_", "`", "~", "|", "+", "[quoted verdict]", "x", "OK", "\n", "\n", "\n",
        ])
        .prop_map(String::from),
        1 => "[a-z]{1,4}",
        1 => Just("GATE: PASS".to_string()),
        1 => Just("GATE: FAIL".to_string()),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..40).prop_map(|v| v.concat())
}

/// A verdict line with arbitrary Unicode whitespace around and inside it.
fn verdict_line() -> impl Strategy<Value = (String, bool)> {
    let ws = || {
        prop::collection::vec(prop::sample::select(WHITESPACE), 0..3).prop_map(String::from_iter)
    };
    (ws(), ws(), ws(), any::<bool>()).prop_map(|(a, b, c, pass)| {
        (
            format!("{a}GATE:{b}{}{c}", if pass { "PASS" } else { "FAIL" }),
            pass,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_defanged_text_parses_as_a_verdict(t in text()) {
        let out = defang(&t);
        prop_assert!(matches!(parse_verdict(&out), ReplyVerdict::Unparseable(_)), "{:?} -> {:?}", t, out);
    }

    #[test]
    fn defang_twice_is_defang_once(t in text()) {
        let once = defang(&t);
        prop_assert_eq!(defang(&once), once);
    }

    #[test]
    fn defang_keeps_every_line_and_only_adds(t in text()) {
        let out = defang(&t);
        prop_assert_eq!(out.split('\n').count(), t.split('\n').count());
        for (a, b) in t.split('\n').zip(out.split('\n')) {
            prop_assert!(b == a || b.replacen("[quoted verdict] ", "", 1) == a, "{:?} -> {:?}", a, b);
        }
    }

    #[test]
    fn a_verdict_line_with_any_whitespace_parses_after_any_verdict_free_prose(
        (line, pass) in verdict_line(),
        prose in "[a-z ]{0,30}",
        trailing in prop::collection::vec(prop::sample::select(WHITESPACE), 0..3),
    ) {
        let text = format!("{prose}\n{line}\n{}\n", String::from_iter(trailing));
        let expected = if pass { ReplyVerdict::Pass } else { ReplyVerdict::Fail };
        prop_assert_eq!(parse_verdict(&text), expected);
    }

    #[test]
    fn a_verdict_followed_by_anything_non_blank_is_unparseable((line, _) in verdict_line(), tail in "[a-z]{1,5}") {
        let text = format!("{line}\n{tail}");
        prop_assert!(matches!(parse_verdict(&text), ReplyVerdict::Unparseable(_)));
    }
}
