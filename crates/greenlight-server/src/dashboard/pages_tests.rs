//! The pages escape everything from the store and carry the hooks `app.js` looks up.

use super::*;
use crate::dashboard::{APP_JS, STYLE_CSS};

const HOSTILE: &str = r#"fix "it" <script>alert('x')</script> & <img src=x onerror=alert(1)>"#;

fn goal(id: i64, text: &str, state: &str) -> GoalSummary {
    GoalSummary {
        id,
        text: text.to_owned(),
        state: state.to_owned(),
        pause_reason: None,
        pause_detail: None,
        turns_used: 3,
        max_turns: 10,
        last_verdict: Some("fail".to_owned()),
        gates_green: 1,
        gates_total: 2,
        agent: "claude".to_owned(),
        worktree: "/tmp/wt \"one\"".to_owned(),
        created_at: 1_700_000_000_000,
        updated_at: 1_700_000_060_000,
        head: 42,
    }
}

fn run(id: i64) -> RunSummary {
    RunSummary {
        id,
        kind: "verify".to_owned(),
        worktree: "/tmp/<wt>".to_owned(),
        gates: 2,
        result: Some("failed".to_owned()),
        exit_code: Some(20),
        started_at: 1_700_000_000_000,
        ended_at: Some(1_700_000_004_500),
    }
}

/// The first page of a list holding just these goals and runs.
fn listed(goals: &[GoalSummary], runs: &[RunSummary]) -> String {
    let overview = Overview {
        goals: goals.to_vec(),
        next: None,
        runs: runs.to_vec(),
        event_seq: 0,
        frame_position: 0,
    };
    goals_page(&overview, &GoalsPageLinks::default())
}

fn snapshot(text: &str) -> GoalSnapshot {
    let mut g = goal(7, text, "paused");
    g.pause_reason = Some("gate-retries".to_owned());
    g.pause_detail = Some("gate 2 failed 3 times: <fix> it".to_owned());
    GoalSnapshot {
        goal: g,
        gates: vec![
            GateSummary {
                number: 1,
                command: "cargo build".to_owned(),
                attempts: 0,
                last_verdict: Some("pass".to_owned()),
                last_exit_code: Some(0),
                last_evidence: Some("built fine".to_owned()),
            },
            GateSummary {
                number: 2,
                command: r#"test "$(cat x)" = '<ok>'"#.to_owned(),
                attempts: 3,
                last_verdict: Some("fail".to_owned()),
                last_exit_code: Some(1),
                last_evidence: Some("expected <ok>, found </pre><script>x</script>".to_owned()),
            },
        ],
        turns: vec![TurnSummary {
            number: 1,
            started_at: 1_700_000_000_000,
            ended_at: Some(1_700_000_030_000),
            outcome: Some("ok".to_owned()),
        }],
    }
}

/// Every `<script` in a page is the one that loads app.js: no text from the store opened one.
fn only_our_script(page: &str) {
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert!(page.contains(r#"<script src="/assets/app.js" defer></script>"#));
    assert!(!page.contains("<img"), "{page}");
}

#[test]
fn the_goals_page_escapes_goal_text_and_paths() {
    let page = listed(&[goal(1, HOSTILE, "active")], &[run(4)]);
    only_our_script(&page);
    assert!(page.contains(
        "fix &quot;it&quot; &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; \
         &lt;img src=x onerror=alert(1)&gt;"
    ));
    assert!(page.contains(r#"title="/tmp/wt &quot;one&quot;""#));
    assert!(page.contains("/tmp/&lt;wt&gt;"));
}

#[test]
fn the_goals_page_has_the_hooks_the_script_needs() {
    let page = listed(&[goal(1, "a", "active"), goal(2, "b", "done")], &[run(4)]);
    assert!(page.contains(r#"data-page="goals""#));
    assert!(page.contains(r#"data-live-url="/api/live""#));
    assert!(page.contains(r#"<table id="goals""#));
    assert!(page.contains(r#"<table id="runs""#));
    assert!(page.contains(r#"<tr data-goal="1">"#));
    assert!(page.contains(r#"<a href="/goals/2">#2</a>"#));
    assert!(page.contains(r#"<a href="/runs/4">run-4</a>"#));
    assert!(page.contains(r#"id="pill""#));
    assert!(page.contains(r#"<p id="goals-empty" class="empty" hidden>"#));
    // An active goal's elapsed time ticks (no end); a done one stops at its last change.
    assert!(page.contains(r#"<span class="elapsed" data-from="1700000000000">"#));
    assert!(page.contains(
        r#"<span class="elapsed" data-from="1700000000000" data-to="1700000060000">1m 00s</span>"#
    ));
    assert!(page.contains(r#"<span class="badge b-fail">1/2 green</span>"#));
    assert!(page.contains("3/10"));
}

#[test]
fn an_empty_goals_page_says_how_to_start() {
    let page = listed(&[], &[]);
    assert!(page.contains(r#"<p id="goals-empty" class="empty">No goals yet"#));
    assert!(page.contains(r#"<p id="runs-empty" class="empty">No runs"#));
}

#[test]
fn the_goal_page_escapes_text_commands_evidence_and_the_pause() {
    let page = goal_page(&snapshot(HOSTILE));
    only_our_script(&page);
    assert!(page.contains(
        "<h1 id=\"goal-text\">fix &quot;it&quot; &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    ));
    assert!(page.contains("<title>#7 fix &quot;it&quot; &lt;script&gt;"));
    assert!(page.contains("<code>test &quot;$(cat x)&quot; = &#39;&lt;ok&gt;&#39;</code>"));
    assert!(page.contains("expected &lt;ok&gt;, found &lt;/pre&gt;&lt;script&gt;x&lt;/script&gt;"));
    assert!(page.contains("gate 2 failed 3 times: &lt;fix&gt; it"));
}

#[test]
fn the_goal_page_has_the_hooks_the_script_needs() {
    let page = goal_page(&snapshot("make the tests pass"));
    for hook in [
        r#"data-page="goal""#,
        r#"data-stream="7""#,
        r#"data-stream-url="/api/goals/7/stream""#,
        r#"data-snapshot-url="/api/goals/7""#,
        r#"data-head="42""#,
        r#"id="pill""#,
        r#"id="banner""#,
        r#"id="banner-text""#,
        r#"id="banner-reload""#,
        r#"id="timeline""#,
        r#"id="follow" checked"#,
        r#"id="errors-only""#,
        r#"id="frame-count""#,
        r#"id="goal-state""#,
        r#"id="goal-turns""#,
        r#"id="goal-gates""#,
        r#"id="goal-head-seq""#,
        r#"id="goal-pause""#,
        r#"<table id="gates""#,
        r#"<table id="turns""#,
    ] {
        assert!(page.contains(hook), "missing {hook}");
        // Every id the page carries is one the script knows.
        if let Some(id) = hook.strip_prefix("id=\"").and_then(|h| h.split('"').next()) {
            assert!(
                APP_JS.contains(&format!("'{id}'")),
                "app.js never looks up #{id}"
            );
        }
    }
    assert!(page.contains(r#"class="banner" role="alert" hidden"#));
}

#[test]
fn the_goal_page_renders_the_snapshot_without_script() {
    let page = goal_page(&snapshot("make the tests pass"));
    assert!(
        page.contains(r#"<dd id="goal-state"><span class="badge b-paused">paused</span></dd>"#)
    );
    assert!(page.contains(r#"<dd id="goal-turns">3/10</dd>"#));
    assert!(page.contains("<strong>gate-retries</strong>"));
    // The failing gate's evidence is open; the passing one's is folded.
    assert!(page.contains(r#"<tr data-gate="2" class="failing">"#));
    assert!(
        page.contains(r#"<details class="evidence" open><summary>evidence</summary><pre>expected"#)
    );
    assert!(
        page.contains(r#"<details class="evidence"><summary>evidence</summary><pre>built fine"#)
    );
    assert!(page.contains(r#"<tr data-gate="1"><td class="num">1</td>"#));
    assert!(page.contains(r#"(<span id="turns-count">1</span>)"#));
    assert!(page.contains(r#"<span class="badge b-ok">ok</span>"#));
    assert!(page.contains(r#"href="/api/goals/7/events?after=0""#));
    // Not paused: the pause line is there for the script, hidden.
    let mut quiet = snapshot("x");
    quiet.goal.pause_reason = None;
    assert!(goal_page(&quiet).contains(r#"<p id="goal-pause" class="pause" hidden></p>"#));
}

#[test]
fn a_hostile_state_word_cannot_add_classes_or_attributes() {
    let page = listed(&[goal(1, "x", "done\" onmouseover=\"alert(1)")], &[]);
    assert!(page.contains(
        r#"<span class="badge b-done--onmouseover--alert-1-">done&quot; onmouseover=&quot;alert(1)</span>"#
    ));
    assert!(!page.contains("onmouseover=\"alert"));
}

#[test]
fn the_run_page_has_its_stream_and_escapes_the_worktree() {
    let page = run_page(&run(9));
    only_our_script(&page);
    for hook in [
        r#"data-page="run""#,
        r#"data-stream="run-9""#,
        r#"data-stream-url="/api/runs/9/stream""#,
        r#"data-snapshot-url="/api/runs/9""#,
        r#"id="timeline""#,
        r#"id="run-result""#,
        r#"id="run-elapsed""#,
    ] {
        assert!(page.contains(hook), "missing {hook}");
    }
    assert!(page.contains(r#"<dd id="run-worktree" class="path">/tmp/&lt;wt&gt;</dd>"#));
    assert!(page.contains(r#"<span class="badge b-failed">failed</span>"#));
    assert!(page.contains(r#"data-to="1700000004500">4.5 s</span>"#));
    let mut running = run(9);
    running.result = None;
    running.ended_at = None;
    assert!(run_page(&running).contains(r#"<span class="badge b-running">running</span>"#));
}

#[test]
fn the_script_never_writes_html_from_data() {
    // Everything reaches the page through textContent; these sinks would parse HTML.
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!APP_JS.contains(sink), "app.js uses {sink}");
    }
    // One EventSource per tab, made in one place.
    assert_eq!(APP_JS.matches("new EventSource(").count(), 1);
    assert!(APP_JS.contains("SEQUENCE_GAP"));
    assert!(STYLE_CSS.contains(".errors-only"));
}

/// "Last gate: pass" named the last gate that ran, not the goal's gates: the list and the goal
/// page show how many of them are green.
#[test]
fn the_goal_list_and_page_count_the_goals_green_gates() {
    let page = listed(&[goal(3, "fix", "paused")], &[]);
    assert!(page.contains("<th>Gates</th>"), "{page}");
    assert!(
        page.contains(r#"<span class="badge b-fail">1/2 green</span>"#),
        "{page}"
    );
    assert!(!page.contains("Last gate"), "{page}");
    let mut all = goal(4, "fix", "done");
    all.gates_green = 2;
    let page = listed(&[all], &[]);
    assert!(
        page.contains(r#"<span class="badge b-pass">2/2 green</span>"#),
        "{page}"
    );
    let page = goal_page(&snapshot("fix"));
    assert!(
        page.contains(r#"<dd id="goal-gates"><span class="badge b-fail">1/2 green</span></dd>"#),
        "{page}"
    );
}

/// Evidence stored with a gate's colours and progress overwrites (as an older greenlight
/// stored it, straight from the tail) shows on the page as a terminal would show it: the goal
/// snapshot the page and the API are built from renders it, whatever the stored text holds.
#[test]
fn stored_evidence_shows_without_escapes_or_overwrites() {
    use greenlight_store::{GateVerdict, NewGateRun, Reads, Store};
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state.db");
    let goal = greenlight_testkit::load::create_goal(&state, dir.path());
    let mut store = Store::open(&state).expect("open the store");
    let gate = store
        .read(|s| s.gates(goal))
        .expect("read the gates")
        .first()
        .map(|g| g.id)
        .expect("the goal has its gate");
    let stored =
        "\x1b[1m\x1b[31mFAIL\x1b[0m tests::adds\r\n 10%\r 55%\r100%\x1b[K\n\x1b]0;title\x07done\n";
    store
        .write(|tx| {
            tx.record_gate_run(&NewGateRun {
                goal,
                gate,
                turn: None,
                verdict: GateVerdict::Fail,
                exit_code: Some(101),
                duration_ms: 5,
                workspace_key: None,
                replayed: false,
                digest: None,
                evidence: Some(stored.to_owned()),
            })
        })
        .expect("record the gate run");
    let snapshot = crate::summary::goal_snapshot(&mut store, goal.0).expect("the snapshot");
    assert_eq!(
        snapshot.gates[0].last_evidence.as_deref(),
        Some("FAIL tests::adds\n100%\ndone\n")
    );
    let page = goal_page(&snapshot);
    assert!(
        page.contains("<pre>FAIL tests::adds\n100%\ndone\n</pre>"),
        "{page}"
    );
    assert!(!page.contains('\x1b') && !page.contains('\r'), "{page}");
}
