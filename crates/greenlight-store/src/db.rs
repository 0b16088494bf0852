//! The one seam between the store's SQL and the two databases it runs on: SQLite (embedded) and
//! PostgreSQL. The store writes each statement once, in the dialect both understand (numbered
//! `?N` parameters, `RETURNING`, `ON CONFLICT`, `COALESCE`, `IS NOT DISTINCT FROM`), binds
//! [`Value`]s and reads [`Row`]s of them; this module turns that into the calls of either
//! client. Where the two really differ (the clock, the schema's DDL) the caller asks
//! [`Conn::backend`].
//!
//! Values follow SQLite's storage classes (integer, real, text, blob, null); PostgreSQL columns
//! are declared with the matching types (`BIGINT`, `DOUBLE PRECISION`, `TEXT`, `BYTEA`), so one
//! row decodes the same from either.

use std::collections::HashMap;

/// Which database a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// One bound or read value, in SQLite's storage classes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    fn class(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Int(_) => "integer",
            Value::Real(_) => "real",
            Value::Text(_) => "text",
            Value::Blob(_) => "blob",
        }
    }
}

/// Why a statement failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// What SQLite said.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// What PostgreSQL (or the connection to it) said.
    #[error("{}", pg_message(.0))]
    Postgres(#[from] postgres::Error),
    /// The connection's thread is gone.
    #[error("the PostgreSQL connection is gone: {0}")]
    Gone(String),
    /// TLS could not be set up for the connection.
    #[error("TLS: {0}")]
    Tls(String),
    /// A query that must return a row returned none.
    #[error("the query returned no rows")]
    NoRows,
    /// A column held a value of another class than the code reads.
    #[error("column {index} holds {found}, not {wanted}")]
    Type {
        /// The column's index.
        index: usize,
        /// What was read.
        wanted: &'static str,
        /// What was there.
        found: &'static str,
    },
    /// A PostgreSQL column type the store never declares.
    #[error("column {index} has PostgreSQL type {ty}, which the store does not read")]
    UnknownType {
        /// The column's index.
        index: usize,
        /// The type's name.
        ty: String,
    },
}

/// PostgreSQL's message with its SQLSTATE and detail, which `postgres::Error`'s own display
/// leaves out ("db error").
fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                text.push_str(": ");
                text.push_str(detail);
            }
            text
        }
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    }
}

impl DbError {
    /// The SQLSTATE PostgreSQL gave, if it gave one.
    pub(crate) fn pg_code(&self) -> Option<&str> {
        match self {
            DbError::Postgres(e) => e.code().map(|c| c.code()),
            _ => None,
        }
    }

    /// The connection to PostgreSQL is gone or never came up (as opposed to a refused
    /// statement): the database is unreachable.
    pub(crate) fn pg_unreachable(&self) -> bool {
        match self {
            DbError::Postgres(e) => e.as_db_error().is_none() || e.is_closed(),
            _ => false,
        }
    }
}

/// Something a statement can bind.
pub(crate) trait Param {
    fn value(&self) -> Value;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl Param for $t {
            fn value(&self) -> Value {
                // Every integer the store keeps fits i64; a larger one saturates, never wraps.
                Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
int_param!(i64, i32, u32, u16, u8, u64, usize);

impl Param for bool {
    fn value(&self) -> Value {
        Value::Int(i64::from(*self))
    }
}
impl Param for f64 {
    fn value(&self) -> Value {
        Value::Real(*self)
    }
}
impl Param for str {
    fn value(&self) -> Value {
        Value::Text(self.to_owned())
    }
}
impl Param for String {
    fn value(&self) -> Value {
        Value::Text(self.clone())
    }
}
impl Param for [u8] {
    fn value(&self) -> Value {
        Value::Blob(self.to_vec())
    }
}
impl Param for Vec<u8> {
    fn value(&self) -> Value {
        Value::Blob(self.clone())
    }
}
impl Param for Value {
    fn value(&self) -> Value {
        self.clone()
    }
}
impl<T: Param + ?Sized> Param for &T {
    fn value(&self) -> Value {
        (**self).value()
    }
}
impl<T: Param> Param for Option<T> {
    fn value(&self) -> Value {
        self.as_ref().map_or(Value::Null, Param::value)
    }
}

/// A statement's parameters, `?1` first.
pub(crate) trait Params {
    fn values(&self) -> Vec<Value>;
}
impl Params for &[&dyn Param] {
    fn values(&self) -> Vec<Value> {
        self.iter().map(|p| p.value()).collect()
    }
}
impl<T: Param, const N: usize> Params for [T; N] {
    fn values(&self) -> Vec<Value> {
        self.iter().map(Param::value).collect()
    }
}
impl Params for Vec<Value> {
    fn values(&self) -> Vec<Value> {
        self.clone()
    }
}
impl Params for () {
    fn values(&self) -> Vec<Value> {
        Vec::new()
    }
}

/// `params![a, b]`: the parameters `?1`, `?2` of a statement, each borrowed.
macro_rules! params {
    () => { () };
    ($($p:expr),+ $(,)?) => {
        &[$(&$p as &dyn $crate::db::Param),+] as &[&dyn $crate::db::Param]
    };
}
pub(crate) use params;

/// One result row.
#[derive(Debug)]
pub(crate) struct Row(Vec<Value>);

// Rows cross from the connection's thread.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Row>();
};

impl Row {
    /// Column `index` decoded as `T`.
    pub(crate) fn get<T: FromValue>(&self, index: usize) -> Result<T, DbError> {
        let value = self.0.get(index).unwrap_or(&Value::Null);
        T::from_value(value).ok_or(DbError::Type {
            index,
            wanted: T::WANTED,
            found: value.class(),
        })
    }
}

/// A Rust type a column decodes into.
pub(crate) trait FromValue: Sized {
    const WANTED: &'static str;
    fn from_value(v: &Value) -> Option<Self>;
}

macro_rules! int_from {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            const WANTED: &'static str = "an integer in range";
            fn from_value(v: &Value) -> Option<Self> {
                match v {
                    Value::Int(n) => <$t>::try_from(*n).ok(),
                    _ => None,
                }
            }
        }
    )*};
}
int_from!(i64, i32, u32, u64, usize);

impl FromValue for bool {
    const WANTED: &'static str = "a boolean integer";
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Int(n) => Some(*n != 0),
            _ => None,
        }
    }
}
impl FromValue for f64 {
    const WANTED: &'static str = "a number";
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Real(x) => Some(*x),
            #[allow(clippy::cast_precision_loss)]
            Value::Int(n) => Some(*n as f64),
            _ => None,
        }
    }
}
impl FromValue for String {
    const WANTED: &'static str = "text";
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Text(s) => Some(s.clone()),
            _ => None,
        }
    }
}
impl FromValue for Vec<u8> {
    const WANTED: &'static str = "a blob";
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Blob(b) => Some(b.clone()),
            // SQLite hands back text stored in a blob column as text.
            Value::Text(s) => Some(s.as_bytes().to_vec()),
            _ => None,
        }
    }
}
impl FromValue for Value {
    const WANTED: &'static str = "any value";
    fn from_value(v: &Value) -> Option<Self> {
        Some(v.clone())
    }
}
impl<T: FromValue> FromValue for Option<T> {
    const WANTED: &'static str = T::WANTED;
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Null => Some(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// `query_row(…).optional()`: no row is `None`, not an error.
pub(crate) trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>, DbError>;
}
impl<T> OptionalExtension<T> for Result<T, DbError> {
    fn optional(self) -> Result<Option<T>, DbError> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(DbError::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A PostgreSQL connection, on a thread of its own with its prepared statements (keyed by
/// the store's SQL text). Why a thread: the `postgres` client blocks on a runtime of its own,
/// which may not run inside another runtime's thread, and the goal loop and the server call
/// the store from async code. Each call is a closure sent to that thread and waited for.
pub struct PgClient {
    jobs: std::sync::mpsc::Sender<Job>,
}

type Job = Box<dyn FnOnce(&mut PgSession) + Send>;

/// What the connection's thread owns.
pub(crate) struct PgSession {
    pub(crate) client: postgres::Client,
    statements: HashMap<String, postgres::Statement>,
}

impl PgSession {
    fn statement(&mut self, sql: &str) -> Result<postgres::Statement, DbError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(&pg_sql(sql))?;
        self.statements.insert(sql.to_owned(), s.clone());
        Ok(s)
    }
}

impl PgClient {
    /// Connects with `connect` on a new thread; that thread lives as long as the client.
    pub(crate) fn spawn(
        connect: impl FnOnce() -> Result<postgres::Client, DbError> + Send + 'static,
    ) -> Result<PgClient, DbError> {
        let (jobs, inbox) = std::sync::mpsc::channel::<Job>();
        let (ready, connected) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("greenlight-pg".into())
            .spawn(move || {
                let mut session = match connect() {
                    Ok(client) => {
                        let _ = ready.send(Ok(()));
                        PgSession {
                            client,
                            statements: HashMap::new(),
                        }
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = inbox.recv() {
                    job(&mut session);
                }
            })
            .map_err(|e| DbError::Gone(format!("cannot start its thread: {e}")))?;
        connected
            .recv()
            .map_err(|_| DbError::Gone("its thread ended while connecting".into()))??;
        Ok(PgClient { jobs })
    }

    /// Runs `f` on the connection's thread and waits for its answer.
    pub(crate) fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut PgSession) -> Result<T, DbError> + Send + 'static,
    ) -> Result<T, DbError> {
        let (answer, answered) = std::sync::mpsc::channel();
        self.jobs
            .send(Box::new(move |session| {
                let _ = answer.send(f(session));
            }))
            .map_err(|_| DbError::Gone("its thread has ended".into()))?;
        answered
            .recv()
            .map_err(|_| DbError::Gone("its thread ended during a statement".into()))?
    }

    fn execute(&self, sql: &str, values: Vec<Value>) -> Result<u64, DbError> {
        let sql = sql.to_owned();
        self.call(move |s| {
            let stmt = s.statement(&sql)?;
            Ok(s.client.execute(&stmt, &pg_params(&values))?)
        })
    }

    fn query(&self, sql: &str, values: Vec<Value>) -> Result<Vec<Row>, DbError> {
        let sql = sql.to_owned();
        self.call(move |s| {
            let stmt = s.statement(&sql)?;
            let rows = s.client.query(&stmt, &pg_params(&values))?;
            rows.iter().map(pg_row).collect()
        })
    }

    pub(crate) fn batch(&self, sql: &str) -> Result<(), DbError> {
        let sql = sql.to_owned();
        self.call(move |s| Ok(s.client.batch_execute(&sql)?))
    }

    /// Whether the connection is gone (the server closed it, or its thread ended).
    pub(crate) fn is_closed(&self) -> bool {
        self.call(|s| Ok(s.client.is_closed())).unwrap_or(true)
    }
}

/// The store's SQL in PostgreSQL's spelling: `?N` becomes `$N` outside quotes.
pub(crate) fn pg_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    for c in sql.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '?' => {
                out.push('$');
                continue;
            }
            None => {}
        }
        out.push(c);
    }
    out
}

/// A borrowed connection of either kind: what every query runs on.
#[derive(Clone, Copy)]
pub enum Conn<'a> {
    Sqlite(&'a rusqlite::Connection),
    Postgres(&'a PgClient),
}

impl Conn<'_> {
    pub(crate) fn backend(&self) -> Backend {
        match self {
            Conn::Sqlite(_) => Backend::Sqlite,
            Conn::Postgres(_) => Backend::Postgres,
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: impl Params) -> Result<usize, DbError> {
        let values = params.values();
        match self {
            Conn::Sqlite(c) => Ok(c
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(values.iter()))?),
            Conn::Postgres(c) => {
                let n = c.execute(sql, values)?;
                Ok(usize::try_from(n).unwrap_or(usize::MAX))
            }
        }
    }

    /// Every row of a query, each through `f`.
    pub(crate) fn query_map<T>(
        &self,
        sql: &str,
        params: impl Params,
        mut f: impl FnMut(&Row) -> Result<T, DbError>,
    ) -> Result<Vec<T>, DbError> {
        let values = params.values();
        match self {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let columns = stmt.column_count();
                let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    out.push(f(&sqlite_row(r, columns)?)?);
                }
                Ok(out)
            }
            Conn::Postgres(c) => c.query(sql, values)?.iter().map(f).collect(),
        }
    }

    /// The first row of a query through `f`; [`DbError::NoRows`] when there is none.
    pub(crate) fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let mut f = Some(f);
        let mut first = None;
        // Reads at most what the query returns; the store's single-row queries return one.
        let rows = self.query_map(sql, params, |r| {
            if let Some(f) = f.take() {
                first = Some(f(r)?);
            }
            Ok(())
        })?;
        drop(rows);
        first.ok_or(DbError::NoRows)
    }

    /// Runs several statements that take no parameters (DDL, transaction control).
    pub(crate) fn batch(&self, sql: &str) -> Result<(), DbError> {
        match self {
            Conn::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Conn::Postgres(c) => c.batch(sql),
        }
    }
}

fn sqlite_row(r: &rusqlite::Row<'_>, columns: usize) -> Result<Row, DbError> {
    use rusqlite::types::ValueRef;
    let mut values = Vec::with_capacity(columns);
    for i in 0..columns {
        values.push(match r.get_ref(i)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(n) => Value::Int(n),
            ValueRef::Real(x) => Value::Real(x),
            // Text that is not UTF-8 is decoded with replacement, never dropped.
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        });
    }
    Ok(Row(values))
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(n) => ValueRef::Integer(*n),
            Value::Real(x) => ValueRef::Real(*x),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

fn pg_params(values: &[Value]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    values
        .iter()
        .map(|v| v as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

fn pg_row(r: &postgres::Row) -> Result<Row, DbError> {
    use postgres::types::Type;
    let mut values = Vec::with_capacity(r.len());
    for (i, column) in r.columns().iter().enumerate() {
        let ty = column.type_();
        let value = if *ty == Type::INT8 {
            r.try_get::<_, Option<i64>>(i)?.map(Value::Int)
        } else if *ty == Type::INT4 {
            r.try_get::<_, Option<i32>>(i)?
                .map(|n| Value::Int(n.into()))
        } else if *ty == Type::INT2 {
            r.try_get::<_, Option<i16>>(i)?
                .map(|n| Value::Int(n.into()))
        } else if *ty == Type::BOOL {
            r.try_get::<_, Option<bool>>(i)?
                .map(|b| Value::Int(i64::from(b)))
        } else if *ty == Type::FLOAT8 {
            r.try_get::<_, Option<f64>>(i)?.map(Value::Real)
        } else if *ty == Type::FLOAT4 {
            r.try_get::<_, Option<f32>>(i)?
                .map(|x| Value::Real(x.into()))
        } else if *ty == Type::TEXT || *ty == Type::VARCHAR || *ty == Type::NAME {
            r.try_get::<_, Option<String>>(i)?.map(Value::Text)
        } else if *ty == Type::BYTEA {
            r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob)
        } else {
            return Err(DbError::UnknownType {
                index: i,
                ty: ty.name().to_owned(),
            });
        };
        values.push(value.unwrap_or(Value::Null));
    }
    Ok(Row(values))
}

impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::{IsNull, Type};
        // PostgreSQL decided each parameter's type from where it stands; the value is written
        // as that type, so `?1` may be compared with a BIGINT column or concatenated as text.
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(n) => {
                if *ty == Type::INT8 {
                    n.to_sql(ty, out)
                } else if *ty == Type::INT4 {
                    i32::try_from(*n)?.to_sql(ty, out)
                } else if *ty == Type::INT2 {
                    i16::try_from(*n)?.to_sql(ty, out)
                } else if *ty == Type::BOOL {
                    (*n != 0).to_sql(ty, out)
                } else if *ty == Type::FLOAT8 {
                    #[allow(clippy::cast_precision_loss)]
                    (*n as f64).to_sql(ty, out)
                } else {
                    n.to_string().to_sql(ty, out)
                }
            }
            Value::Real(x) => {
                if *ty == Type::FLOAT4 {
                    #[allow(clippy::cast_possible_truncation)]
                    (*x as f32).to_sql(ty, out)
                } else {
                    x.to_sql(&Type::FLOAT8, out)
                }
            }
            Value::Text(s) => {
                if *ty == Type::BYTEA {
                    s.as_bytes().to_sql(ty, out)
                } else {
                    s.as_str().to_sql(&Type::TEXT, out)
                }
            }
            Value::Blob(b) => b.as_slice().to_sql(&Type::BYTEA, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// What a row decoder returns.
pub(crate) type DbResult<T> = Result<T, DbError>;
