//! Which backend the store's test suite runs on: a SQLite file in the test's temp dir, or, when
//! `GREENLIGHT_TEST_STORE` names a PostgreSQL server (`postgres://…/db`), a fresh schema of
//! its own there, so every test starts from an empty store as it does on SQLite and tests run
//! in parallel without seeing each other. `scripts/test` runs the suite both ways.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// The store location a test opens: `file` on SQLite; on PostgreSQL, an empty schema of its
/// own, the same one each time the test names the same file.
pub fn state_at(file: PathBuf) -> PathBuf {
    static SCHEMAS: std::sync::Mutex<Vec<(PathBuf, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let Some(base) = postgres_base() else {
        return file;
    };
    let mut known = SCHEMAS.lock().expect("schemas");
    if let Some((_, url)) = known.iter().find(|(f, _)| *f == file) {
        return url.clone();
    }
    let url = PathBuf::from(fresh_schema(&base));
    known.push((file, url.clone()));
    url
}

/// The PostgreSQL server the suite runs against, if it runs against one.
pub fn postgres_base() -> Option<String> {
    std::env::var("GREENLIGHT_TEST_STORE")
        .ok()
        .filter(|v| !v.is_empty())
}

fn fresh_schema(base: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let mut client = postgres::Client::connect(base, postgres::NoTls)
        .unwrap_or_else(|e| panic!("GREENLIGHT_TEST_STORE={base} cannot be reached: {e}"));
    client
        .batch_execute(&format!("CREATE SCHEMA {name}"))
        .expect("create the test's schema");
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-csearch_path%3D{name}")
}

/// A value a raw statement binds.
#[derive(Debug, Clone)]
pub enum Arg {
    Int(i64),
    Text(String),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Arg {
        Arg::Int(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Arg {
        Arg::Text(v.to_owned())
    }
}

/// A connection that goes around the store, for tests that tamper with rows (age a goal, kill
/// an owner, bypass a check) on either backend. Statements use `?N` as the store's do.
pub enum Raw {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

impl Raw {
    /// A raw connection to the store at `location` (a file, or a URL from [`state_at`]).
    pub fn open(location: &std::path::Path) -> Raw {
        let text = location.to_string_lossy();
        if text.starts_with("postgres") {
            let mut config: postgres::Config = text.parse().expect("the test's URL");
            config.application_name("greenlight-test-raw");
            Raw::Postgres(
                config
                    .connect(postgres::NoTls)
                    .expect("raw PostgreSQL connection"),
            )
        } else {
            Raw::Sqlite(rusqlite::Connection::open(location).expect("raw SQLite connection"))
        }
    }

    /// Runs a statement; the error is the database's message.
    pub fn execute(&mut self, sql: &str, args: &[Arg]) -> Result<u64, String> {
        match self {
            Raw::Sqlite(c) => {
                let values: Vec<rusqlite::types::Value> = args.iter().map(sqlite_value).collect();
                c.execute(sql, rusqlite::params_from_iter(values))
                    .map(|n| n as u64)
                    .map_err(|e| e.to_string())
            }
            Raw::Postgres(c) => {
                let boxed = pg_args(args);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|b| b.as_ref()).collect();
                c.execute(&dollars(sql), &refs).map_err(|e| {
                    e.as_db_error()
                        .map_or_else(|| e.to_string(), |d| d.message().to_owned())
                })
            }
        }
    }

    /// The first column of every row, as text (integers and booleans as their decimal digits).
    pub fn texts(&mut self, sql: &str, args: &[Arg]) -> Vec<String> {
        match self {
            Raw::Sqlite(c) => {
                let values: Vec<rusqlite::types::Value> = args.iter().map(sqlite_value).collect();
                let mut stmt = c.prepare(sql).expect("prepare");
                stmt.query_map(rusqlite::params_from_iter(values), |r| {
                    Ok(match r.get_ref(0)? {
                        rusqlite::types::ValueRef::Null => "NULL".to_owned(),
                        rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                        rusqlite::types::ValueRef::Real(x) => x.to_string(),
                        rusqlite::types::ValueRef::Text(t) => {
                            String::from_utf8_lossy(t).into_owned()
                        }
                        rusqlite::types::ValueRef::Blob(b) => {
                            String::from_utf8_lossy(b).into_owned()
                        }
                    })
                })
                .expect("query")
                .collect::<Result<_, _>>()
                .expect("rows")
            }
            Raw::Postgres(c) => {
                let boxed = pg_args(args);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|b| b.as_ref()).collect();
                let sql = format!("SELECT CAST(q.c AS TEXT) FROM ({}) AS q(c)", dollars(sql));
                c.query(&sql, &refs)
                    .expect("query")
                    .iter()
                    .map(|r| {
                        let v: Option<String> = r.get(0);
                        match v.as_deref() {
                            None => "NULL".to_owned(),
                            Some("true") => "1".to_owned(),
                            Some("false") => "0".to_owned(),
                            Some(t) => t.to_owned(),
                        }
                    })
                    .collect()
            }
        }
    }

    /// The first column of the first row as an integer.
    pub fn int(&mut self, sql: &str, args: &[Arg]) -> i64 {
        let texts = self.texts(sql, args);
        texts
            .first()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{sql} gave {texts:?}, not an integer"))
    }

    /// The schema version the store records (SQLite: `PRAGMA user_version`).
    pub fn schema_version(&mut self) -> i64 {
        match self {
            Raw::Sqlite(_) => self.int("PRAGMA user_version", &[]),
            Raw::Postgres(_) => self.int("SELECT MAX(version) FROM greenlight_schema", &[]),
        }
    }

    /// Records another schema version, as a newer greenlight would.
    pub fn set_schema_version(&mut self, version: i64) {
        match self {
            Raw::Sqlite(c) => c
                .pragma_update(None, "user_version", version)
                .expect("set user_version"),
            Raw::Postgres(_) => {
                self.execute(
                    "UPDATE greenlight_schema SET version = ?1",
                    &[Arg::Int(version)],
                )
                .expect("set the version");
            }
        }
    }
}

fn sqlite_value(a: &Arg) -> rusqlite::types::Value {
    match a {
        Arg::Int(n) => rusqlite::types::Value::Integer(*n),
        Arg::Text(t) => rusqlite::types::Value::Text(t.clone()),
    }
}

fn pg_args(args: &[Arg]) -> Vec<Box<dyn postgres::types::ToSql + Sync>> {
    args.iter()
        .map(|a| -> Box<dyn postgres::types::ToSql + Sync> {
            match a {
                Arg::Int(n) => Box::new(*n),
                Arg::Text(t) => Box::new(t.clone()),
            }
        })
        .collect()
}

/// `?N` → `$N` (the tests' statements quote no question marks).
fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}
