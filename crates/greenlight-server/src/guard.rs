//! Who may ask: the `Host` header against DNS rebinding, the `Origin` header (same-origin only),
//! the token (bearer header or the login cookie), and the stricter rule for state-changing
//! requests (a cross-site form post must never pause a goal).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::Config;
use crate::error::ApiError;

/// The login cookie's name.
pub const COOKIE: &str = "greenlight_token";

/// What the guard checks requests against.
#[derive(Debug)]
pub struct Access {
    token: Option<String>,
    hosts: Vec<String>,
}

impl Access {
    /// The rules for `config`: loopback names, the listen address, the `--allow-host` names.
    pub fn new(config: &Config) -> Access {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let ip = config.listen.ip();
        if !ip.is_unspecified() {
            hosts.push(match ip {
                std::net::IpAddr::V4(v4) => v4.to_string(),
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            });
        }
        hosts.extend(config.allow_hosts.iter().map(|h| h.to_ascii_lowercase()));
        Access {
            token: config.token.clone(),
            hosts,
        }
    }

    /// Whether `token` is the configured one (compared in constant time).
    pub fn token_matches(&self, token: &str) -> bool {
        self.token
            .as_deref()
            .is_some_and(|want| constant_time_eq(want.as_bytes(), token.as_bytes()))
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = strip_port(host).to_ascii_lowercase();
        self.hosts.contains(&name)
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        if self.token.is_none() {
            return true;
        }
        let bearer = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.strip_prefix("Bearer "))
            .any(|t| self.token_matches(t.trim()));
        bearer || cookie(headers, COOKIE).is_some_and(|t| self.token_matches(&t))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `host:port` → `host`, `[v6]:port` → `[v6]`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

/// The value of cookie `name`, if sent.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether the request's `Origin` is the server itself (`http://` or, behind a TLS proxy,
/// `https://` + the `Host` it was sent to).
fn same_origin(origin: &str, host: &str) -> bool {
    ["http://", "https://"]
        .iter()
        .any(|scheme| origin.strip_prefix(scheme) == Some(host))
}

/// The middleware every route runs behind.
pub async fn guard(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    match check(&access, &request) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

fn check(access: &Access, request: &Request) -> Result<(), ApiError> {
    let headers = request.headers();
    let Some(host) = header_str(headers, header::HOST) else {
        return Err(ApiError::bad_request("a Host header is required"));
    };
    if !access.host_allowed(host) {
        return Err(ApiError::forbidden(format!(
            "host `{host}` is not one this server answers to (DNS rebinding protection); start it with `--allow-host {}` to allow it",
            strip_port(host)
        )));
    }
    let origin = header_str(headers, header::ORIGIN);
    if let Some(origin) = origin
        && !same_origin(origin, host)
    {
        return Err(ApiError::forbidden(format!(
            "cross-origin request from `{origin}` refused"
        )));
    }
    // The login page checks the token it is given itself.
    if request.uri().path() == "/login" {
        return Ok(());
    }
    if !access.authorized(headers) {
        return Err(ApiError::unauthorized(
            "this server needs its token: send `Authorization: Bearer <token>`, or open /login?token=<token> once in the browser",
        ));
    }
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    if changes && access.token.is_none() {
        // Without a token a state change must prove it comes from the dashboard's own page:
        // browsers send Origin (checked above) or Sec-Fetch-Site on their requests, and a
        // cross-site form carries a foreign one.
        let fetch_site = header_str(headers, header::HeaderName::from_static("sec-fetch-site"));
        // A JSON body cannot come from a cross-site form or a simple request: a browser would
        // have to ask first (a CORS preflight), and this server never allows one. That is how
        // MCP clients, which send no Origin, post to `/mcp`.
        let json_body = header_str(headers, header::CONTENT_TYPE).is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
        if origin.is_none() && fetch_site != Some("same-origin") && !json_body {
            return Err(ApiError::forbidden(
                "a state change needs a same-origin `Origin` header (or `Sec-Fetch-Site: same-origin`); from a script, send `Origin: http://<host:port>`",
            ));
        }
        if fetch_site.is_some_and(|s| s != "same-origin" && s != "none") {
            return Err(ApiError::forbidden("cross-site request refused"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_origins() {
        assert_eq!(strip_port("127.0.0.1:7357"), "127.0.0.1");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("localhost"), "localhost");
        assert!(same_origin("http://127.0.0.1:7357", "127.0.0.1:7357"));
        assert!(!same_origin("http://evil.example", "127.0.0.1:7357"));
        assert!(!same_origin("null", "127.0.0.1:7357"));
        assert!(constant_time_eq(b"abc", b"abc") && !constant_time_eq(b"abc", b"abd"));
    }
}
