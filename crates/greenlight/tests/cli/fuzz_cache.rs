//! A property of the result cache, through the real binary: whatever the tree, its git
//! attributes and index flags, and whatever changes before, during (from inside the gate) and
//! after a gate's run, a verdict verify replays is the verdict the gate gives when run on the
//! tree as it is at lookup time.
//!
//! Each case is a real repository: four files and a copied-in submodule directory the gate
//! reads, a `keys` command's file outside the worktree, random `.gitattributes` and
//! `core.autocrlf`, `assume-unchanged` and `skip-worktree` bits; verify runs once with edits
//! made by the gate itself before and after it measures, the tree is edited again (often back
//! to exactly what it held before the first run), and verify runs again.
//!
//! Cases: `GREENLIGHT_FUZZ_CASES` (12 by default: each case is a repository and three runs;
//! scripts/test runs 1000), bounded by `GREENLIGHT_FUZZ_SECONDS`.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::Instant;

use greenlight_testkit::TempRepo;
use proptest::prelude::*;

use crate::fuzz_support;

/// What the gate reads: these files, the copied-in `vendor/lib/v` and the `keys` file.
const FILES: [&str; 4] = ["a.txt", "b.txt", "d/c.txt", "d/e.txt"];

/// Contents a file may hold: the good and bad ones of the same size, CRLF and LF twins, none.
const CONTENTS: [Option<&[u8]>; 7] = [
    Some(b"ok!\n"),
    Some(b"bad\n"),
    Some(b"ok!\r\n"),
    Some(b"ok\r\n"),
    Some(b""),
    Some(b"\xff\xfe\n"),
    None,
];

/// The gate: runs the `pre` edits, fails when any file it reads holds `bad` or a carriage
/// return, runs the `post` edits, and exits with what it measured.
const GATE: &str = r#"[ -f "$HOME/pre.sh" ] && . "$HOME/pre.sh"; rm -f "$HOME/pre.sh"
cr="$(printf '\r')"
r=0
for f in a.txt b.txt d/c.txt d/e.txt vendor/lib/v "$HOME/k"; do
  if [ -f "$f" ] && grep -q -e bad -e "$cr" "$f"; then r=1; fi
done
[ -f "$HOME/post.sh" ] && . "$HOME/post.sh"; rm -f "$HOME/post.sh"
exit $r
"#;

/// One change to the tree.
#[derive(Debug, Clone)]
enum Edit {
    /// Write (or with `None`, delete) one of the gate's files (index 4 is `vendor/lib/v`,
    /// 5 the `keys` file).
    Set(usize, Option<&'static [u8]>),
}

fn edit() -> impl Strategy<Value = Edit> {
    (0..6usize, 0..CONTENTS.len()).prop_map(|(file, content)| Edit::Set(file, CONTENTS[content]))
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    proptest::collection::vec(edit(), 0..3)
}

/// Edits the gate makes while it runs: most runs make none, so most results are stored and
/// the lookups after them have something to replay.
fn during() -> impl Strategy<Value = Vec<Edit>> {
    prop_oneof![2 => Just(Vec::new()), 1 => edits()]
}

fn path_of(repo: &TempRepo, file: usize) -> std::path::PathBuf {
    match file {
        0..4 => repo.path().join(FILES[file]),
        4 => repo.path().join("vendor/lib/v"),
        _ => repo.home().join("k"),
    }
}

/// The edits as shell commands (run by the gate), with paths fixed.
fn script(repo: &TempRepo, edits: &[Edit]) -> String {
    let mut text = String::new();
    for Edit::Set(file, content) in edits {
        let path = path_of(repo, *file).display().to_string();
        match content {
            Some(bytes) => {
                let octal: String = bytes.iter().map(|b| format!("\\{b:03o}")).collect();
                text.push_str(&format!("printf '{octal}' > '{path}'\n"));
            }
            None => text.push_str(&format!("rm -f '{path}'\n")),
        }
    }
    text
}

fn apply(repo: &TempRepo, edits: &[Edit]) {
    for Edit::Set(file, content) in edits {
        let path = path_of(repo, *file);
        match content {
            Some(bytes) => greenlight_testkit::files::write_file(&path, bytes),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// Every file's bytes now, to put back later (a rewrite: new metadata, same bytes).
fn snapshot(repo: &TempRepo) -> Vec<Edit> {
    (0..6)
        .map(|file| {
            let bytes = std::fs::read(path_of(repo, file)).ok();
            let content = bytes.and_then(|b| {
                CONTENTS
                    .iter()
                    .flatten()
                    .find(|c| **c == b.as_slice())
                    .copied()
            });
            Edit::Set(file, content)
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Case {
    attributes: Option<&'static str>,
    autocrlf: Option<&'static str>,
    committed: Vec<Edit>,
    flags: Vec<Option<&'static str>>,
    before: Vec<Edit>,
    pre: Vec<Edit>,
    post: Vec<Edit>,
    after: Vec<Edit>,
    restore: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![
            Just(None),
            Just(Some("* text=auto\n")),
            Just(Some("* text eol=crlf\n")),
            Just(Some("*.txt -text\n")),
        ],
        prop_oneof![Just(None), Just(Some("true")), Just(Some("input"))],
        proptest::collection::vec(edit(), 0..6),
        proptest::collection::vec(
            prop_oneof![
                Just(None),
                Just(Some("--assume-unchanged")),
                Just(Some("--skip-worktree"))
            ],
            4,
        ),
        (
            edits(),
            during(),
            during(),
            proptest::collection::vec(edit(), 1..4),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(attributes, autocrlf, committed, flags, (before, pre, post, after, restore))| Case {
                attributes,
                autocrlf,
                committed,
                flags,
                before,
                pre,
                post,
                after,
                restore,
            },
        )
}

/// The gate's verdict on the tree as it is: the gate run by hand, with no edits of its own.
fn truth(repo: &TempRepo) -> &'static str {
    let status = std::process::Command::new("sh")
        .arg("gate.sh")
        .current_dir(repo.path())
        .env("HOME", repo.home())
        .status()
        .unwrap();
    if status.success() { "PASS" } else { "FAIL" }
}

/// The gate line's verdict and whether it replayed.
fn verify(repo: &TempRepo) -> Result<(String, bool), TestCaseError> {
    let out = repo.greenlight(["verify"]);
    let line = out
        .lines()
        .iter()
        .find(|l| l.starts_with("GATE g "))
        .map(|l| l.to_string());
    let Some(line) = line else {
        return Err(TestCaseError::fail(format!(
            "no gate line:\n{}",
            out.render()
        )));
    };
    let verdict = line.split(' ').nth(2).unwrap_or_default().to_owned();
    Ok((verdict, line.contains(" cached=")))
}

/// How many lookups replayed, and how many ran (so a property that never replays is seen).
#[derive(Default)]
struct Seen {
    replayed: std::cell::Cell<u32>,
    ran: std::cell::Cell<u32>,
}

/// The `keys` file's bytes after `edits`, from `start` (`None`: absent).
fn keys_file_after(start: Option<&'static [u8]>, edits: &[Edit]) -> Option<&'static [u8]> {
    edits
        .iter()
        .filter(|Edit::Set(file, _)| *file == 5)
        .fold(start, |_, Edit::Set(_, content)| *content)
}

/// Whether the gate changes the `keys` file and puts back what it held before the run. Outside
/// the cache's contract: a `keys` command is a sample taken before and after the run, and
/// what it reads outside the workspace has no metadata greenlight watches, so a change made
/// and undone in between cannot be seen (docs/cache.md says so).
fn gate_restores_the_keys_file(case: &Case) -> bool {
    let during = case
        .pre
        .iter()
        .chain(&case.post)
        .cloned()
        .collect::<Vec<_>>();
    let touched = during.iter().any(|Edit::Set(file, _)| *file == 5);
    let before_run = keys_file_after(keys_file_after(None, &case.committed), &case.before);
    touched && keys_file_after(before_run, &during) == before_run
}

fn check(case: &Case, seen: &Seen) -> Result<(), TestCaseError> {
    prop_assume!(!gate_restores_the_keys_file(case));
    let repo = TempRepo::worktree_with_commit();
    let keys = repo.home().join("k");
    repo.verify_yaml(&format!(
        "version: 2\ngates:\n  - id: g\n    command: sh gate.sh\n    keys: [\"cat '{}'\"]\n",
        keys.display()
    ));
    repo.write("gate.sh", GATE);
    if let Some(text) = case.attributes {
        repo.write(".gitattributes", text);
    }
    if let Some(value) = case.autocrlf {
        repo.git(&["config", "core.autocrlf", value]);
    }
    for file in FILES {
        repo.write(file, "ok!\n");
    }
    // `vendor/lib` becomes a submodule path below: nothing of it is committed as files.
    let committed: Vec<Edit> = case
        .committed
        .iter()
        .filter(|Edit::Set(file, _)| *file != 4)
        .cloned()
        .collect();
    apply(&repo, &committed);
    repo.commit_all("tree");
    // A submodule path whose contents were copied in.
    let head = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{head},vendor/lib"),
    ]);
    repo.git(&["commit", "-q", "-m", "submodule"]);
    repo.write("vendor/lib/v", "ok!\n");
    for (file, flag) in FILES.iter().zip(&case.flags) {
        let tracked = !repo.git(&["ls-files", "--", file]).is_empty();
        if let (Some(flag), true) = (flag, tracked) {
            repo.git(&["update-index", flag, file]);
        }
    }
    apply(&repo, &case.before);
    let listed = snapshot(&repo);
    std::fs::write(repo.home().join("pre.sh"), script(&repo, &case.pre)).unwrap();
    std::fs::write(repo.home().join("post.sh"), script(&repo, &case.post)).unwrap();
    verify(&repo)?;
    if case.restore {
        apply(&repo, &listed);
    }
    apply(&repo, &case.after);
    for _ in 0..2 {
        let (verdict, replayed) = verify(&repo)?;
        let counter = if replayed { &seen.replayed } else { &seen.ran };
        counter.set(counter.get() + 1);
        let truth = truth(&repo);
        prop_assert!(
            !replayed || verdict == truth,
            "replayed {verdict}, but the gate gives {truth} on this tree"
        );
        prop_assert_eq!(verdict, truth);
    }
    Ok(())
}

#[test]
fn a_replayed_verdict_is_the_verdict_of_the_tree_at_lookup_time() {
    let start = Instant::now();
    let budget = fuzz_support::budget();
    let ran = std::cell::Cell::new(0u32);
    let seen = Seen::default();
    let config = proptest::test_runner::Config {
        cases: fuzz_support::cases_or(12),
        ..fuzz_support::config()
    };
    proptest!(config, |(case in case())| {
        if start.elapsed() < budget {
            ran.set(ran.get() + 1);
            check(&case, &seen)?;
        }
    });
    assert!(
        ran.get() > 0,
        "the time budget ran out before the first case"
    );
    eprintln!(
        "fuzz cache: {} trees in {:?}, {} lookups replayed, {} ran",
        ran.get(),
        start.elapsed(),
        seen.replayed.get(),
        seen.ran.get()
    );
    assert!(
        seen.replayed.get() > 0 && seen.ran.get() > 0,
        "the property was never put to the test: every lookup ran or every one replayed"
    );
}
