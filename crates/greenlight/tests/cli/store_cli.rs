//! `greenlight store check|migrate` on a SQLite file, through the real binary: a missing store
//! asks for a migrate and is left missing, migrate creates it, check then says current, and a
//! store from a newer greenlight is refused by both without being touched.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use greenlight_store::SCHEMA_VERSION;
use greenlight_testkit::Cli;

fn store(args: &[&str], state: &std::path::Path) -> greenlight_testkit::Run {
    Cli::new(["store"].iter().chain(args))
        .env("GREENLIGHT_STATE", state)
        .env_remove("GREENLIGHT_STORE")
        .run()
}

#[test]
fn check_changes_nothing_migrate_creates_and_a_newer_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");

    let missing = store(&["check"], &state);
    assert_eq!(missing.code, 1, "{}", missing.render());
    assert!(
        missing.stdout.contains("greenlight store migrate"),
        "{}",
        missing.render()
    );
    assert!(!state.exists(), "check creates nothing");

    let made = store(&["migrate"], &state);
    assert_eq!(made.code, 0, "{}", made.render());
    assert!(
        made.stdout
            .contains(&format!("created at schema {SCHEMA_VERSION}")),
        "{}",
        made.render()
    );
    let current = store(&["check"], &state);
    assert_eq!(current.code, 0, "{}", current.render());
    assert!(
        current
            .stdout
            .contains(&format!("schema {SCHEMA_VERSION} (current)")),
        "{}",
        current.render()
    );
    let again = store(&["migrate"], &state);
    assert!(again.stdout.contains("nothing to do"), "{}", again.render());

    let raw = rusqlite::Connection::open(&state).unwrap();
    raw.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(raw);
    for sub in ["check", "migrate"] {
        let newer = store(&[sub], &state);
        assert_eq!(newer.code, 2, "{}", newer.render());
        assert!(newer.stderr.contains("newer"), "{}", newer.render());
    }
    let raw = rusqlite::Connection::open(&state).unwrap();
    let version: i64 = raw
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        version,
        SCHEMA_VERSION + 1,
        "a newer store is left as it was"
    );
}
