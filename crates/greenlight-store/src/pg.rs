//! PostgreSQL connections: reading a store URL (with its password file and TLS settings),
//! connecting, and a small pool per URL so a process that opens the store often (a server, a
//! worker) reuses its connections instead of paying a handshake each time.
//!
//! A URL is libpq's (`postgres://user[:password]@host[:port]/db?…`) plus what libpq keeps in
//! other places: `password_file=PATH` (a file holding the password alone, so it stays out of
//! process listings and shell history) and `sslrootcert=PATH` with `sslmode=verify-full` or
//! `verify-ca`. `sslmode=require` encrypts without checking the certificate unless a root
//! certificate is given, as libpq does.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Error;
use crate::db::{DbError, PgClient};

/// How long connecting may take before the store says the database is unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Idle connections kept per URL, and in all.
const POOL_IDLE: usize = 8;
const POOL_IDLE_TOTAL: usize = 16;

/// Whether a text names a PostgreSQL store rather than a file.
pub fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// How the connection is encrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tls {
    /// `sslmode=disable`, or `prefer`/unset: plain TCP (a loopback or unix-socket server).
    Off,
    /// `sslmode=require`: encrypted; the certificate is checked only against `root` if given.
    Require { root: Option<PathBuf> },
    /// `sslmode=verify-ca` / `verify-full`: encrypted and checked against `root`; `full` also
    /// checks the host name.
    Verify { root: PathBuf, full: bool },
}

/// A parsed PostgreSQL store URL.
#[derive(Clone)]
pub struct PgTarget {
    config: postgres::Config,
    tls: Tls,
    /// The URL as messages show it: no password.
    shown: String,
    /// What the pool keys connections by.
    key: String,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl PgTarget {
    /// Reads `url`; the error names the part at fault.
    pub fn parse(url: &str) -> Result<PgTarget, Error> {
        let bad = |why: String| Error::StoreUrl {
            shown: redact(url),
            why,
        };
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let mut password_file = None;
        let mut root = None;
        let mut mode = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "password_file" => password_file = Some(PathBuf::from(value)),
                "sslrootcert" => root = Some(PathBuf::from(value)),
                "sslmode" => mode = Some(value.to_owned()),
                _ => kept.push(pair),
            }
        }
        let mut rebuilt = base.to_owned();
        if !kept.is_empty() {
            rebuilt.push('?');
            rebuilt.push_str(&kept.join("&"));
        }
        let mut config: postgres::Config = rebuilt
            .parse()
            .map_err(|e: postgres::Error| bad(format!("{e}")))?;
        let tls = match (mode.as_deref(), root) {
            (None | Some("disable" | "prefer" | "allow"), _) => Tls::Off,
            (Some("require"), root) => Tls::Require { root },
            (Some(m @ ("verify-ca" | "verify-full")), Some(root)) => Tls::Verify {
                root,
                full: m == "verify-full",
            },
            (Some(m @ ("verify-ca" | "verify-full")), None) => {
                return Err(bad(format!(
                    "sslmode={m} checks the server's certificate, so it needs \
                     sslrootcert=PATH naming the CA certificate to check it against"
                )));
            }
            (Some(other), _) => {
                return Err(bad(format!(
                    "sslmode={other} is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                )));
            }
        };
        if let Some(file) = password_file {
            let text = std::fs::read_to_string(&file).map_err(|e| {
                bad(format!(
                    "cannot read the password file {}: {e}; name a readable file holding \
                     the password alone",
                    file.display()
                ))
            })?;
            config.password(text.trim_end_matches(['\n', '\r']));
        }
        if config.get_dbname().is_none() {
            return Err(bad(
                "it names no database; add one: postgres://user@host:port/DATABASE".into(),
            ));
        }
        config.ssl_mode(if tls == Tls::Off {
            postgres::config::SslMode::Disable
        } else {
            postgres::config::SslMode::Require
        });
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("greenlight");
        Ok(PgTarget {
            config,
            tls,
            shown: redact(url),
            key: url.to_owned(),
        })
    }

    /// The URL without its password, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A new connection (on its own thread: see [`PgClient`]).
    pub(crate) fn connect(&self) -> Result<PgClient, DbError> {
        let config = self.config.clone();
        let tls = self.tls.clone();
        PgClient::spawn(move || match &tls {
            Tls::Off => Ok(config.connect(postgres::NoTls)?),
            tls => {
                let connector = tokio_postgres_rustls::MakeRustlsConnect::new(
                    client_config(tls).map_err(DbError::Tls)?,
                );
                Ok(config.connect(connector)?)
            }
        })
    }

    /// A connection from the pool, or a new one.
    pub(crate) fn take(&self) -> Result<Pooled, DbError> {
        let idle = pool()
            .lock()
            .ok()
            .and_then(|mut p| p.get_mut(&self.key).and_then(Vec::pop));
        let client = match idle {
            Some(c) if !c.is_closed() => c,
            _ => {
                let client = self.connect()?;
                // A writer waits this long for the store's write lock, as SQLite's busy
                // timeout does, then fails visibly instead of hanging.
                client.batch(&format!(
                    "SET lock_timeout = '{}ms'",
                    crate::BUSY_TIMEOUT.as_millis()
                ))?;
                client
            }
        };
        Ok(Pooled {
            client: Some(client),
            key: self.key.clone(),
        })
    }
}

/// A connection that only listens: it waits for PostgreSQL's notifications on some channels
/// (what a server following the store, or an idle worker, waits on instead of polling).
pub struct Listener {
    client: PgClient,
}

impl Listener {
    /// Listens on `channels` of the store `target` names.
    pub fn listen(target: &PgTarget, channels: &[&str]) -> Result<Listener, Error> {
        let shown = || PathBuf::from(target.shown());
        let client = target.connect().map_err(|e| Error::Open {
            path: shown(),
            source: e,
        })?;
        let sql: String = channels.iter().map(|c| format!("LISTEN {c}; ")).collect();
        client.batch(&sql).map_err(|e| Error::sql(&shown(), e))?;
        Ok(Listener { client })
    }

    /// Waits until a notification comes or `timeout` passed; every notification already
    /// queued is taken with the first. `Err` when the connection is gone.
    pub fn wait(&self, timeout: Duration) -> Result<bool, DbError> {
        use postgres::fallible_iterator::FallibleIterator as _;
        self.client.call(move |s| {
            let mut notifications = s.client.notifications();
            let came = notifications.timeout_iter(timeout).next()?.is_some();
            if came {
                let mut pending = notifications.iter();
                while pending.next()?.is_some() {}
            }
            Ok(came)
        })
    }
}

/// The URL with any password replaced by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let query: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("password="))
        .collect();
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.join("&"))
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_owned(),
    };
    format!("{scheme}://{authority}/{path}{query}")
}

type Pool = Mutex<HashMap<String, Vec<PgClient>>>;

fn pool() -> &'static Pool {
    static POOL: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A connection taken from the pool; given back when dropped, unless it broke or was left
/// inside a transaction.
pub(crate) struct Pooled {
    client: Option<PgClient>,
    key: String,
}

impl Pooled {
    pub(crate) fn client(&self) -> &PgClient {
        self.client
            .as_ref()
            .expect("a pooled connection is present until dropped")
    }

    /// Drops the connection instead of giving it back (after an error that may have left it
    /// in an unknown state).
    pub(crate) fn discard(&mut self) {
        self.client = None;
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        if client.is_closed() {
            return;
        }
        if let Ok(mut p) = pool().lock() {
            let total: usize = p.values().map(Vec::len).sum();
            let idle = p.entry(std::mem::take(&mut self.key)).or_default();
            if idle.len() < POOL_IDLE && total < POOL_IDLE_TOTAL {
                idle.push(client);
            }
        }
    }
}

fn client_config(tls: &Tls) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let roots = |path: &PathBuf| -> Result<rustls::RootCertStore, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut store = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read sslrootcert {}: {e}", path.display()))?
        {
            let cert =
                cert.map_err(|e| format!("sslrootcert {} is not PEM: {e}", path.display()))?;
            store
                .add(cert)
                .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
        }
        Ok(store)
    };
    let config = match tls {
        Tls::Off => unreachable!("a plain connection has no TLS settings"),
        Tls::Verify { root, full: true } | Tls::Require { root: Some(root) } => builder
            .with_root_certificates(roots(root)?)
            .with_no_client_auth(),
        Tls::Verify { root, full: false } => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verify::CaOnly::new(
                roots(root)?,
                provider,
            )?))
            .with_no_client_auth(),
        Tls::Require { root: None } => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verify::AnyCertificate(provider)))
            .with_no_client_auth(),
    };
    Ok(config)
}

mod verify {
    //! The two relaxed checks libpq offers: `require` without a root (encrypt, trust any
    //! certificate) and `verify-ca` (the chain, not the host name).
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::CryptoProvider;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, SignatureScheme};

    #[derive(Debug)]
    pub(super) struct AnyCertificate(pub(super) Arc<CryptoProvider>);

    impl ServerCertVerifier for AnyCertificate {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }

    /// Checks the chain against the roots and ignores the name, as `verify-ca` does.
    #[derive(Debug)]
    pub(super) struct CaOnly {
        inner: Arc<rustls::client::WebPkiServerVerifier>,
    }

    impl CaOnly {
        pub(super) fn new(
            roots: rustls::RootCertStore,
            provider: Arc<CryptoProvider>,
        ) -> Result<CaOnly, String> {
            let inner =
                rustls::client::WebPkiServerVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| e.to_string())?;
            Ok(CaOnly { inner })
        }
    }

    impl ServerCertVerifier for CaOnly {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            match self
                .inner
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            {
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.inner.verify_tls12_signature(message, cert, dss)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.inner.verify_tls13_signature(message, cert, dss)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.inner.supported_verify_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(
            redact("postgres://me:s3cret@db.example:5432/gl?password=s3cret&sslmode=require"),
            "postgres://me:***@db.example:5432/gl?sslmode=require"
        );
        assert_eq!(
            redact("postgresql://me@127.0.0.1/gl"),
            "postgresql://me@127.0.0.1/gl"
        );
        let err = PgTarget::parse("postgres://me:s3cret@h/gl?sslmode=sometimes").unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("sslmode=sometimes"), "{text}");
    }

    #[test]
    fn verify_modes_need_a_root_and_a_url_needs_a_database() {
        let err = PgTarget::parse("postgres://me@h/gl?sslmode=verify-full").unwrap_err();
        assert!(err.to_string().contains("sslrootcert"), "{err}");
        let err = PgTarget::parse("postgres://me@h").unwrap_err();
        assert!(err.to_string().contains("names no database"), "{err}");
    }

    #[test]
    fn the_password_file_is_read_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("pw");
        std::fs::write(&file, "from-file\n").expect("write");
        let url = format!("postgres://me@h/gl?password_file={}", file.display());
        let target = PgTarget::parse(&url).expect("parse");
        assert_eq!(target.config.get_password(), Some(&b"from-file"[..]));
        let missing = format!(
            "postgres://me@h/gl?password_file={}/nope",
            dir.path().display()
        );
        let err = PgTarget::parse(&missing).unwrap_err();
        assert!(
            err.to_string().contains("cannot read the password file"),
            "{err}"
        );
    }
}
