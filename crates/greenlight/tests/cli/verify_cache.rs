//! The result cache of version 2 gates through the real binary: a replay only when every byte
//! the key covers is the same, never a verdict from an entry that is damaged, foreign, or from
//! a run that timed out, was flaky, or left processes behind; and two runs filling the cache at
//! once leave it consistent.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fs;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::Stdio;

use greenlight_testkit::TempRepo;

fn repo_with(gates: &str) -> TempRepo {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&format!("version: 2\ngates:\n{gates}"));
    repo
}

/// The `cached=` key of each gate line, `None` for a gate that ran.
fn cached(out: &greenlight_testkit::Run) -> Vec<(String, Option<String>)> {
    out.lines()
        .iter()
        .filter(|l| l.starts_with("GATE ") && !l.starts_with("GATE work-evidence"))
        .map(|l| {
            let id = l.split(' ').nth(1).unwrap().to_owned();
            let key = l
                .split(' ')
                .find_map(|w| w.strip_prefix("cached="))
                .map(str::to_owned);
            (id, key)
        })
        .collect()
}

fn all_cached(out: &greenlight_testkit::Run) -> bool {
    let gates = cached(out);
    !gates.is_empty() && gates.iter().all(|(_, k)| k.is_some())
}

fn none_cached(out: &greenlight_testkit::Run) -> bool {
    cached(out).iter().all(|(_, k)| k.is_none())
}

fn entry_files(repo: &TempRepo) -> Vec<PathBuf> {
    let root = repo.home().join("cache/greenlight/entries");
    let mut files = Vec::new();
    for shard in fs::read_dir(root).into_iter().flatten().flatten() {
        for entry in fs::read_dir(shard.path()).unwrap().flatten() {
            files.push(entry.path());
        }
    }
    files.sort();
    files
}

const TWO_GATES: &str = "  - id: build\n    command: sleep 0.2; echo built\n  - id: test\n    command: \"echo 'test failed: expected 2, got 3'; exit 1\"\n";

#[test]
fn an_unchanged_tree_replays_pass_and_fail_with_their_output_and_original_duration() {
    let repo = repo_with(TWO_GATES);
    let first = repo.greenlight(["verify"]);
    assert_eq!(first.code, 20, "{}", first.render());
    assert!(none_cached(&first), "{}", first.render());
    assert_eq!(entry_files(&repo).len(), 2);

    let again = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(again.code, 20, "{}", again.render());
    let doc = again.json();
    let build = &doc["gates"][0];
    assert_eq!(build["cached"], true, "{doc:#}");
    assert!(
        build["durations_ms"][0].as_u64().unwrap() >= 200,
        "the original duration: {doc:#}"
    );
    assert_eq!(build["cache_key"].as_str().unwrap().len(), 64);
    let test = &doc["gates"][1];
    assert_eq!(test["verdict"], "FAIL");
    assert_eq!(test["cached"], true);
    assert_eq!(
        test["attempts"][0]["tail"],
        "test failed: expected 2, got 3\n"
    );

    let text = repo.greenlight(["verify"]);
    let lines = text.lines();
    assert!(
        lines[1].starts_with("GATE build PASS exit=0 duration=0s cached="),
        "{}",
        text.render()
    );
    assert!(
        lines[2].starts_with("GATE test FAIL exit=1 duration=0s cached="),
        "{}",
        text.render()
    );
    assert_eq!(lines[1].rsplit('=').next().unwrap().len(), 12);
    // The failure's output is shown again, as when it ran.
    assert!(
        text.stderr.contains("test failed: expected 2, got 3"),
        "{}",
        text.render()
    );
}

#[test]
fn a_content_only_change_behind_the_same_status_line_runs_the_gate_again() {
    let repo = repo_with("  - id: check\n    command: grep -q good src/work.txt\n");
    repo.write("src/work.txt", "good\n");
    let first = repo.greenlight(["verify"]);
    assert_eq!(first.code, 0, "{}", first.render());
    let status_before = repo.git(&["status", "--porcelain"]);
    assert!(all_cached(&repo.greenlight(["verify"])));

    // Same size, same status line, other bytes.
    repo.write("src/work.txt", "bad!\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), status_before);
    let after = repo.greenlight(["verify"]);
    assert_eq!(
        after.code,
        20,
        "a stale PASS was replayed: {}",
        after.render()
    );
    assert!(none_cached(&after));
}

#[test]
fn a_file_outside_the_inputs_changes_nothing_and_one_inside_runs_the_gate() {
    let repo = repo_with(
        "  - id: unit\n    command: cat src/work.txt\n    inputs: [src]\n  - id: docs\n    command: cat docs/readme.txt\n    inputs: [\"docs/**/*.txt\"]\n",
    );
    repo.write("docs/readme.txt", "docs\n");
    assert_eq!(repo.greenlight(["verify"]).code, 0);

    repo.write("notes.md", "not an input of anything\n");
    repo.write("docs/image.png", "not matched by *.txt\n");
    let out = repo.greenlight(["verify"]);
    assert!(all_cached(&out), "{}", out.render());

    repo.write("src/work.txt", "changed\n");
    let out = repo.greenlight(["verify", "--explain"]);
    let gates = cached(&out);
    assert_eq!(gates[0], ("unit".to_owned(), None), "{}", out.render());
    assert!(
        gates[1].1.is_some(),
        "docs did not change: {}",
        out.render()
    );
    assert!(
        out.stderr
            .contains("greenlight: unit: ran: inputs differ: ~src/work.txt"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("greenlight: docs: replayed"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_declared_env_value_or_a_key_output_that_changes_runs_the_gate_again() {
    let repo = repo_with(
        "  - id: unit\n    command: \"true\"\n    env: [GREENLIGHT_TEST_MODE]\n    keys: [\"cat $HOME/toolchain\"]\n",
    );
    fs::write(repo.home().join("toolchain"), "rustc 1.95\n").unwrap();
    let run = |mode: &str| {
        repo.cli(["verify", "--explain"])
            .env("GREENLIGHT_TEST_MODE", mode)
            .env("UNDECLARED", mode)
            .run()
    };
    assert!(none_cached(&run("a")));
    let same = run("a");
    assert!(all_cached(&same), "{}", same.render());

    let env_changed = run("b");
    assert!(none_cached(&env_changed), "{}", env_changed.render());
    assert!(
        env_changed
            .stderr
            .contains("env GREENLIGHT_TEST_MODE differs"),
        "{}",
        env_changed.stderr
    );
    // The value itself is never written down: only a hash of it.
    for file in fs::read_dir(repo.home().join("cache/greenlight/last")).unwrap() {
        let text = fs::read_to_string(file.unwrap().path()).unwrap();
        assert!(!text.contains("\"b\""), "{text}");
    }
    // A variable nobody declared is not in the key.
    assert!(all_cached(
        &repo
            .cli(["verify"])
            .env("GREENLIGHT_TEST_MODE", "b")
            .env("UNDECLARED", "zzz")
            .run()
    ));

    fs::write(repo.home().join("toolchain"), "rustc 1.96\n").unwrap();
    let key_changed = run("b");
    assert!(none_cached(&key_changed), "{}", key_changed.render());
    assert!(
        key_changed
            .stderr
            .contains("key `cat $HOME/toolchain` printed something else"),
        "{}",
        key_changed.stderr
    );
}

#[test]
fn damaged_and_foreign_entries_are_misses_never_verdicts() {
    let repo = repo_with("  - id: unit\n    command: echo fresh-run\n");
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    let entry = entry_files(&repo).pop().unwrap();
    let good = fs::read(&entry).unwrap();

    let tamper = |bytes: Vec<u8>| {
        fs::write(&entry, bytes).unwrap();
        let out = repo.greenlight(["verify", "--format", "json"]);
        assert_eq!(out.code, 0, "{}", out.render());
        let doc = out.json();
        assert_eq!(doc["gates"][0]["cached"], false, "{doc:#}");
        assert_eq!(doc["gates"][0]["attempts"][0]["tail"], "fresh-run\n");
    };
    // Truncated.
    tamper(good[..good.len() / 2].to_vec());
    // One byte of the stored result changed (a FAIL turned into a PASS would read the same).
    let mut flipped = good.clone();
    let at = flipped.len() - 10;
    flipped[at] ^= 0x01;
    tamper(flipped);
    // Garbage.
    tamper(b"not an entry".to_vec());
    // The untouched entry replays again.
    fs::write(&entry, &good).unwrap();
    assert!(all_cached(&repo.greenlight(["verify"])));

    // Foreign: the same bytes authenticated by another user's key are not ours.
    let key_file = repo.home().join("state/greenlight/cache.key");
    assert_eq!(
        fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    fs::write(&key_file, "ab".repeat(32)).unwrap();
    tamper(good.clone());
}

#[test]
fn a_key_file_others_can_read_turns_the_cache_off_with_a_warning_and_changes_no_verdict() {
    let repo = repo_with("  - id: unit\n    command: \"true\"\n");
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    let key_file = repo.home().join("state/greenlight/cache.key");
    fs::set_permissions(&key_file, fs::Permissions::from_mode(0o644)).unwrap();
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(none_cached(&out), "{}", out.render());
    assert!(
        out.stderr.contains("the result cache is off for this run"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);
}

#[test]
fn a_cache_or_state_directory_inside_the_worktree_turns_the_cache_off() {
    let repo = repo_with("  - id: unit\n    command: \"true\"\n");
    // The gate passes, nothing replays, and the warning names the place and the variable.
    let verify_with = |var: &str, value: &std::path::Path, place: &str| {
        let out = repo.cli(["verify"]).env(var, value).run();
        assert_eq!(out.code, 0, "{}", out.render());
        assert!(none_cached(&out), "{}", out.render());
        assert!(
            out.stderr.contains("the result cache is off for this run")
                && out.stderr.contains(place)
                && out.stderr.contains("is inside this worktree")
                && out.stderr.contains(var),
            "{}",
            out.stderr
        );
    };
    let inside = repo.path().join(".greenlight-cache");
    for _ in 0..2 {
        verify_with("GREENLIGHT_CACHE_DIR", &inside, "the cache directory");
    }
    assert!(!inside.exists(), "nothing may be written into the worktree");

    // A state directory (the cache's key, the run records) inside the worktree likewise.
    let state = repo.path().join(".state/state.db");
    verify_with("GREENLIGHT_STATE", &state, "the state directory");
    assert!(
        !repo.path().join(".state/cache.key").exists(),
        "no cache key is made in the worktree"
    );
}

#[test]
fn timeouts_flaky_results_and_leftover_processes_are_never_stored() {
    let repo = repo_with(
        "  - id: slow\n    command: sleep 5\n    timeoutSec: 1\n  - id: flaky\n    command: \"n=$(cat $HOME/count 2>/dev/null || echo 0); echo $((n+1)) > $HOME/count; test $n -ge 1\"\n    retryOnFail: 1\n  - id: leaky\n    command: sleep 30 &\n",
    );
    let first = repo.greenlight(["verify"]);
    let lines = first.lines();
    assert!(
        lines[1].starts_with("GATE slow TIMEOUT"),
        "{}",
        first.render()
    );
    assert!(
        lines[2].starts_with("GATE flaky FLAKY"),
        "{}",
        first.render()
    );
    assert!(
        first.stderr.contains("leftover") || first.stderr.contains("left"),
        "{}",
        first.render()
    );
    assert!(entry_files(&repo).is_empty(), "{:?}", entry_files(&repo));
    let again = repo.greenlight(["verify"]);
    assert!(none_cached(&again), "{}", again.render());
}

#[test]
fn a_gate_that_changes_its_own_inputs_is_not_stored() {
    let repo =
        repo_with("  - id: fmt\n    command: date +%s%N > src/stamp.txt\n    inputs: [src]\n");
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    assert!(
        entry_files(&repo).is_empty(),
        "a result of no one state was stored"
    );
}

#[test]
fn no_cache_runs_every_gate_and_refreshes_the_entries() {
    let repo = repo_with("  - id: stamp\n    command: cat $HOME/stamp\n");
    fs::write(repo.home().join("stamp"), "one\n").unwrap();
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    fs::write(repo.home().join("stamp"), "two\n").unwrap();
    // An undeclared file: the replay still says "one" — which is why --no-cache exists.
    let replay = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(replay.json()["gates"][0]["attempts"][0]["tail"], "one\n");
    let fresh = repo.greenlight(["verify", "--no-cache", "--format", "json"]);
    assert_eq!(fresh.json()["gates"][0]["cached"], false);
    assert_eq!(fresh.json()["gates"][0]["attempts"][0]["tail"], "two\n");
    let after = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(after.json()["gates"][0]["cached"], true);
    assert_eq!(after.json()["gates"][0]["attempts"][0]["tail"], "two\n");
}

#[test]
fn two_runs_filling_the_cache_at_once_stay_consistent() {
    let gates: String = (0..6)
        .map(|i| format!("  - id: g{i}\n    command: sleep 0.1; echo {i}\n"))
        .collect();
    let repo = repo_with(&gates);
    let spawn = || {
        repo.command(["verify"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let files = entry_files(&repo);
    assert_eq!(files.len(), 6, "{files:?}");
    assert!(
        files
            .iter()
            .all(|f| !f.file_name().unwrap().to_string_lossy().starts_with(".tmp")),
        "{files:?}"
    );
    let out = repo.greenlight(["verify", "--format", "json"]);
    let doc = out.json();
    for (i, gate) in doc["gates"].as_array().unwrap().iter().enumerate() {
        assert_eq!(gate["cached"], true, "{doc:#}");
        assert_eq!(gate["attempts"][0]["tail"], format!("{i}\n"));
    }
}

#[test]
fn cache_false_and_options_cache_off_always_run() {
    let repo = repo_with(
        "  - id: live\n    command: \"true\"\n    cache: false\n  - id: cached\n    command: \"true\"\n",
    );
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    let out = repo.greenlight(["verify"]);
    assert_eq!(cached(&out)[0].1, None);
    assert!(cached(&out)[1].1.is_some());
    repo.verify_yaml(
        "version: 2\noptions:\n  cache: off\ngates:\n  - id: cached\n    command: \"true\"\n",
    );
    assert!(none_cached(&repo.greenlight(["verify"])));
}

#[test]
fn cache_stats_prune_and_clear_see_the_entries() {
    let repo = repo_with(TWO_GATES);
    repo.greenlight(["verify"]);
    let stats = repo.greenlight(["cache", "stats", "--json"]);
    assert_eq!(stats.code, 0, "{}", stats.render());
    assert_eq!(stats.json()["entries"], 2);
    let pruned = repo.greenlight(["cache", "prune", "--max-size", "1"]);
    assert_eq!(pruned.code, 0, "{}", pruned.render());
    assert!(
        pruned.stdout.starts_with("removed 2 entries"),
        "{}",
        pruned.stdout
    );
    repo.greenlight(["verify"]);
    let cleared = repo.greenlight(["cache", "clear"]);
    assert_eq!(cleared.stdout, "removed 2 entries\n");
    assert!(entry_files(&repo).is_empty());
    let bad = repo.greenlight(["cache", "prune", "--max-size", "2T"]);
    assert_eq!(bad.code, 2, "{}", bad.render());
    assert!(bad.stderr.contains("unknown unit"), "{}", bad.stderr);
}

#[test]
fn the_stop_hook_replays_what_verify_stored() {
    let repo = repo_with("  - id: unit\n    command: sleep 0.2; echo unit-ran >> $HOME/runs\n");
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    assert_eq!(
        fs::read_to_string(repo.home().join("runs")).unwrap(),
        "unit-ran\n"
    );
    let payload = serde_json::json!({
        "session_id": "s-cache",
        "transcript_path": "/home/u/.claude/projects/p/s-cache.jsonl",
        "cwd": repo.path().display().to_string(),
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": "Done."
    });
    let out = repo.cli(["hook", "stop"]).stdin(payload.to_string()).run();
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        fs::read_to_string(repo.home().join("runs")).unwrap(),
        "unit-ran\n",
        "the hook ran a gate whose key was unchanged: {}",
        out.render()
    );
    // With an input changed, the same hook runs the gate.
    repo.write("src/work.txt", "changed\n");
    let out = repo.cli(["hook", "stop"]).stdin(payload.to_string()).run();
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        fs::read_to_string(repo.home().join("runs")).unwrap(),
        "unit-ran\nunit-ran\n",
        "{}",
        out.render()
    );
}

use std::os::unix::fs::PermissionsExt;

#[test]
fn the_goal_loop_replays_a_pass_verify_stored_and_verify_replays_what_the_loop_stored() {
    let fx = crate::goal_support::Fixture::new();
    let count = "echo ran >> \\\"$HOME/gate-runs\\\"";
    fx.repo.write("value.txt", "good\n");
    fx.repo.verify_yaml(&format!(
        "version: 2\ngates:\n  - id: check\n    command: \"sh check.sh && {count}\"\n    inputs: [check.sh, value.txt]\n"
    ));
    fx.repo.commit_all("the value is good already");
    let runs = || {
        fs::read_to_string(fx.repo.home().join("gate-runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let verify = |state: &std::path::Path| {
        fx.repo
            .greenlight(["verify", "--state", state.to_str().unwrap()])
    };
    let first = verify(&fx.state());
    assert_eq!(first.code, 0, "{}", first.render());
    assert_eq!(runs(), 1);

    // The goal's gate is verify's gate: its pass is replayed, the command does not run.
    let agent = fx.script("agent.sh", "echo looked");
    let agent_arg = fx.agent(&agent);
    let out = fx.goal(&["run", "keep it green", "--agent", &agent_arg]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        runs(),
        1,
        "the loop ran a gate verify had passed: {}",
        out.render()
    );
    let replays = fx.gate_verdicts_and_replays();
    assert_eq!(replays.len(), 1, "{replays:?}");
    assert_eq!(replays[0].0, "pass");
    assert_eq!(replays[0].1, true);

    // A change the loop's gate measures is stored for verify.
    fx.repo.write("value.txt", "good \n");
    fx.repo.write("value.txt", "good\n");
    fx.repo.write(
        "check.sh",
        format!(
            "{}\n# reviewed\n",
            fs::read_to_string(fx.repo.path().join("check.sh")).unwrap()
        ),
    );
    let out = fx.goal(&["run", "still green", "--agent", &agent_arg]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(runs(), 2, "{}", out.render());
    let again = verify(&fx.state());
    assert_eq!(again.code, 0, "{}", again.render());
    assert!(again.lines()[1].contains("cached="), "{}", again.render());
    assert_eq!(runs(), 2);
}

#[test]
fn a_second_worktree_with_the_same_content_replays_what_the_first_stored() {
    let repo = repo_with("  - id: unit\n    command: echo unit-ran >> \"$HOME/runs\"\n");
    repo.commit_all("gates");
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    let second = repo.path().parent().unwrap().join("wt2");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "second",
        second.to_str().unwrap(),
    ]);
    let out = repo.greenlight([
        "verify",
        "--cwd",
        second.to_str().unwrap(),
        "--base-ref",
        "main",
    ]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(all_cached(&out), "{}", out.render());
    assert_eq!(
        fs::read_to_string(repo.home().join("runs")).unwrap(),
        "unit-ran\n"
    );
}

/// Puts a non-regular file of `kind` at `path` (whatever was there is removed first); a socket
/// exists only while the returned listener does.
fn make_non_regular(repo: &TempRepo, path: &std::path::Path, kind: &str) -> Option<UnixListener> {
    if path.is_dir() && !path.is_symlink() {
        fs::remove_dir_all(path).unwrap();
    } else if path.symlink_metadata().is_ok() {
        fs::remove_file(path).unwrap();
    }
    let mkfifo = |at: &std::path::Path| {
        let made = std::process::Command::new("mkfifo")
            .arg(at)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {}", at.display());
    };
    match kind {
        "fifo" => mkfifo(path),
        "link to a fifo" => {
            let target = repo.home().join("elsewhere.fifo");
            if !target.exists() {
                mkfifo(&target);
            }
            std::os::unix::fs::symlink(&target, path).unwrap();
        }
        "socket" => {
            // A socket's path must fit in `sun_path`; an entry's does not. Bound, then moved.
            let short = repo.home().join("s.sock");
            let listener = UnixListener::bind(&short).unwrap();
            fs::rename(&short, path).unwrap();
            return Some(listener);
        }
        "directory" => fs::create_dir(path).unwrap(),
        other => panic!("no such kind {other}"),
    }
    None
}

/// What the warning calls each kind.
fn kind_named(kind: &str) -> &'static str {
    match kind {
        "fifo" | "link to a fifo" => "a FIFO (named pipe)",
        "socket" => "a socket",
        _ => "a directory",
    }
}

/// Anyone who can write the cache directory can put a FIFO where an entry belongs, and an
/// ordinary `open` of it waits for a writer forever: verify hung before its first gate. An entry
/// path holding anything but a regular file is a miss with a warning naming it; the gate runs.
#[test]
fn a_fifo_socket_directory_or_link_to_a_fifo_at_an_entry_is_a_miss_with_a_warning() {
    let repo = repo_with("  - id: check\n    command: \"true\"\n    inputs: [src]\n");
    repo.write("src/work.txt", "x\n");
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    let entry = entry_files(&repo).pop().unwrap();
    for kind in ["fifo", "link to a fifo", "socket", "directory"] {
        let _socket = make_non_regular(&repo, &entry, kind);
        let out = repo
            .cli(["verify"])
            .within(std::time::Duration::from_secs(30))
            .run();
        assert_eq!(out.code, 0, "{kind}: {}", out.render());
        assert!(none_cached(&out), "{kind}: {}", out.render());
        let warning = format!(
            "{} is {}, not a regular file: treated as a miss",
            entry.display(),
            kind_named(kind)
        );
        assert!(out.stderr.contains(&warning), "{kind}: {}", out.stderr);
        // The fresh result is stored in its place, except where no file can go.
        let now_regular = fs::symlink_metadata(&entry).is_ok_and(|m| m.is_file());
        assert_eq!(now_regular, kind != "directory", "{kind}: {}", out.stderr);
    }
}

/// The same at the cache's key (`cache.key` beside the state database): the cache is off for
/// the run with a warning naming the key, and every gate runs.
#[test]
fn a_fifo_socket_directory_or_link_to_a_fifo_at_the_cache_key_turns_the_cache_off_naming_it() {
    let repo = repo_with("  - id: check\n    command: \"true\"\n");
    assert_eq!(repo.greenlight(["verify"]).code, 0);
    let key_file = repo.home().join("state/greenlight/cache.key");
    for kind in ["fifo", "link to a fifo", "socket", "directory"] {
        let _socket = make_non_regular(&repo, &key_file, kind);
        let out = repo
            .cli(["verify"])
            .within(std::time::Duration::from_secs(30))
            .run();
        assert_eq!(out.code, 0, "{kind}: {}", out.render());
        assert!(none_cached(&out), "{kind}: {}", out.render());
        let warning = format!(
            "the result cache is off for this run: the cache key {} is {}, not a regular file",
            key_file.display(),
            kind_named(kind)
        );
        assert!(out.stderr.contains(&warning), "{kind}: {}", out.stderr);
    }
}

/// Wherever verify could block before its gates — a FIFO at the cache key, at an entry, or in
/// place of a tracked file (which the workspace listing hands to `git hash-object`) — SIGTERM
/// did not end it either. Now verify gets past each to its gate, and SIGTERM ends the gate and
/// verify (143) within seconds, leaving no process.
#[test]
fn sigterm_ends_verify_whatever_fifo_sits_at_the_cache_key_an_entry_or_a_tracked_file() {
    use greenlight_testkit::procs;
    use std::time::{Duration, Instant};
    for place in ["cache key", "entry", "tracked file"] {
        let repo = repo_with(
            "  - id: slow\n    command: echo $$ > gate.pid; if [ -e slow ]; then sleep 600 & echo $! >> gate.pid; wait; fi\n    inputs: [src]\n",
        );
        repo.write("src/work.txt", "x\n");
        repo.commit_all("a tracked input");
        let first = repo.greenlight(["verify"]);
        assert_eq!(first.code, 0, "{place}: {}", first.render());
        assert_eq!(entry_files(&repo).len(), 1, "{place}: {}", first.render());
        fs::remove_file(repo.path().join("gate.pid")).unwrap();
        let at = match place {
            "cache key" => repo.home().join("state/greenlight/cache.key"),
            "entry" => entry_files(&repo).pop().unwrap(),
            _ => repo.path().join("src/work.txt"),
        };
        make_non_regular(&repo, &at, "fifo");
        repo.write("slow", "");
        let mut child = repo
            .command(["verify"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid_file = repo.path().join("gate.pid");
        let gate_pids = || procs::pids_in(&fs::read_to_string(&pid_file).unwrap_or_default());
        let reached = Instant::now() + Duration::from_secs(10);
        while gate_pids().len() < 2 && Instant::now() < reached {
            std::thread::sleep(Duration::from_millis(20));
        }
        procs::signal("-TERM", child.id());
        let limit = Instant::now() + Duration::from_secs(8);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{place}: SIGTERM did not end verify within 8 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(status.code(), Some(143), "{place}: {stderr}");
        assert_eq!(
            gate_pids().len(),
            2,
            "{place}: the gate never started: {stderr}"
        );
        // A tracked file that is now a FIFO is never opened: the gates that read it are
        // uncacheable for the run, which `verify_cache_exact::a_gate_whose_inputs_cannot_be_
        // keyed_exactly_runs_and_explain_says_why` checks with `--explain`.
        procs::assert_all_dead(&gate_pids(), &format!("{place}: the gate survived verify"));
    }
}
