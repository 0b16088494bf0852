//! What only a PostgreSQL store has, against the real server of `GREENLIGHT_TEST_PG` (from
//! `scripts/ci/remote-services.sh start DIR`, whose server also takes TLS with a CA of its own
//! and has the roles `gl_password` and `gl_tls`; scripts/test starts it and runs these): the
//! same tables and columns as a SQLite file, passwords from a file, TLS checked against a CA,
//! clear errors for a wrong password, a missing one, a refused plain connection and a server
//! that is not there, and the notification a server waits on instead of polling.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use greenlight_store::pg::{Listener, PgTarget};
use greenlight_store::{CHANGES_CHANNEL, Error, Store};

fn base() -> String {
    std::env::var("GREENLIGHT_TEST_PG").unwrap_or_else(|_| {
        panic!(
            "GREENLIGHT_TEST_PG is not set: start PostgreSQL with \
             `scripts/ci/remote-services.sh start DIR` and `source DIR/env` (scripts/test does both)"
        )
    })
}

/// `host:port` of the test server.
fn host_port() -> String {
    let base = base();
    let after = base.split_once('@').expect("user@host in the URL").1;
    after.split('/').next().expect("host:port").to_owned()
}

fn fresh_schema_url(url_base: &str) -> String {
    let name = format!(
        "p{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let mut client = postgres::Client::connect(&base(), postgres::NoTls).expect("connect");
    client
        .batch_execute(&format!("CREATE SCHEMA {name}"))
        .expect("schema");
    let sep = if url_base.contains('?') { '&' } else { '?' };
    format!("{url_base}{sep}options=-csearch_path%3D{name}")
}

fn open_err(url: &str) -> String {
    match Store::open(Path::new(url)) {
        Ok(_) => panic!("{url} opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn both_backends_have_the_same_tables_and_columns() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("s.db");
    drop(Store::open(&file).expect("sqlite"));
    let url = fresh_schema_url(&base());
    drop(Store::open(Path::new(&url)).expect("postgres"));

    let sqlite = rusqlite::Connection::open(&file).expect("raw");
    let mut from_sqlite: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let tables: Vec<String> = sqlite
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("tables")
        .collect::<Result<_, _>>()
        .expect("rows");
    for table in tables {
        let mut columns: Vec<String> = sqlite
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("columns")
            .collect::<Result<_, _>>()
            .expect("rows");
        // SQLite's implicit rowid, which PostgreSQL's workflow_members spells out.
        if table == "workflow_members" {
            columns.push("rowid".into());
        }
        columns.sort();
        from_sqlite.insert(table, columns);
    }
    let schema = url.rsplit_once("%3D").expect("schema").1.to_owned();
    let mut pg = postgres::Client::connect(&base(), postgres::NoTls).expect("connect");
    let mut from_pg: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in pg
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name <> 'greenlight_schema'",
            &[&schema],
        )
        .expect("columns")
    {
        from_pg.entry(row.get(0)).or_default().push(row.get(1));
    }
    for columns in from_pg.values_mut() {
        columns.sort();
    }
    assert_eq!(from_pg, from_sqlite);
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn a_password_comes_from_a_file_and_a_wrong_or_missing_one_is_named() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("pw");
    std::fs::write(&file, "pw-test\n").expect("write");
    let hp = host_port();
    let with_file = format!(
        "postgresql://gl_password@{hp}/greenlight?password_file={}",
        file.display()
    );
    let url = fresh_schema_url(&with_file);
    let mut store = Store::open(Path::new(&url)).expect("the password from the file works");
    store
        .write(|tx| tx.append_event(None, None, "note", &serde_json::json!({})))
        .expect("write");

    let wrong = open_err(&format!("postgresql://gl_password:nope@{hp}/greenlight"));
    assert!(wrong.contains("refused the credentials"), "{wrong}");
    assert!(
        !wrong.contains("nope"),
        "the password is never shown: {wrong}"
    );
    let missing = open_err(&format!("postgresql://gl_password@{hp}/greenlight"));
    assert!(missing.contains("password_file=PATH"), "{missing}");
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn tls_is_checked_against_the_ca_and_a_plain_connection_is_refused_where_tls_is_required() {
    let ca = std::env::var("GREENLIGHT_TEST_PG_CA").expect("GREENLIGHT_TEST_PG_CA (scripts/test)");
    let hp = host_port();
    let tls = format!("postgresql://gl_tls@{hp}/greenlight?sslmode=verify-full&sslrootcert={ca}");
    let url = fresh_schema_url(&tls);
    let mut store = Store::open(Path::new(&url)).expect("TLS checked against the CA");
    store
        .write(|tx| tx.append_event(None, None, "note", &serde_json::json!({})))
        .expect("write");
    let mut client = postgres::Client::connect(&base(), postgres::NoTls).expect("connect");
    let encrypted: bool = client
        .query_one(
            "SELECT bool_or(ssl) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
             WHERE usename = 'gl_tls'",
            &[],
        )
        .expect("pg_stat_ssl")
        .get(0);
    assert!(encrypted, "the store's connection is encrypted");

    // The role may not come in plain text; the error says what the server said.
    let plain = open_err(&format!("postgresql://gl_tls@{hp}/greenlight"));
    assert!(
        plain.contains("no encryption") || plain.contains("pg_hba"),
        "{plain}"
    );
    // A CA that did not sign the server's certificate is refused.
    let dir = tempfile::tempdir().expect("tmp");
    let other: PathBuf = dir.path().join("other-ca.crt");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=other",
        ])
        .arg("-keyout")
        .arg(dir.path().join("k"))
        .arg("-out")
        .arg(&other)
        .output()
        .expect("openssl");
    assert!(made.status.success());
    let wrong_ca = open_err(&format!(
        "postgresql://gl_tls@{hp}/greenlight?sslmode=verify-full&sslrootcert={}",
        other.display()
    ));
    assert!(
        wrong_ca.to_lowercase().contains("certificate"),
        "{wrong_ca}"
    );
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn a_server_that_is_not_there_is_a_clear_error_in_bounded_time() {
    // A port nothing listens on (the test server's, plus one, is free on a private cluster
    // picked from free ports; 1 is never PostgreSQL's).
    let start = Instant::now();
    let err = open_err("postgresql://postgres@127.0.0.1:1/greenlight");
    assert!(err.contains("cannot be reached"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(15));
    let bad = PgTarget::parse("postgresql://postgres@127.0.0.1/db?sslmode=maybe").unwrap_err();
    assert!(matches!(bad, Error::StoreUrl { .. }), "{bad:?}");
}

#[test]
#[ignore = "needs PostgreSQL: run scripts/test"]
fn a_listener_is_notified_by_a_commit_of_another_connection_and_only_then() {
    // A database of its own: notifications are per database, and the other tests write to the
    // shared one meanwhile.
    let name = format!("listen_{}", std::process::id());
    let mut admin = postgres::Client::connect(&base(), postgres::NoTls).expect("connect");
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .expect("drop an old one");
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("create database");
    let url = format!("{}/{name}", base().rsplit_once('/').expect("db in URL").0);
    let mut store = Store::open(Path::new(&url)).expect("open");
    let target = PgTarget::parse(&url).expect("url");
    let listener = Listener::listen(&target, &[CHANGES_CHANNEL]).expect("listen");
    assert!(
        !listener.wait(Duration::from_millis(300)).expect("wait"),
        "nothing committed, nothing heard"
    );
    // A rolled-back write notifies nobody.
    let refused: Result<(), Error> = store.write(|_| Err(Error::NoStatePath));
    assert!(refused.is_err());
    assert!(!listener.wait(Duration::from_millis(300)).expect("wait"));
    let committed = Instant::now();
    store
        .write(|tx| tx.append_event(None, None, "note", &serde_json::json!({})))
        .expect("write");
    assert!(
        listener.wait(Duration::from_secs(5)).expect("wait"),
        "the commit is heard"
    );
    assert!(
        committed.elapsed() < Duration::from_secs(1),
        "{:?}",
        committed.elapsed()
    );
    drop((store, listener));
    // Connections are pooled; FORCE ends them so the database can go.
    admin
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .expect("drop database");
}
