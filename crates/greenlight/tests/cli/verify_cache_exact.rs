//! The result cache keys the bytes on disk, through the real binary: line-end conversion, index
//! flags and copied-in submodule contents never make two different trees share a key; a change
//! while a gate runs (of a file or of a `keys` command's output) is never stored; every byte a
//! `keys` command prints counts; what cannot be keyed exactly runs, and `--explain` says why.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use greenlight_testkit::TempRepo;

/// A worktree whose verify.yaml (committed, so it is not work of its own) declares `gates`.
fn repo_with(gates: &str) -> TempRepo {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(&format!("version: 2\ngates:\n{gates}"));
    repo.commit_all("gates");
    repo
}

/// The verdict word and whether it was replayed, of the one gate `id`.
fn gate(out: &greenlight_testkit::Run, id: &str) -> (String, bool) {
    let line = out
        .lines()
        .iter()
        .find(|l| l.starts_with(&format!("GATE {id} ")))
        .cloned()
        .unwrap_or_else(|| panic!("no GATE {id} line:\n{}", out.render()));
    let verdict = line.split(' ').nth(2).unwrap().to_owned();
    (verdict, line.contains(" cached="))
}

/// Runs verify and returns gate `id`'s verdict and whether it replayed.
fn verify(repo: &TempRepo, id: &str) -> (String, bool) {
    gate(&repo.greenlight(["verify"]), id)
}

/// A gate that passes only when `value.txt` holds no carriage return.
const NO_CR: &str = "  - id: lf\n    command: \"! grep -q \\\"$(printf '\\\\r')\\\" value.txt\"\n";

fn crlf_cases(setup: impl Fn(&TempRepo)) {
    // LF first: a PASS stored under the LF bytes must not replay for the CRLF bytes.
    let repo = repo_with(NO_CR);
    setup(&repo);
    repo.write("value.txt", "one\ntwo\n");
    repo.commit_all("lf");
    assert_eq!(verify(&repo, "lf"), ("PASS".into(), false));
    assert_eq!(verify(&repo, "lf"), ("PASS".into(), true));
    repo.write("value.txt", "one\r\ntwo\r\n");
    assert_eq!(
        verify(&repo, "lf"),
        ("FAIL".into(), false),
        "CRLF keyed like LF"
    );
    // And the reverse: the FAIL stored under CRLF must not replay once the file is LF again
    // (here the stored PASS of the LF bytes replays, which is right).
    repo.write("value.txt", "one\ntwo\n");
    assert_eq!(verify(&repo, "lf").0, "PASS");
    let repo = repo_with(NO_CR);
    setup(&repo);
    repo.write("value.txt", "one\ntwo\n");
    repo.commit_all("lf");
    repo.write("value.txt", "one\r\ntwo\r\n");
    assert_eq!(verify(&repo, "lf"), ("FAIL".into(), false));
    repo.write("value.txt", "one\ntwo\n");
    assert_eq!(
        verify(&repo, "lf"),
        ("PASS".into(), false),
        "LF keyed like CRLF"
    );
}

#[test]
fn crlf_under_text_auto_keys_differently_from_lf_both_ways() {
    crlf_cases(|repo| {
        repo.write(".gitattributes", "* text=auto\n");
        repo.commit_all("attributes");
    });
}

#[test]
fn crlf_under_eol_crlf_keys_differently_from_lf_both_ways() {
    crlf_cases(|repo| {
        repo.write(".gitattributes", "*.txt text eol=crlf\n");
        repo.commit_all("attributes");
    });
}

#[test]
fn crlf_under_core_autocrlf_keys_differently_from_lf_both_ways() {
    crlf_cases(|repo| {
        repo.git(&["config", "core.autocrlf", "input"]);
    });
    crlf_cases(|repo| {
        repo.git(&["config", "core.autocrlf", "true"]);
    });
}

/// A gate that passes only when `value.txt` holds `ok!`.
const VALUE_OK: &str = "  - id: value\n    command: grep -qx 'ok!' value.txt\n";

fn index_flag_case(flag: &str) {
    let repo = repo_with(VALUE_OK);
    repo.write("value.txt", "ok!\n");
    repo.commit_all("value");
    repo.git(&["update-index", flag, "value.txt"]);
    assert_eq!(verify(&repo, "value"), ("PASS".into(), false));
    repo.write("value.txt", "bad\n");
    let out = repo.greenlight(["verify"]);
    assert_eq!(
        gate(&out, "value"),
        ("FAIL".into(), false),
        "{flag}: {}",
        out.render()
    );
    // Work-evidence counts it as changed too.
    assert!(
        out.stdout.contains("uncommitted=1"),
        "{flag}: the flagged file is uncommitted work: {}",
        out.render()
    );
    // Back to what the index holds: the stored PASS is right again, and nothing is uncommitted.
    repo.write("value.txt", "ok!\n");
    let out = repo.greenlight(["verify"]);
    assert_eq!(gate(&out, "value").0, "PASS", "{}", out.render());
    assert!(out.stdout.contains("uncommitted=0"), "{}", out.render());
}

#[test]
fn an_assume_unchanged_file_is_keyed_and_counted_by_what_it_holds_now() {
    index_flag_case("--assume-unchanged");
}

#[test]
fn a_skip_worktree_file_is_keyed_and_counted_by_what_it_holds_now() {
    index_flag_case("--skip-worktree");
}

/// A submodule path whose contents were copied in (no `.git` inside) is read file by file.
#[test]
fn files_under_a_submodule_path_without_git_are_keyed_by_their_bytes() {
    let repo =
        repo_with("  - id: vendored\n    command: grep -qx 'ok!' vendor/lib/deep/value.txt\n");
    let head = repo.git(&["rev-parse", "HEAD"]);
    repo.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{head},vendor/lib"),
    ]);
    repo.git(&["commit", "-q", "-m", "a submodule"]);
    repo.write("vendor/lib/deep/value.txt", "ok!\n");
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "git sees nothing to key there"
    );
    assert_eq!(verify(&repo, "vendored"), ("PASS".into(), false));
    assert_eq!(verify(&repo, "vendored"), ("PASS".into(), true));
    repo.write("vendor/lib/deep/value.txt", "bad\n");
    assert_eq!(verify(&repo, "vendored"), ("FAIL".into(), false));
    // A file added beside it counts as well.
    repo.write("vendor/lib/deep/value.txt", "ok!\n");
    assert_eq!(verify(&repo, "vendored"), ("PASS".into(), true));
    repo.write("vendor/lib/other.txt", "new\n");
    assert_eq!(verify(&repo, "vendored"), ("PASS".into(), false));
}

/// ABA: the gate itself turns `value.txt` good, measures it, and turns it bad again (same size)
/// before verify lists the workspace after it; the PASS belongs to no state the tree was in
/// before or after, so it is not stored.
#[test]
fn a_file_that_changed_and_changed_back_while_the_gate_ran_is_not_stored() {
    let repo = repo_with("  - id: value\n    command: sh check.sh\n");
    let marker = repo.home().join("aba-done");
    repo.write(
        "check.sh",
        format!(
            "if [ ! -e '{m}' ]; then\n  touch '{m}'\n  printf 'ok!\\n' > value.txt\n  grep -qx 'ok!' value.txt; r=$?\n  printf 'bad\\n' > value.txt\n  exit $r\nfi\ngrep -qx 'ok!' value.txt\n",
            m = marker.display()
        ),
    );
    repo.write("value.txt", "bad\n");
    repo.commit_all("check");
    assert_eq!(verify(&repo, "value"), ("PASS".into(), false));
    assert_eq!(repo.read("value.txt").unwrap(), "bad\n");
    assert_eq!(
        verify(&repo, "value"),
        ("FAIL".into(), false),
        "the PASS measured on transient content replayed"
    );
}

/// A `keys` command's input changes while the gate runs: the result is filed under neither
/// output, so it does not replay when the old output comes back.
#[test]
fn a_keys_output_that_changed_while_the_gate_ran_is_not_stored() {
    let repo = TempRepo::worktree_with_commit();
    let version = repo.home().join("tool-version");
    std::fs::write(&version, "bad\n").unwrap();
    let marker = repo.home().join("flipped");
    repo.verify_yaml(&format!(
        "version: 2\ngates:\n  - id: tool\n    command: sh check.sh\n    keys: [\"cat '{v}'\"]\n",
        v = version.display()
    ));
    repo.write(
        "check.sh",
        format!(
            "[ -e '{m}' ] || {{ touch '{m}'; printf 'ok!\\n' > '{v}'; }}\ngrep -qx 'ok!' '{v}'\n",
            m = marker.display(),
            v = version.display()
        ),
    );
    repo.commit_all("check");
    assert_eq!(verify(&repo, "tool"), ("PASS".into(), false));
    std::fs::write(&version, "bad\n").unwrap();
    assert_eq!(
        verify(&repo, "tool"),
        ("FAIL".into(), false),
        "the PASS was filed under the key output from before the gate"
    );
}

/// Every byte of a `keys` command's output counts: a change in the first part of a 2 MB output,
/// and 0xFF → 0xFE (the same text once decoded lossily).
#[test]
fn every_byte_of_a_keys_output_is_in_the_key() {
    let repo = TempRepo::worktree_with_commit();
    let lock = repo.home().join("lock.json");
    let mut big = vec![b'a'; 2 << 20];
    std::fs::write(&lock, &big).unwrap();
    let byte = repo.home().join("byte.bin");
    std::fs::write(&byte, [0xFF]).unwrap();
    repo.verify_yaml(&format!(
        "version: 2\ngates:\n  - id: head\n    command: \"[ \\\"$(head -c 1 '{l}')\\\" = a ]\"\n    keys: [\"cat '{l}'\"]\n  - id: byte\n    command: \"[ \\\"$(od -An -tx1 '{b}' | tr -d ' ')\\\" = ff ]\"\n    keys: [\"cat '{b}'\"]\n",
        l = lock.display(),
        b = byte.display()
    ));
    repo.commit_all("gates");
    let out = repo.greenlight(["verify"]);
    assert_eq!(
        gate(&out, "head"),
        ("PASS".into(), false),
        "{}",
        out.render()
    );
    assert_eq!(gate(&out, "byte"), ("PASS".into(), false));
    let out = repo.greenlight(["verify"]);
    assert_eq!(
        gate(&out, "head"),
        ("PASS".into(), true),
        "{}",
        out.render()
    );
    assert_eq!(gate(&out, "byte"), ("PASS".into(), true));
    big[0] = b'b';
    std::fs::write(&lock, &big).unwrap();
    std::fs::write(&byte, [0xFE]).unwrap();
    let out = repo.greenlight(["verify"]);
    assert_eq!(
        gate(&out, "head"),
        ("FAIL".into(), false),
        "{}",
        out.render()
    );
    assert_eq!(
        gate(&out, "byte"),
        ("FAIL".into(), false),
        "{}",
        out.render()
    );
}

/// What cannot be keyed exactly (a tracked file replaced by a FIFO, among a gate's inputs) makes
/// that gate uncacheable for the run, and `--explain` names the path and why; a gate whose
/// inputs leave it out still replays.
#[test]
fn a_gate_whose_inputs_cannot_be_keyed_exactly_runs_and_explain_says_why() {
    let repo = repo_with(
        "  - id: all\n    command: \"true\"\n  - id: narrow\n    command: \"true\"\n    inputs: [\"src/**\"]\n",
    );
    repo.write("pipe", "a file for now\n");
    repo.commit_all("pipe");
    std::fs::remove_file(repo.path().join("pipe")).unwrap();
    greenlight_testkit::files::mkfifo(&repo.path().join("pipe"));
    let first = repo.greenlight(["verify", "--explain"]);
    assert_eq!(first.code, 0, "{}", first.render());
    let out = repo.greenlight(["verify", "--explain"]);
    assert_eq!(
        gate(&out, "all"),
        ("PASS".into(), false),
        "{}",
        out.render()
    );
    assert_eq!(
        gate(&out, "narrow"),
        ("PASS".into(), true),
        "{}",
        out.render()
    );
    assert!(
        out.stderr.contains(
            "greenlight: all: ran: uncacheable for this run: pipe cannot be keyed exactly (it is a FIFO"
        ),
        "--explain names the path that cannot be keyed: {}",
        out.render()
    );
}

/// After the gates only what the gates to store may read is listed again: a gate whose inputs
/// are `src/**` is stored although the run changed a file outside them, and a gate that reads
/// the whole workspace is not.
#[test]
fn a_change_outside_a_gates_inputs_while_it_ran_does_not_stop_its_store() {
    let repo = repo_with(
        "  - id: narrow\n    command: date +%s%N > notes.txt\n    inputs: [\"src/**\"]\n  - id: whole\n    command: \"true\"\n    needs: [narrow]\n",
    );
    let out = repo.greenlight(["verify"]);
    assert_eq!(
        gate(&out, "narrow"),
        ("PASS".into(), false),
        "{}",
        out.render()
    );
    let out = repo.greenlight(["verify", "--explain"]);
    assert_eq!(
        gate(&out, "narrow"),
        ("PASS".into(), true),
        "{}",
        out.render()
    );
    assert_eq!(
        gate(&out, "whole"),
        ("PASS".into(), false),
        "notes.txt, one of its inputs, changed during the run that ran it: {}",
        out.render()
    );
}
