//! `land` on real git repositories: a member merged (or rebased) in a scratch worktree, judged
//! by the target's own gates, and the target advanced by compare-and-swap only when green —
//! with every scratch worktree gone afterwards.
#![allow(
    clippy::unwrap_used,
    reason = "test fixtures: a failure should panic loudly"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use greenlight_gate::{InterruptWatch, KILL_GRACE, RunOptions};
use greenlight_proc::{Interrupt, ProcessEnv};
use greenlight_testkit::TempRepo;
use greenlight_testkit::files::write_file;
use greenlight_types::Reason;
use greenlight_workflow::land::{self, Busy, GateSource, LandError, LandOutcome, Landing};
use greenlight_workflow::plan::Strategy;

/// The target's gates: `test` is red when the tree holds both `left` and `right` (each of two
/// members adds one: green alone, red merged); `clean` is red when it holds a file `bad`, by
/// a command that reads nothing a member could edit.
const VERIFY: &str = "\
version: 1
gates:
  - id: test
    command: sh check.sh
  - id: clean
    command: test ! -e bad
  - id: lint
    command: 'true'
";
const CHECK: &str = "\
if [ -e left ] && [ -e right ]; then echo 'check: left and right together' >&2; exit 4; fi
exit 0
";

/// One landing test at a time: the gate runner ends every child of this process it did not
/// start as a helper once its gates are done (what a killed gate left), and a fixture's git
/// call in a test on another thread is such a child.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A repository whose `main` (checked out in the primary checkout) has the gates committed,
/// and a branch `trunk` at the same commit that no worktree has checked out.
fn fixture() -> TempRepo {
    let repo = TempRepo::primary();
    repo.write(".commandmate/verify.yaml", VERIFY);
    repo.write("check.sh", CHECK);
    repo.commit_all("gates");
    repo.git(&["branch", "trunk"]);
    repo
}

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = greenlight_proc::git::command(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A member: branch `name` from `base`, checked out in its own linked worktree (as a
/// workflow's members are), with `files` written and committed there. Returns the worktree.
fn member(repo: &TempRepo, name: &str, base: &str, files: &[(&str, &str)]) -> PathBuf {
    let wt = repo.path().parent().unwrap().join(format!("member-{name}"));
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        name,
        wt.to_str().unwrap(),
        base,
    ]);
    commit_in(&wt, files, &format!("{name}: work"));
    wt
}

fn commit_in(wt: &Path, files: &[(&str, &str)], message: &str) {
    for (path, text) in files {
        write_file(&wt.join(path), text);
    }
    git_in(wt, &["add", "-A"]);
    git_in(wt, &["commit", "-q", "-m", message]);
}

fn tip(repo: &TempRepo, branch: &str) -> String {
    repo.git(&["rev-parse", &format!("refs/heads/{branch}")])
}

fn options(repo: &TempRepo) -> RunOptions {
    RunOptions {
        cwd: repo.path().to_path_buf(),
        base_ref: None,
        only: None,
        skip_work_evidence: false,
        kill_grace: KILL_GRACE,
        lock_root: repo.lock_root().to_path_buf(),
        env: ProcessEnv::from_vars(std::env::vars_os()),
        extra_env: Vec::new(),
        cache: None,
        sweep_adopted: true,
        remote: None,
    }
}

const GATES: &[&str] = &["test", "clean", "lint"];

fn landing<'a>(
    repo: &'a TempRepo,
    gates: &'a [String],
    item: &'a str,
    target: &'a str,
) -> Landing<'a> {
    Landing {
        repo: repo.path(),
        run_id: "run-1",
        step: "ship",
        item,
        member: item,
        target,
        strategy: Strategy::Merge,
        gates,
        judged_by: GateSource::TargetTip,
    }
}

fn gates() -> Vec<String> {
    GATES.iter().map(|g| (*g).to_owned()).collect()
}

fn no_interrupt() -> (
    tokio::sync::watch::Sender<Option<Interrupt>>,
    InterruptWatch,
) {
    tokio::sync::watch::channel(None)
}

fn run_land(repo: &TempRepo, landing: &Landing<'_>) -> Result<LandOutcome, LandError> {
    let (_keep, mut watch) = no_interrupt();
    block_on(land::land(landing, &options(repo), &mut watch))
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Nothing a landing made outlives it: the worktrees are the fixture's and the members', and
/// the scratch directory is empty.
fn assert_nothing_left(repo: &TempRepo, members: usize) {
    let list = repo.git(&["worktree", "list", "--porcelain"]);
    let worktrees: Vec<&str> = list
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .collect();
    assert_eq!(worktrees.len(), 1 + members, "{list}");
    assert!(
        !list.contains("greenlight/land"),
        "a scratch worktree is left: {list}"
    );
    let scratch = repo.path().join(".git/greenlight/land");
    let left: Vec<_> = std::fs::read_dir(&scratch)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "scratch directories left: {left:?}");
}

#[test]
fn a_clean_member_merges_and_the_target_advances_by_one_merge_commit() {
    let _serial = serial();
    let repo = fixture();
    let old = tip(&repo, "trunk");
    member(&repo, "m1", "trunk", &[("src/one.txt", "one\n")]);
    let member_tip = tip(&repo, "m1");
    let gates = gates();
    let outcome = run_land(&repo, &landing(&repo, &gates, "m1", "trunk")).unwrap();
    let LandOutcome::Landed {
        old: was,
        new,
        synced,
        retried,
        gates: judged,
    } = &outcome
    else {
        panic!("not landed: {outcome:?}");
    };
    assert_eq!(outcome.failure(), None);
    assert_eq!(was, &old);
    assert_eq!(&tip(&repo, "trunk"), new);
    assert!(synced.is_empty(), "trunk is checked out nowhere");
    assert!(!retried);
    assert_eq!(
        judged.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(),
        ["test", "clean", "lint"]
    );
    // A merge commit whose parents are the old tip and the member, naming run, step, member.
    let parents = repo.git(&["rev-list", "--parents", "-n", "1", new]);
    assert_eq!(parents, format!("{new} {old} {member_tip}"));
    let message = repo.git(&["log", "-1", "--format=%B", new]);
    assert!(
        message.contains("run-1") && message.contains("ship") && message.contains("m1"),
        "{message}"
    );
    assert_eq!(repo.git(&["show", "trunk:src/one.txt"]), "one");
    assert!(
        outcome.summary().starts_with("landed: the target moved "),
        "{}",
        outcome.summary()
    );
    // main, checked out in the primary checkout, did not move.
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_nothing_left(&repo, 1);
}

#[test]
fn a_conflicting_member_stops_with_its_files_and_the_next_member_still_lands() {
    let _serial = serial();
    let repo = fixture();
    member(&repo, "m1", "trunk", &[("README", "one\n")]);
    member(
        &repo,
        "m2",
        "trunk",
        &[("README", "two\n"), ("src/two.txt", "2\n")],
    );
    member(&repo, "m3", "trunk", &[("src/three.txt", "3\n")]);
    let gates = gates();
    let first = run_land(&repo, &landing(&repo, &gates, "m1", "trunk")).unwrap();
    assert_eq!(first.failure(), None, "{first:?}");
    let after_first = tip(&repo, "trunk");
    let m2_tip = tip(&repo, "m2");

    let conflict = run_land(&repo, &landing(&repo, &gates, "m2", "trunk")).unwrap();
    let LandOutcome::Conflict { files } = &conflict else {
        panic!("not a conflict: {conflict:?}");
    };
    assert_eq!(files, &["README"]);
    assert_eq!(conflict.failure(), Some(Reason::LandConflict));
    assert_eq!(conflict.summary(), "land-conflict: README");
    assert_eq!(tip(&repo, "trunk"), after_first, "the target is untouched");
    assert_eq!(tip(&repo, "m2"), m2_tip, "the member is kept as it was");

    let third = run_land(&repo, &landing(&repo, &gates, "m3", "trunk")).unwrap();
    assert_eq!(third.failure(), None, "{third:?}");
    assert_eq!(repo.git(&["show", "trunk:README"]), "one");
    assert_eq!(repo.git(&["show", "trunk:src/three.txt"]), "3");
    assert_nothing_left(&repo, 3);
}

#[test]
fn two_members_green_alone_and_red_merged_stop_the_second_with_land_red() {
    let _serial = serial();
    let repo = fixture();
    repo.git(&["branch", "alone"]);
    member(&repo, "left", "trunk", &[("left", "l\n")]);
    member(&repo, "right", "trunk", &[("right", "r\n")]);
    let gates = gates();
    // Each is green on its own.
    let alone = run_land(&repo, &landing(&repo, &gates, "right", "alone")).unwrap();
    assert_eq!(alone.failure(), None, "right alone: {alone:?}");
    let landed = run_land(&repo, &landing(&repo, &gates, "left", "trunk")).unwrap();
    assert_eq!(landed.failure(), None, "left: {landed:?}");
    let before = tip(&repo, "trunk");

    let red = run_land(&repo, &landing(&repo, &gates, "right", "trunk")).unwrap();
    let LandOutcome::Red {
        failed,
        gates: judged,
    } = &red
    else {
        panic!("not red: {red:?}");
    };
    assert_eq!(red.failure(), Some(Reason::LandRed));
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].id, "test");
    assert_eq!(failed[0].exit_code, Some(4));
    assert!(
        failed[0].evidence.contains("left and right together"),
        "{:?}",
        failed[0].evidence
    );
    assert_eq!(judged.len(), 3, "every gate ran, after the red one too");
    assert_eq!(red.summary(), "land-red: test FAIL exit=4");
    assert_eq!(
        tip(&repo, "trunk"),
        before,
        "a red merge never reaches the target"
    );
    assert_nothing_left(&repo, 2);
}

/// An agent that rewrites verify.yaml in its branch to pass everything still meets the
/// target's gates: what it lands does not choose what judges it.
#[test]
fn a_member_that_edits_verify_yaml_is_judged_by_the_targets_gates() {
    let _serial = serial();
    let repo = fixture();
    let lenient = "version: 1\ngates:\n  - id: test\n    command: 'true'\n  - id: clean\n    command: 'true'\n  - id: lint\n    command: 'true'\n";
    member(
        &repo,
        "cheat",
        "trunk",
        &[("bad", "x\n"), (".commandmate/verify.yaml", lenient)],
    );
    // The merged tree carries the member's file, which would pass every gate.
    assert!(
        repo.git(&["show", "cheat:.commandmate/verify.yaml"])
            .contains("id: clean\n    command: 'true'")
    );
    let before = tip(&repo, "trunk");
    let gates = gates();
    let red = run_land(&repo, &landing(&repo, &gates, "cheat", "trunk")).unwrap();
    let LandOutcome::Red { failed, .. } = &red else {
        panic!("judged by its own verify.yaml: {red:?}");
    };
    assert_eq!(
        failed.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(),
        ["clean"]
    );
    assert_eq!(tip(&repo, "trunk"), before);
    assert_nothing_left(&repo, 1);
}

/// Commits `verify` as the gates of `branch`'s tip, from a throwaway worktree.
fn commit_gates(repo: &TempRepo, branch: &str, verify: &str) {
    if branch == "main" {
        repo.write(".commandmate/verify.yaml", verify);
        repo.commit_all("gates");
        return;
    }
    let wt = repo
        .path()
        .parent()
        .unwrap()
        .join(format!("gates-{branch}"));
    repo.git(&["worktree", "add", "-q", wt.to_str().unwrap(), branch]);
    commit_in(&wt, &[(".commandmate/verify.yaml", verify)], "gates");
    repo.git(&["worktree", "remove", wt.to_str().unwrap()]);
}

/// A script outside the repository (so no member can edit it), returning the command that
/// runs it.
fn outside_script(repo: &TempRepo, name: &str, body: &str) -> String {
    let path = repo.path().parent().unwrap().join(name);
    write_file(&path, body);
    format!("sh {}", path.display())
}

#[test]
fn rebase_replays_the_members_commits_on_the_target_and_fast_forwards() {
    let _serial = serial();
    let repo = fixture();
    member(&repo, "m0", "trunk", &[("README", "from m0\n")]);
    let wt = member(&repo, "m1", "trunk", &[("src/a.txt", "a\n")]);
    commit_in(&wt, &[("src/b.txt", "b\n")], "m1: more");
    member(&repo, "m2", "trunk", &[("README", "from m2\n")]);
    let gates = gates();
    assert_eq!(
        run_land(&repo, &landing(&repo, &gates, "m0", "trunk"))
            .unwrap()
            .failure(),
        None
    );
    let old = tip(&repo, "trunk");
    let m1_tip = tip(&repo, "m1");

    let rebased = Landing {
        strategy: Strategy::Rebase,
        ..landing(&repo, &gates, "m1", "trunk")
    };
    let outcome = run_land(&repo, &rebased).unwrap();
    let LandOutcome::Landed { new, .. } = &outcome else {
        panic!("not landed: {outcome:?}");
    };
    assert_eq!(&tip(&repo, "trunk"), new);
    assert_eq!(
        repo.git(&["rev-list", "--count", &format!("{old}..{new}")]),
        "2"
    );
    assert_eq!(
        repo.git(&["rev-list", "--merges", &format!("{old}..{new}")]),
        "",
        "linear"
    );
    assert_eq!(
        repo.git(&["rev-parse", &format!("{new}~2")]),
        old,
        "on top of the target"
    );
    assert_eq!(
        tip(&repo, "m1"),
        m1_tip,
        "the member's branch is not rewritten"
    );
    assert_eq!(
        git_in(&wt, &["status", "--porcelain"]),
        "",
        "nor its worktree"
    );
    assert_eq!(repo.git(&["show", "trunk:src/b.txt"]), "b");

    let conflict = run_land(
        &repo,
        &Landing {
            strategy: Strategy::Rebase,
            ..landing(&repo, &gates, "m2", "trunk")
        },
    )
    .unwrap();
    let LandOutcome::Conflict { files } = &conflict else {
        panic!("not a conflict: {conflict:?}");
    };
    assert_eq!(files, &["README"]);
    assert_eq!(&tip(&repo, "trunk"), new);
    assert_nothing_left(&repo, 3);
}

/// The target moved by someone else while the member was judged: the compare-and-swap fails,
/// the member is merged onto the new tip and judged again, and what the other wrote stays.
#[test]
fn a_target_moved_meanwhile_is_not_overwritten_and_the_member_lands_on_the_new_tip() {
    let _serial = serial();
    let repo = fixture();
    let count = repo.path().parent().unwrap().join("moves");
    let mover = outside_script(
        &repo,
        "move.sh",
        &format!(
            "n=$(cat {c} 2>/dev/null || echo 0)\n\
             if [ \"$n\" -lt \"$MOVES\" ]; then\n\
               echo $((n+1)) > {c}\n\
               c=$(git commit-tree -p trunk -m 'someone else' 'trunk^{{tree}}') || exit 9\n\
               git update-ref refs/heads/trunk \"$c\" || exit 9\n\
             fi\n",
            c = count.display()
        ),
    );
    commit_gates(
        &repo,
        "trunk",
        &format!("version: 1\ngates:\n  - id: race\n    command: MOVES=1 {mover}\n"),
    );
    member(&repo, "m1", "trunk", &[("src/one.txt", "one\n")]);
    let gates = vec!["race".to_owned()];
    let outcome = run_land(&repo, &landing(&repo, &gates, "m1", "trunk")).unwrap();
    let LandOutcome::Landed {
        old, new, retried, ..
    } = &outcome
    else {
        panic!("not landed: {outcome:?}");
    };
    assert!(retried);
    assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "1");
    let moved = repo.git(&["rev-parse", &format!("{new}^1")]);
    assert_eq!(&moved, old, "the second attempt started from the moved tip");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", &moved]),
        "someone else"
    );
    assert_eq!(&tip(&repo, "trunk"), new);
    assert_nothing_left(&repo, 1);
}

#[test]
fn a_target_that_moves_again_on_the_retry_stops_the_member_with_land_target_busy() {
    let _serial = serial();
    let repo = fixture();
    let count = repo.path().parent().unwrap().join("moves");
    let mover = outside_script(
        &repo,
        "move.sh",
        &format!(
            "n=$(cat {c} 2>/dev/null || echo 0)\necho $((n+1)) > {c}\n\
             c=$(git commit-tree -p trunk -m \"someone else $n\" 'trunk^{{tree}}') || exit 9\n\
             git update-ref refs/heads/trunk \"$c\" || exit 9\n",
            c = count.display()
        ),
    );
    commit_gates(
        &repo,
        "trunk",
        &format!("version: 1\ngates:\n  - id: race\n    command: {mover}\n"),
    );
    member(&repo, "m1", "trunk", &[("src/one.txt", "one\n")]);
    let gates = vec!["race".to_owned()];
    let outcome = run_land(&repo, &landing(&repo, &gates, "m1", "trunk")).unwrap();
    let LandOutcome::Busy(Busy::Moved { expected, found }) = &outcome else {
        panic!("not busy: {outcome:?}");
    };
    assert_eq!(outcome.failure(), Some(Reason::LandTargetBusy));
    assert_eq!(
        std::fs::read_to_string(&count).unwrap().trim(),
        "2",
        "one retry, no more"
    );
    assert_eq!(&tip(&repo, "trunk"), found, "the other's commit stands");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s", found]),
        "someone else 1"
    );
    assert_ne!(expected, found);
    assert!(
        outcome.summary().contains("moved twice"),
        "{}",
        outcome.summary()
    );
    assert_nothing_left(&repo, 1);
}

/// `main` checked out in the primary checkout, clean (an untracked file aside): the landing
/// fast-forwards it there, so its files, index and branch agree, and the untracked file stays.
#[test]
fn a_checked_out_clean_target_is_fast_forwarded_in_its_worktree() {
    let _serial = serial();
    let repo = fixture();
    repo.write("notes.txt", "mine\n");
    member(
        &repo,
        "m1",
        "main",
        &[("src/one.txt", "one\n"), ("README", "changed\n")],
    );
    let gates = gates();
    let outcome = run_land(&repo, &landing(&repo, &gates, "m1", "main")).unwrap();
    let LandOutcome::Landed { new, synced, .. } = &outcome else {
        panic!("not landed: {outcome:?}");
    };
    assert_eq!(synced, &[repo.path().to_path_buf()]);
    assert_eq!(&repo.git(&["rev-parse", "HEAD"]), new);
    assert_eq!(repo.read("src/one.txt").as_deref(), Some("one\n"));
    assert_eq!(repo.read("README").as_deref(), Some("changed\n"));
    assert_eq!(repo.git(&["status", "--porcelain"]), "?? notes.txt");
    assert_eq!(repo.read("notes.txt").as_deref(), Some("mine\n"));
    assert_nothing_left(&repo, 1);
}

#[test]
fn a_checked_out_dirty_target_is_refused_naming_the_worktree_and_nothing_moves() {
    let _serial = serial();
    let repo = fixture();
    repo.write("README", "my edit\n");
    member(&repo, "m1", "main", &[("src/one.txt", "one\n")]);
    let before = tip(&repo, "main");
    let gates = gates();
    let outcome = run_land(&repo, &landing(&repo, &gates, "m1", "main")).unwrap();
    let LandOutcome::Busy(Busy::Dirty { worktree, detail }) = &outcome else {
        panic!("not refused: {outcome:?}");
    };
    assert_eq!(worktree, repo.path());
    assert_eq!(detail, &["README"]);
    assert_eq!(outcome.failure(), Some(Reason::LandTargetBusy));
    let summary = outcome.summary();
    assert!(
        summary.contains(repo.path().to_str().unwrap()) && summary.contains("commit or stash"),
        "{summary}"
    );
    assert_eq!(tip(&repo, "main"), before);
    assert_eq!(
        repo.read("README").as_deref(),
        Some("my edit\n"),
        "the edit is kept"
    );
    assert_nothing_left(&repo, 1);
}

/// A person edits the checked-out target while the landing gates run: the check just before
/// the swap sees it, and nothing moves.
#[test]
fn a_target_worktree_dirtied_while_the_gates_run_is_refused_at_the_swap() {
    let _serial = serial();
    let repo = fixture();
    let edit = outside_script(
        &repo,
        "edit.sh",
        &format!(
            "echo 'edited meanwhile' >> {}/README\n",
            repo.path().display()
        ),
    );
    commit_gates(
        &repo,
        "main",
        &format!("version: 1\ngates:\n  - id: edit\n    command: {edit}\n"),
    );
    member(&repo, "m1", "main", &[("src/one.txt", "one\n")]);
    let before = tip(&repo, "main");
    let gates = vec!["edit".to_owned()];
    let outcome = run_land(&repo, &landing(&repo, &gates, "m1", "main")).unwrap();
    assert!(
        matches!(&outcome, LandOutcome::Busy(Busy::Dirty { worktree, detail }) if worktree == repo.path() && detail == &["README"]),
        "{outcome:?}"
    );
    assert_eq!(tip(&repo, "main"), before);
    assert_eq!(
        repo.read("README").as_deref(),
        Some("fixture\nedited meanwhile\n")
    );
    assert_nothing_left(&repo, 1);
}

/// An untracked file in the primary checkout where the member adds one: the ref moved, the
/// fast-forward there refused to overwrite it, and the ref was put back.
#[test]
fn an_untracked_file_in_the_way_of_the_fast_forward_puts_the_target_back() {
    let _serial = serial();
    let repo = fixture();
    repo.write("src/one.txt", "mine, untracked\n");
    member(&repo, "m1", "main", &[("src/one.txt", "one\n")]);
    let before = tip(&repo, "main");
    let gates = gates();
    let outcome = run_land(&repo, &landing(&repo, &gates, "m1", "main")).unwrap();
    let LandOutcome::Busy(Busy::Dirty { worktree, detail }) = &outcome else {
        panic!("not refused: {outcome:?}");
    };
    assert_eq!(worktree, repo.path());
    assert!(detail[0].contains("src/one.txt"), "{detail:?}");
    assert_eq!(tip(&repo, "main"), before, "the target was put back");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before);
    assert_eq!(
        repo.read("src/one.txt").as_deref(),
        Some("mine, untracked\n")
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), "?? src/");
    assert_nothing_left(&repo, 1);
}

/// A landing whose process was killed (SIGKILL: no guard ran) left its scratch worktree; the
/// next landing in the repository removes it. A live process's is never touched.
#[test]
fn a_scratch_worktree_of_a_killed_process_is_removed_by_the_next_landing() {
    let _serial = serial();
    let repo = fixture();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = repo
        .path()
        .join(format!(".git/greenlight/land/{dead}-0-old"));
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        stale.to_str().unwrap(),
        "trunk",
    ]);
    repo.write(
        &format!(".git/greenlight/land/{dead}-0-old/half-merged"),
        "x",
    );
    let live = repo.path().join(format!(
        ".git/greenlight/land/{}-99-live",
        std::process::id()
    ));
    std::fs::create_dir_all(&live).unwrap();
    member(&repo, "m1", "trunk", &[("src/one.txt", "one\n")]);
    let gates = gates();
    assert_eq!(
        run_land(&repo, &landing(&repo, &gates, "m1", "trunk"))
            .unwrap()
            .failure(),
        None
    );
    assert!(!stale.exists());
    assert!(live.exists(), "a live process's directory is left alone");
    std::fs::remove_dir(&live).unwrap();
    assert_nothing_left(&repo, 1);
}

/// Ctrl-C while a landing gate runs: the gate's process is ended, nothing advances, and the
/// scratch worktree is removed.
#[test]
fn an_interrupt_during_the_gates_ends_them_advances_nothing_and_leaves_nothing() {
    let _serial = serial();
    let repo = fixture();
    let pid_file = repo.path().parent().unwrap().join("slow.pid");
    let slow = outside_script(
        &repo,
        "slow.sh",
        &format!("echo $$ > {}\nexec sleep 30\n", pid_file.display()),
    );
    commit_gates(
        &repo,
        "trunk",
        &format!("version: 1\ngates:\n  - id: slow\n    command: {slow}\n"),
    );
    member(&repo, "m1", "trunk", &[("src/one.txt", "one\n")]);
    let before = tip(&repo, "trunk");
    let gates = vec!["slow".to_owned()];
    let (send, mut watch) = no_interrupt();
    let pid_wait = pid_file.clone();
    let signaller = std::thread::spawn(move || {
        let pids = greenlight_testkit::procs::wait_until(
            Duration::from_secs(20),
            "the slow gate never started",
            || {
                std::fs::read_to_string(&pid_wait)
                    .ok()
                    .filter(|t| t.ends_with('\n'))
            },
        );
        send.send(Some(Interrupt::Int)).unwrap();
        pids.trim().parse::<i32>().unwrap()
    });
    let started = std::time::Instant::now();
    let result = block_on(land::land(
        &landing(&repo, &gates, "m1", "trunk"),
        &options(&repo),
        &mut watch,
    ));
    let gate_pid = signaller.join().unwrap();
    assert!(
        matches!(result, Err(LandError::Interrupted(Interrupt::Int))),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    greenlight_testkit::procs::assert_all_dead(&[gate_pid], "the gate outlived the landing");
    assert_eq!(tip(&repo, "trunk"), before);
    assert_nothing_left(&repo, 1);
}

#[test]
fn gates_without_a_definition_on_the_target_are_an_error_naming_them() {
    let _serial = serial();
    let repo = fixture();
    repo.git(&["branch", "bare", "main~1"]);
    member(&repo, "m1", "bare", &[("src/one.txt", "one\n")]);
    let gates = gates();
    let error = run_land(&repo, &landing(&repo, &gates, "m1", "bare")).unwrap_err();
    assert!(matches!(error, LandError::NoVerifyYaml { .. }), "{error:?}");
    assert!(error.to_string().contains("test, clean, lint"), "{error}");
    let unknown = vec!["nope".to_owned()];
    let error = run_land(&repo, &landing(&repo, &unknown, "m1", "trunk")).unwrap_err();
    assert!(
        error.to_string().contains("unknown gate id: nope"),
        "{error}"
    );
    let missing = Landing {
        member: "no-such-branch",
        ..landing(&repo, &gates, "m1", "trunk")
    };
    let error = run_land(&repo, &missing).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`no-such-branch` names no commit"),
        "{error}"
    );
    // A land step with no gates is a plain merge queue.
    let none: Vec<String> = Vec::new();
    assert_eq!(
        run_land(&repo, &landing(&repo, &none, "m1", "bare"))
            .unwrap()
            .failure(),
        None
    );
    assert_eq!(tip(&repo, "trunk"), tip(&repo, "main"));
    assert_nothing_left(&repo, 1);
}

/// The run's snapshot of its base's verify.yaml judges, whatever the target's tip says.
#[test]
fn a_snapshot_source_judges_by_the_snapshot_not_the_target_tip() {
    let _serial = serial();
    let repo = fixture();
    commit_gates(
        &repo,
        "trunk",
        "version: 1\ngates:\n  - id: clean\n    command: 'true'\n",
    );
    member(&repo, "m1", "trunk", &[("bad", "x\n")]);
    let (snapshot, _) = greenlight_gate::config::Snapshot::take(
        camino::Utf8Path::from_path(&repo.path().join(".commandmate/verify.yaml")).unwrap(),
    )
    .unwrap();
    let gates = vec!["clean".to_owned()];
    let judged = Landing {
        judged_by: GateSource::Snapshot(snapshot),
        ..landing(&repo, &gates, "m1", "trunk")
    };
    let outcome = run_land(&repo, &judged).unwrap();
    assert_eq!(outcome.failure(), Some(Reason::LandRed), "{outcome:?}");
    assert_nothing_left(&repo, 1);
}

/// A landing's gates run while another step's agent is still running in the same process (a
/// member of another fan-out): the runner's sweep of adopted children must not take that
/// agent, which greenlight itself is running, for an escapee and kill it.
#[test]
fn a_landing_beside_a_running_agent_leaves_the_agent_running() {
    let _serial = serial();
    let repo = fixture();
    member(&repo, "m1", "trunk", &[("src/one.txt", "one\n")]);
    let started = repo.path().parent().unwrap().join("agent.started");
    let agent = greenlight_proc::Spec::new(
        greenlight_proc::Program::Shell(format!(
            "touch {}; sleep 1; echo finished",
            started.display()
        )),
        repo.path(),
    );
    let gates = gates();
    let (_keep, mut watch) = no_interrupt();
    let (agent_ran, landed) = block_on(async {
        let mut observer = ();
        let agent_run = greenlight_proc::run(&agent, &mut observer, None);
        let landing = async {
            // The landing starts once the agent is running.
            while !started.exists() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            land::land(
                &landing(&repo, &gates, "m1", "trunk"),
                &options(&repo),
                &mut watch,
            )
            .await
        };
        tokio::join!(agent_run, landing)
    });
    let agent_ran = agent_ran.unwrap();
    assert_eq!(landed.unwrap().failure(), None);
    assert_eq!(
        agent_ran.exit,
        Some(greenlight_proc::Exit::Code(0)),
        "the agent was ended: {agent_ran:?}"
    );
    assert!(agent_ran.tail.text().contains("finished"));
    assert_nothing_left(&repo, 1);
}
