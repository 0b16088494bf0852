//! Declared-path containment and the landed barrier, on real directories and symlinks.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use greenlight_agent::{
    AdapterOptions, ContainmentError, Deliverable, DispatchRequest, Family, Outcome, Reason,
    WriteBaseline, check_all, check_contained, cli_dispatcher,
};
use greenlight_testkit::fake_agent::{FakeAgent, FakeCli, Scenario};

fn escapes(root: &Path, path: &str) -> bool {
    match check_contained(root, path) {
        Err(err) => {
            assert_eq!(err.reason(), Reason::PathEscapesRoot, "{err}");
            true
        }
        Ok(_) => false,
    }
}

#[test]
fn plain_relative_paths_are_contained_even_when_they_do_not_exist_yet() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(root.path().join("src")).expect("mkdir");
    assert!(!escapes(root.path(), "src/lib.rs"));
    assert!(!escapes(root.path(), "new/deep/file.txt"));
    assert!(!escapes(root.path(), "./src/./x"));
}

#[test]
fn absolute_parent_and_control_characters_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    for bad in [
        "/etc/passwd",
        "../outside",
        "src/../../x",
        "a/..",
        "tab\there",
        "nul\0",
        "",
        "esc\u{1b}[0m",
    ] {
        assert!(escapes(root.path(), bad), "{bad:?} was accepted");
    }
    assert!(matches!(
        check_contained(root.path(), "/x"),
        Err(ContainmentError::Absolute { .. })
    ));
    assert!(matches!(
        check_contained(root.path(), "a/../b"),
        Err(ContainmentError::ParentReference { .. })
    ));
}

#[test]
fn a_symlinked_ancestor_pointing_outside_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    symlink(outside.path(), root.path().join("link")).expect("symlink");
    assert!(escapes(root.path(), "link/file.txt"));
    assert!(escapes(root.path(), "link/not/yet/there.txt"));
    assert!(escapes(root.path(), "link"));
    let err = check_contained(root.path(), "link/file.txt").expect_err("escapes");
    assert!(err.to_string().contains("outside the root"), "{err}");
}

#[test]
fn a_symlink_that_stays_inside_the_root_is_fine_and_a_dangling_one_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(root.path().join("real")).expect("mkdir");
    symlink(root.path().join("real"), root.path().join("alias")).expect("symlink");
    assert!(!escapes(root.path(), "alias/file.txt"));
    symlink(
        "/nonexistent/target/for/greenlight",
        root.path().join("dangling"),
    )
    .expect("symlink");
    assert!(escapes(root.path(), "dangling"));
}

#[test]
fn a_root_reached_through_a_symlink_still_contains_its_own_paths() {
    let real = tempfile::tempdir().expect("tempdir");
    let holder = tempfile::tempdir().expect("tempdir");
    let via = holder.path().join("root-link");
    symlink(real.path(), &via).expect("symlink");
    assert!(!escapes(&via, "a/b.txt"));
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn a_symlink_planted_between_preflight_and_dispatch_is_caught_before_the_spawn() {
    let root = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(root.path().join("out")).expect("mkdir");
    let writes = vec!["out/result.txt".to_string()];
    let reads = vec!["in.txt".to_string()];
    check_all(root.path(), &reads, &writes).expect("preflight passes");

    // Between preflight and dispatch, `out` becomes a symlink to a directory outside the root.
    std::fs::remove_dir(root.path().join("out")).expect("rmdir");
    symlink(outside.path(), root.path().join("out")).expect("symlink");

    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    let d = cli_dispatcher(
        Family::Claude,
        AdapterOptions {
            bin: Some(fake.bin().to_path_buf()),
            ..AdapterOptions::default()
        },
    )
    .expect("builds");
    let mut req = DispatchRequest::new(
        Family::Claude,
        "m",
        "q",
        root.path(),
        Duration::from_secs(30),
    );
    req.deliverable = Deliverable::File;
    req.reads = reads;
    req.writes = writes;
    let result = d.dispatch(&req).await;
    assert_eq!(result.outcome, Outcome::Error);
    assert_eq!(
        result.failure.map(|f| f.reason),
        Some(Reason::PathEscapesRoot)
    );
    assert!(
        fake.invocations().is_empty(),
        "nothing runs once a path escapes"
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn the_landed_barrier_needs_every_declared_write_to_exist_and_change() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("kept.txt"), "before").expect("write");
    let writes = vec!["report.md".to_string()];

    // An agent that writes the deliverable lands it.
    let writer = FakeAgent::builder(FakeCli::Codex, Scenario::Write)
        .write("report.md")
        .install()
        .expect("install");
    let baseline = WriteBaseline::take(root.path(), &writes).expect("baseline");
    let mut req = DispatchRequest::new(
        Family::Codex,
        "m",
        "write it",
        root.path(),
        Duration::from_secs(30),
    );
    req.deliverable = Deliverable::File;
    req.writes = writes.clone();
    let d = cli_dispatcher(
        Family::Codex,
        AdapterOptions {
            bin: Some(writer.bin().to_path_buf()),
            ..AdapterOptions::default()
        },
    )
    .expect("builds");
    let result = d.dispatch(&req).await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    baseline.check_landed().expect("the write landed");

    // Run again with an agent that answers but writes nothing: the file exists but is unchanged.
    let idle = FakeAgent::install(FakeCli::Codex, Scenario::Ok).expect("install");
    let baseline = WriteBaseline::take(root.path(), &writes).expect("baseline");
    let d = cli_dispatcher(
        Family::Codex,
        AdapterOptions {
            bin: Some(idle.bin().to_path_buf()),
            ..AdapterOptions::default()
        },
    )
    .expect("builds");
    assert_eq!(d.dispatch(&req).await.outcome, Outcome::Ok);
    let err = baseline.check_landed().expect_err("unchanged");
    assert_eq!(err.reason(), Reason::DeliverableNotLanded);
    assert!(err.to_string().contains("is unchanged"), "{err}");

    // A declared write that never appears.
    let missing = WriteBaseline::take(root.path(), &["never.txt".to_string()]).expect("baseline");
    let err = missing.check_landed().expect_err("missing");
    assert_eq!(err.reason(), Reason::DeliverableNotLanded);
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn a_baseline_is_never_taken_through_an_escaping_path() {
    let root = tempfile::tempdir().expect("tempdir");
    let err = WriteBaseline::take(root.path(), &["../x".to_string()]).expect_err("refused");
    assert_eq!(err.reason(), Reason::PathEscapesRoot);
}
