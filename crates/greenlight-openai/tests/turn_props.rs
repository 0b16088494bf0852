//! Properties of the turn decoder and the text parser: chunking never changes the canonical
//! events, no input panics, and a deadline always returns with nothing held.

use std::path::PathBuf;

use greenlight_openai::golden::{self, End};
use greenlight_openai::{ToolCallParser, ToolFormat, TurnDecoder, TurnEvent, canonical};
use proptest::prelude::*;

fn golden_turns() -> Vec<(String, golden::GoldenTurn)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden-turns");
    let fault = |e: std::io::Error| -> ! { panic!("{}: {e}", dir.display()) };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| fault(e))
        .map(|e| e.unwrap_or_else(|e| fault(e)).path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let turn = golden::load(&p).unwrap_or_else(|e| panic!("{e}"));
            (p.display().to_string(), turn)
        })
        .collect()
}

fn body(turn: &golden::GoldenTurn) -> Vec<u8> {
    turn.chunks.concat()
}

/// The body cut at `cuts` (byte offsets, any order, duplicates allowed).
fn cut_at<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

/// Every golden turn gives its expected events for every single cut of its body, and for one
/// byte per chunk.
#[test]
fn every_cut_of_every_golden_turn_gives_the_same_canonical_events() {
    for (name, turn) in golden_turns() {
        let bytes = body(&turn);
        for cut in 0..=bytes.len() {
            let got = golden::decode(turn.format, turn.end, &[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(got, turn.expected, "{name}: cut at byte {cut}");
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            golden::decode(turn.format, turn.end, &bytewise),
            turn.expected,
            "{name}: one byte per chunk"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random multi-cuts of every golden turn give its expected events.
    #[test]
    fn random_multi_cuts_of_golden_turns_give_the_same_events(cuts in prop::collection::vec(any::<usize>(), 0..40)) {
        for (name, turn) in golden_turns() {
            let bytes = body(&turn);
            let chunks = cut_at(&bytes, &cuts);
            prop_assert_eq!(golden::decode(turn.format, turn.end, &chunks), turn.expected.clone(), "{}", name);
        }
    }
}

/// Model-like text: markers whole and cut, fences, JSON calls good and bad, multibyte text.
fn model_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<think>".to_string()),
        Just("</think>".to_string()),
        Just("<tool_call>".to_string()),
        Just("</tool_call>".to_string()),
        Just("<tool_".to_string()),
        Just("</th".to_string()),
        Just("```".to_string()),
        Just("````".to_string()),
        Just("```json\n".to_string()),
        Just("```tool_call\n".to_string()),
        Just("```rust\n".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("  ".to_string()),
        Just("`".to_string()),
        Just("<".to_string()),
        Just("{\"name\": \"f\", \"arguments\": {\"a\": [1, \"<x>\"]}}".to_string()),
        Just("[{\"name\": \"g\"}]".to_string()),
        Just("{\"name\":".to_string()),
        Just("é🙂中".to_string()),
        "[a-z ]{0,12}",
        any::<String>(),
    ];
    prop::collection::vec(piece, 0..30).prop_map(|v| v.concat())
}

fn char_cuts(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| {
            let mut at = c % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            at
        })
        .collect();
    points.push(0);
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| text[w[0]..w[1]].to_string())
        .collect()
}

fn parse_pieces(pieces: &[String], deadline: bool) -> Vec<TurnEvent> {
    let mut parser = ToolCallParser::new();
    let mut events: Vec<TurnEvent> = pieces.iter().flat_map(|p| parser.feed(p)).collect();
    events.extend(if deadline {
        parser.finish_at_deadline()
    } else {
        parser.finish()
    });
    assert!(!parser.is_holding());
    canonical(&events)
}

/// A body in the llama.cpp server's shape whose content deltas are `pieces`.
fn sse_body(pieces: &[String]) -> Vec<u8> {
    let mut body = String::new();
    for p in pieces {
        let chunk = serde_json::json!({"choices": [{"delta": {"content": p}, "finish_reason": null, "index": 0}], "object": "chat.completion.chunk"});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    body.push_str("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\",\"index\":0}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n");
    body.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The text parser gives the same canonical events however the text is cut, at the end of
    /// the text and at a deadline.
    #[test]
    fn the_parser_is_chunking_independent(text in model_text(), cuts in prop::collection::vec(any::<usize>(), 0..20), deadline in any::<bool>()) {
        let whole = parse_pieces(std::slice::from_ref(&text), deadline);
        let pieces = char_cuts(&text, &cuts);
        prop_assert_eq!(parse_pieces(&pieces, deadline), whole.clone());
        let chars: Vec<String> = text.chars().map(String::from).collect();
        prop_assert_eq!(parse_pieces(&chars, deadline), whole);
    }

    /// Text with no `<` and no backtick is one answer, exactly as written.
    #[test]
    fn plain_text_is_answer_text_unchanged(text in "[^<`]{1,200}", cuts in prop::collection::vec(any::<usize>(), 0..10)) {
        let pieces = char_cuts(&text, &cuts);
        prop_assert_eq!(parse_pieces(&pieces, false), vec![TurnEvent::Answer(text)]);
    }

    /// The whole decoder, on a body whose deltas carry model-like text, is chunking independent
    /// too — however the content was cut into deltas and the body into chunks.
    #[test]
    fn the_decoder_is_chunking_independent(text in model_text(), delta_cuts in prop::collection::vec(any::<usize>(), 0..10), body_cuts in prop::collection::vec(any::<usize>(), 0..30), format in prop_oneof![Just(ToolFormat::Native), Just(ToolFormat::Tags), Just(ToolFormat::Auto)]) {
        let whole = golden::decode(format, End::Eof, &[&sse_body(std::slice::from_ref(&text))]);
        let body = sse_body(&char_cuts(&text, &delta_cuts));
        prop_assert_eq!(golden::decode(format, End::Eof, &cut_at(&body, &body_cuts)), whole);
    }

    /// Arbitrary bytes never panic the decoder, whatever the ending.
    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..600), cuts in prop::collection::vec(any::<usize>(), 0..10), deadline in any::<bool>()) {
        let mut decoder = TurnDecoder::new(ToolFormat::Auto);
        for chunk in cut_at(&bytes, &cuts) {
            decoder.feed(chunk);
        }
        if deadline { decoder.finish_at_deadline(); } else { decoder.finish(); }
        prop_assert_eq!(decoder.finish(), vec![]);
    }

    /// SSE-shaped garbage (lines that look like events, JSON that nearly is a chunk) never
    /// panics either, and a deadline leaves nothing held.
    #[test]
    fn sse_shaped_input_never_panics_and_a_deadline_holds_nothing(lines in prop::collection::vec(prop_oneof![
        Just("data: {\"choices\":[{\"delta\":{\"content\":\"<tool_call>{\\\"name\\\":\\\"f\\\"\"}}]}".to_string()),
        Just("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\"}}]}}]}".to_string()),
        Just("data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"r\"},\"finish_reason\":\"stop\"}]}".to_string()),
        Just("data: {\"error\":{\"message\":\"x\"}}".to_string()),
        Just("data: [DONE]".to_string()),
        Just(": ping".to_string()),
        Just("".to_string()),
        "data: [ -~]{0,40}",
        any::<String>(),
    ], 0..20), cuts in prop::collection::vec(any::<usize>(), 0..10)) {
        let body = lines.join("\n").into_bytes();
        let mut decoder = TurnDecoder::new(ToolFormat::Auto);
        for chunk in cut_at(&body, &cuts) {
            decoder.feed(chunk);
        }
        decoder.finish_at_deadline();
        prop_assert_eq!(decoder.finish(), vec![]);
    }

    /// Arbitrary strings never panic the parser, and a deadline leaves nothing held.
    #[test]
    fn arbitrary_text_never_panics_the_parser(text in any::<String>(), cuts in prop::collection::vec(any::<usize>(), 0..10)) {
        let mut parser = ToolCallParser::new();
        for piece in char_cuts(&text, &cuts) {
            parser.feed(&piece);
        }
        parser.finish_at_deadline();
        prop_assert!(!parser.is_holding());
        prop_assert_eq!(parser.finish(), vec![]);
    }
}
