//! What `greenlight serve` is told: where to listen, which state file, the token, the extra host
//! names it answers to; and the one rule checked before binding (no token, no public address).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::Error;

/// The address `greenlight serve` listens on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7357";

/// How a server is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address to bind (port 0 picks a free one).
    pub listen: SocketAddr,
    /// The state database it reads (and where pause/resume write).
    pub state: PathBuf,
    /// When set, every request must carry it (bearer header or the login cookie).
    pub token: Option<String>,
    /// Host names accepted in the `Host` header besides the loopback names and the listen address.
    pub allow_hosts: Vec<String>,
    /// More routes served behind the same Host, Origin and token checks (`greenlight serve`
    /// mounts the MCP endpoint `/mcp` here).
    pub extra_routes: Option<axum::Router>,
    /// What clients can make the server hold at once.
    pub limits: Limits,
}

/// Bounds on what clients can make the server hold: past one, a new stream is answered `503`.
/// Any web page can make a browser open streams (an `<img>` GET carries no Origin), so these
/// are what such a page can cost, whatever it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Streams watched at once, over every stream.
    pub watchers: usize,
    /// Distinct streams watched at once (each watcher that falls behind queues at most
    /// [`LIVE_CAPACITY`](crate::LIVE_CAPACITY) writes, shared with every other watcher of its
    /// stream, before it is ended).
    pub live_streams: usize,
    /// How long a stream's socket may take none of the bytes waiting for it before the stream
    /// is ended: a client that stopped reading (and never closes) gives its place back.
    pub stalled_write: std::time::Duration,
}

impl Default for Limits {
    /// A dashboard opens one stream per goal or run page shown, and a load test watches one goal
    /// with a thousand clients (`scripts/bench-stream.sh`): 4,096 watchers (a socket and a
    /// task each, a few KB) over 64 streams is far more than that, and still bounded. A minute
    /// with nothing taken is far longer than any live client's pause (a browser tab in the
    /// background still reads its sockets).
    fn default() -> Limits {
        Limits {
            watchers: 4096,
            live_streams: 64,
            stalled_write: std::time::Duration::from_secs(60),
        }
    }
}

impl Config {
    /// A loopback server on `listen` for `state`, without a token.
    pub fn new(listen: SocketAddr, state: PathBuf) -> Config {
        Config {
            listen,
            state,
            token: None,
            allow_hosts: Vec::new(),
            extra_routes: None,
            limits: Limits::default(),
        }
    }

    /// Refuses a non-loopback address without a token: the API pauses and resumes goals and
    /// shows agent output, which must not be open to the network.
    pub fn check(&self) -> Result<(), Error> {
        if !self.listen.ip().is_loopback() && self.token.is_none() {
            return Err(Error::PublicWithoutToken {
                listen: self.listen,
            });
        }
        Ok(())
    }
}

/// Reads the token from `path`: its first line, trimmed; an empty token is refused.
pub fn read_token_file(path: &Path) -> Result<String, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::TokenFile {
        path: path.to_path_buf(),
        detail: source.to_string(),
    })?;
    let token = text.lines().next().unwrap_or("").trim().to_owned();
    if token.is_empty() {
        return Err(Error::TokenFile {
            path: path.to_path_buf(),
            detail: "it is empty; put a long random string on its first line (e.g. `openssl rand -hex 32`)".into(),
        });
    }
    if token
        .bytes()
        .any(|b| !(0x21..=0x7e).contains(&b) || b == b';' || b == b',')
    {
        return Err(Error::TokenFile {
            path: path.to_path_buf(),
            detail: "the token may only hold printable ASCII without spaces, `;` or `,` (it travels in a header and a cookie)".into(),
        });
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_address_needs_a_token() {
        let mut config = Config::new("0.0.0.0:7357".parse().expect("addr"), "s.db".into());
        let err = config.check().expect_err("refused").to_string();
        assert!(
            err.contains("0.0.0.0:7357") && err.contains("--token-file"),
            "{err}"
        );
        config.token = Some("t".into());
        config.check().expect("allowed with a token");
        let local = Config::new("[::1]:0".parse().expect("addr"), "s.db".into());
        local.check().expect("loopback needs none");
    }

    #[test]
    fn token_files_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc123  \nignored\n").expect("write");
        assert_eq!(read_token_file(&path).expect("read"), "abc123");
        std::fs::write(&path, "\n").expect("write");
        assert!(
            read_token_file(&path)
                .expect_err("empty")
                .to_string()
                .contains("empty")
        );
        std::fs::write(&path, "a b").expect("write");
        assert!(read_token_file(&path).is_err());
        let missing = read_token_file(&dir.path().join("nope")).expect_err("missing");
        assert!(missing.to_string().contains("nope"), "{missing}");
    }
}
