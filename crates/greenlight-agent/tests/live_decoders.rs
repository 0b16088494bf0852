//! The activity decoders, pure: real captured CLI output, chunk-boundary independence, line
//! bounds and byte replacement.
//!
//! Fixtures (`tests/fixtures/`), captured by running the real CLIs here, offline and logged out:
//! - `claude-2.1.197-stream-json-not-logged-in.jsonl`: `claude -p --model sonnet --output-format
//!   stream-json --verbose --strict-mcp-config --no-session-persistence --safe-mode --tools ""`,
//!   exit 1 (a `system` init event, one `assistant` text event, the `result` envelope).
//! - `codex-exec-json-offline.jsonl`: `codex exec -m gpt-5 --json --skip-git-repo-check
//!   --sandbox read-only -` (codex-cli 0.171.0), stopped after 25 s of reconnecting.

use greenlight_agent::Activity;
use greenlight_agent::Family;
use greenlight_agent::live::{ActivityDecoder, LineBuffer, MAX_TOOL_TEXT_BYTES, clip};
use proptest::prelude::*;

const CLAUDE_CAPTURE: &[u8] =
    include_bytes!("fixtures/claude-2.1.197-stream-json-not-logged-in.jsonl");
const CODEX_CAPTURE: &[u8] = include_bytes!("fixtures/codex-exec-json-offline.jsonl");

/// A claude stream-json turn with every block kind, shaped like the real CLI's events.
const CLAUDE_TURN: &str = concat!(
    r#"{"type":"system","subtype":"init","cwd":"/repo","session_id":"s","tools":["Bash"],"model":"claude-sonnet-5"}"#,
    "\n",
    r#"{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"thinking","thinking":"Look first.","signature":"x"}]},"parent_tool_use_id":null,"session_id":"s"}"#,
    "\n",
    r#"{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"Checking — naïvely."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"cargo test"}}]},"session_id":"s"}"#,
    "\n",
    r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":[{"type":"text","text":"error[E0308]: mismatched types"}],"is_error":true}]},"session_id":"s"}"#,
    "\n",
    r#"{"type":"assistant","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Read","input":{"file_path":"src/lib.rs"}}]},"session_id":"s"}"#,
    "\r\n",
    r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2","type":"tool_result","content":"fn main() {}"}]},"session_id":"s"}"#,
    "\n",
    "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"Fixed.\"}]}}\n",
    "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"Fixed.\",\"usage\":{\"input_tokens\":3}}\n",
);

/// A codex `exec --json` turn with every item kind the decoder knows.
const CODEX_TURN: &str = concat!(
    "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
    "{\"type\":\"turn.started\"}\n",
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"reasoning\",\"text\":\"**Planning**\"}}\n",
    "{\"type\":\"item.started\",\"item\":{\"id\":\"item_1\",\"type\":\"command_execution\",\"command\":\"bash -lc 'cargo test'\",\"aggregated_output\":\"\",\"exit_code\":null,\"status\":\"in_progress\"}}\n",
    "{\"type\":\"item.updated\",\"item\":{\"id\":\"item_1\",\"type\":\"command_execution\",\"command\":\"bash -lc 'cargo test'\",\"aggregated_output\":\"Compiling\",\"exit_code\":null,\"status\":\"in_progress\"}}\n",
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_1\",\"type\":\"command_execution\",\"command\":\"bash -lc 'cargo test'\",\"aggregated_output\":\"test result: FAILED\\n\",\"exit_code\":101,\"status\":\"failed\"}}\n",
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_2\",\"type\":\"file_change\",\"changes\":[{\"path\":\"src/lib.rs\",\"kind\":\"update\"}],\"status\":\"completed\"}}\n",
    "{\"type\":\"item.started\",\"item\":{\"id\":\"item_3\",\"type\":\"mcp_tool_call\",\"server\":\"greenlight\",\"tool\":\"verify\",\"arguments\":{\"gate\":\"test\"},\"result\":null,\"error\":null,\"status\":\"in_progress\"}}\n",
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_3\",\"type\":\"mcp_tool_call\",\"server\":\"greenlight\",\"tool\":\"verify\",\"arguments\":{\"gate\":\"test\"},\"result\":null,\"error\":{\"message\":\"gate failed\"},\"status\":\"failed\"}}\n",
    "{\"type\":\"item.started\",\"item\":{\"id\":\"item_4\",\"type\":\"todo_list\",\"items\":[{\"text\":\"fix\",\"completed\":true},{\"text\":\"test\",\"completed\":false}]}}\n",
    "{\"type\":\"error\",\"message\":\"Reconnecting... 1/5\"}\n",
    "{\"type\":\"item.completed\",\"item\":{\"id\":\"item_5\",\"type\":\"agent_message\",\"text\":\"Done.\"}}\n",
    "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"cached_input_tokens\":4,\"output_tokens\":3}}\n",
);

fn decode(family: Family, bytes: &[u8]) -> Vec<Activity> {
    let mut decoder = ActivityDecoder::new(family);
    let mut out = decoder.feed(bytes);
    out.extend(decoder.finish());
    out
}

fn decode_split(family: Family, bytes: &[u8], cuts: &[usize], max_line: usize) -> Vec<Activity> {
    let mut decoder = ActivityDecoder::with_max_line(family, max_line);
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for cut in cuts {
        out.extend(decoder.feed(&bytes[at..cut]));
        at = cut;
    }
    out.extend(decoder.feed(&bytes[at..]));
    out.extend(decoder.finish());
    out
}

fn text(s: &str) -> Activity {
    Activity::Text(s.into())
}

#[test]
fn the_real_claude_stream_yields_its_assistant_text_and_nothing_from_init_or_result() {
    assert_eq!(
        decode(Family::Claude, CLAUDE_CAPTURE),
        [text("Not logged in · Please run /login")]
    );
}

#[test]
fn the_real_codex_stream_yields_its_error_items_and_reconnect_events_in_order() {
    let got = decode(Family::Codex, CODEX_CAPTURE);
    let lines: Vec<String> = got
        .iter()
        .map(|a| match a {
            Activity::Output(line) => line.clone(),
            other => panic!("only output lines expected, got {other:?}"),
        })
        .collect();
    assert_eq!(lines.len(), 8, "{lines:#?}");
    assert!(lines[0].starts_with("error: Model metadata for `gpt-5` not found"));
    assert!(lines[1].starts_with("error: Reconnecting... 2/5"));
    assert!(lines[5].starts_with("error: Falling back from WebSockets"));
    assert!(lines[7].starts_with("error: Reconnecting... waiting for network"));
}

#[test]
fn every_claude_block_kind_becomes_activity_and_results_repeat_the_tool_name() {
    assert_eq!(
        decode(Family::Claude, CLAUDE_TURN.as_bytes()),
        [
            Activity::Thinking("Look first.".into()),
            text("Checking — naïvely."),
            Activity::ToolStarted {
                id: "toolu_1".into(),
                name: "Bash".into(),
                input: r#"{"command":"cargo test"}"#.into()
            },
            Activity::ToolFinished {
                id: "toolu_1".into(),
                name: "Bash".into(),
                failed: true,
                output: "error[E0308]: mismatched types".into()
            },
            Activity::ToolStarted {
                id: "toolu_2".into(),
                name: "Read".into(),
                input: r#"{"file_path":"src/lib.rs"}"#.into()
            },
            Activity::ToolFinished {
                id: "toolu_2".into(),
                name: "Read".into(),
                failed: false,
                output: "fn main() {}".into()
            },
            text("Fixed."),
        ]
    );
}

#[test]
fn every_codex_item_kind_becomes_activity_with_one_start_per_tool() {
    let started = |id: &str, name: &str, input: &str| Activity::ToolStarted {
        id: id.into(),
        name: name.into(),
        input: input.into(),
    };
    let finished = |id: &str, name: &str, failed: bool, output: &str| Activity::ToolFinished {
        id: id.into(),
        name: name.into(),
        failed,
        output: output.into(),
    };
    assert_eq!(
        decode(Family::Codex, CODEX_TURN.as_bytes()),
        [
            Activity::Thinking("**Planning**".into()),
            started("item_1", "command", "bash -lc 'cargo test'"),
            finished("item_1", "command", true, "test result: FAILED\n"),
            started("item_2", "file_change", "update src/lib.rs"),
            finished("item_2", "file_change", false, "completed"),
            started("item_3", "greenlight.verify", r#"{"gate":"test"}"#),
            finished("item_3", "greenlight.verify", true, "gate failed"),
            Activity::Output("plan: [x] fix; [ ] test".into()),
            Activity::Output("error: Reconnecting... 1/5".into()),
            text("Done."),
        ]
    );
}

#[test]
fn command_lines_pass_through_with_bad_bytes_replaced_and_a_last_line_without_newline() {
    let got = decode(Family::Command, b"one\r\ntw\xffo\n\nthree");
    assert_eq!(
        got,
        [
            Activity::Output("one".into()),
            Activity::Output("tw\u{fffd}o".into()),
            Activity::Output(String::new()),
            Activity::Output("three".into()),
        ]
    );
}

#[test]
fn invalid_utf8_inside_a_json_string_is_replaced_not_dropped() {
    let line = b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"caf\xc3 ok\"}]}}\n";
    assert_eq!(decode(Family::Claude, line), [text("caf\u{fffd} ok")]);
    let item = b"{\"type\":\"item.completed\",\"item\":{\"id\":\"1\",\"type\":\"agent_message\",\"text\":\"\xfe!\"}}\n";
    assert_eq!(decode(Family::Codex, item), [text("\u{fffd}!")]);
}

#[test]
fn an_over_long_line_loses_its_activity_only_and_the_next_line_decodes() {
    let long_text = "x".repeat(200);
    let stream = format!(
        "{{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{long_text}\"}}]}}}}\n\
         {{\"type\":\"assistant\",\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\"short\"}}]}}}}\n"
    );
    assert_eq!(
        decode_split(Family::Claude, stream.as_bytes(), &[], 128),
        [text("short")]
    );
    // A command agent's long line keeps its start, marked as cut.
    let got = decode_split(
        Family::Command,
        format!("{long_text}\nok\n").as_bytes(),
        &[],
        16,
    );
    assert_eq!(
        got,
        [
            Activity::Output(format!("{}…", "x".repeat(16))),
            Activity::Output("ok".into())
        ]
    );
}

#[test]
fn garbage_partial_and_unknown_lines_are_skipped() {
    let stream = "not json\n{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\"\n[1,2]\n{\"type\":\"stream_event\"}\n{\"type\":\"item.completed\"}\n";
    assert!(decode(Family::Claude, stream.as_bytes()).is_empty());
    assert!(decode(Family::Codex, stream.as_bytes()).is_empty());
}

#[test]
fn tool_input_and_output_are_clipped_on_a_character_boundary() {
    let big = "é".repeat(MAX_TOOL_TEXT_BYTES);
    let line = format!(
        "{{\"type\":\"user\",\"message\":{{\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\"content\":\"{big}\"}}]}}}}\n"
    );
    let got = decode(Family::Claude, line.as_bytes());
    let [Activity::ToolFinished { output, .. }] = got.as_slice() else {
        panic!("one tool result expected: {got:?}");
    };
    assert!(output.len() <= MAX_TOOL_TEXT_BYTES + '…'.len_utf8());
    assert!(output.ends_with('…'));
    assert_eq!(clip("short", 10), "short");
    assert_eq!(clip("ééé", 3), "é…");
}

#[test]
fn lines_split_at_newlines_only_and_strip_one_carriage_return() {
    let mut lines = LineBuffer::new(64);
    let mut seen = Vec::new();
    lines.feed(b"a\r\nb", |l| seen.push((l.bytes.to_vec(), l.complete)));
    lines.feed(b"\rc\n", |l| seen.push((l.bytes.to_vec(), l.complete)));
    lines.finish(|l| seen.push((l.bytes.to_vec(), l.complete)));
    assert_eq!(
        seen,
        [(b"a".to_vec(), true), (b"b\rc".to_vec(), true)],
        "nothing is left to finish after a final newline"
    );
}

fn mixed_inputs() -> impl Strategy<Value = (Family, Vec<u8>)> {
    prop_oneof![
        Just((Family::Claude, CLAUDE_TURN.as_bytes().to_vec())),
        Just((Family::Claude, CLAUDE_CAPTURE.to_vec())),
        Just((Family::Codex, CODEX_TURN.as_bytes().to_vec())),
        Just((Family::Codex, CODEX_CAPTURE.to_vec())),
        Just((
            Family::Command,
            [
                "naïve — ok\r\n\u{1F600} done\n".as_bytes(),
                b"\xff\xfe tail"
            ]
            .concat()
        )),
    ]
}

proptest! {
    /// The same bytes give the same activity however the pipe happens to split them: at any
    /// byte, mid-line, mid-character, into one-byte chunks.
    #[test]
    fn chunk_boundaries_never_change_the_activity(
        (family, bytes) in mixed_inputs(),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
    ) {
        let whole = decode_split(family, &bytes, &[], 1 << 20);
        prop_assert!(!whole.is_empty());
        prop_assert_eq!(decode_split(family, &bytes, &cuts, 1 << 20), whole);
        // Under a tight line bound too: what is dropped does not depend on the chunking either.
        let tight = decode_split(family, &bytes, &[], 150);
        prop_assert_eq!(decode_split(family, &bytes, &cuts, 150), tight);
    }

    #[test]
    fn one_byte_chunks_match_one_chunk((family, bytes) in mixed_inputs()) {
        let cuts: Vec<usize> = (1..bytes.len()).collect();
        prop_assert_eq!(
            decode_split(family, &bytes, &cuts, 1 << 20),
            decode_split(family, &bytes, &[], 1 << 20)
        );
    }
}
