//! Streamable HTTP at `/mcp`: the same server as over stdio, as a router that `greenlight serve`
//! mounts behind its Host, Origin and token checks; and the bounds on its sessions.
//!
//! Each session holds a worker and its channels (about 55 KB) until it is closed, so what
//! clients can make the server hold is bounded twice: at most [`Limits::sessions`] are open
//! (a new one past that is a `503` that says why), and a session nobody uses for
//! [`Limits::idle`] is closed. "Uses" counts time a response of the session is still open (a
//! call running, a client listening for notifications), so a long verify is never cut as idle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use rmcp::transport::streamable_http_server::session::SessionId;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::McpServer;

/// The header naming a request's session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Bounds on the sessions of `/mcp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Sessions open at once.
    pub sessions: usize,
    /// How long a session with no open response may go without a request before it is closed.
    pub idle: Duration,
}

impl Default for Limits {
    /// 64 sessions (about 3.5 MB) is far more than the agents of one machine open; an idle
    /// session is closed after 2 minutes (the SDK's own default is 5), and a client whose
    /// session was closed starts a new one (the protocol's answer to an unknown session is 404).
    fn default() -> Limits {
        Limits {
            sessions: 64,
            idle: Duration::from_secs(120),
        }
    }
}

/// When a session was last used, and how many of its responses are open.
#[derive(Debug)]
struct Use {
    last: Instant,
    open: usize,
}

/// The sessions' bookkeeping, shared by every request and the reaper.
struct Sessions {
    manager: Arc<LocalSessionManager>,
    limits: Limits,
    uses: Mutex<HashMap<SessionId, Use>>,
    /// Sessions being created now (counted against the limit before they exist).
    creating: Mutex<usize>,
    reaper: std::sync::Once,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One open response of a session; dropping it (the body ended or the client left) marks the
/// session used now.
struct OpenResponse {
    sessions: Arc<Sessions>,
    id: SessionId,
}

impl Drop for OpenResponse {
    fn drop(&mut self) {
        if let Some(used) = lock(&self.sessions.uses).get_mut(&self.id) {
            used.open = used.open.saturating_sub(1);
            used.last = Instant::now();
        }
    }
}

/// A place reserved for a session being created; released when the request is done.
struct Creating<'a>(&'a Mutex<usize>);

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        let mut creating = lock(self.0);
        *creating = creating.saturating_sub(1);
    }
}

impl Sessions {
    fn opened(self: &Arc<Self>, id: SessionId) -> OpenResponse {
        let mut uses = lock(&self.uses);
        let used = uses.entry(id.clone()).or_insert(Use {
            last: Instant::now(),
            open: 0,
        });
        used.open += 1;
        used.last = Instant::now();
        OpenResponse {
            sessions: Arc::clone(self),
            id,
        }
    }

    /// Closes the sessions idle for longer than the limit, and forgets those already gone.
    async fn reap(&self) {
        let open: Vec<SessionId> = self.manager.sessions.read().await.keys().cloned().collect();
        let idle: Vec<SessionId> = {
            let mut uses = lock(&self.uses);
            uses.retain(|id, _| open.contains(id));
            for id in &open {
                // A session that never passed here (none should) is counted from now.
                uses.entry(id.clone()).or_insert(Use {
                    last: Instant::now(),
                    open: 0,
                });
            }
            uses.iter()
                .filter(|(_, used)| used.open == 0 && used.last.elapsed() > self.limits.idle)
                .map(|(id, _)| id.clone())
                .collect()
        };
        for id in idle {
            let _ = self.manager.close_session(&id).await;
            lock(&self.uses).remove(&id);
        }
    }

    /// Starts the reaper on the first request (the server's runtime exists by then).
    fn start_reaper(self: &Arc<Self>) {
        self.reaper.call_once(|| {
            let sessions = Arc::downgrade(self);
            let every =
                (self.limits.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(sessions) = sessions.upgrade() else {
                        return;
                    };
                    sessions.reap().await;
                }
            });
        });
    }

    /// How many sessions are open now.
    async fn count(&self) -> usize {
        self.manager.sessions.read().await.len()
    }
}

/// The `/mcp` router: one session per client, each talking to a clone of `server`, within
/// `limits`. Host and Origin are checked by the server it is mounted on, which knows the
/// addresses it allows.
pub fn router(server: McpServer, limits: Limits) -> Router {
    let mut manager = LocalSessionManager::default();
    // Idle sessions are closed by the reaper, which knows when a call is still running; the
    // SDK's own timer counts only messages and would cut a long quiet verify.
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::clone(&manager), config);
    let sessions = Arc::new(Sessions {
        manager,
        limits,
        uses: Mutex::new(HashMap::new()),
        creating: Mutex::new(0),
        reaper: std::sync::Once::new(),
    });
    Router::new()
        .fallback_service(service)
        .layer(middleware::from_fn_with_state(sessions, bound))
}

/// Refuses a new session past the limit, and keeps each session's use up to date.
async fn bound(State(sessions): State<Arc<Sessions>>, request: Request, next: Next) -> Response {
    sessions.start_reaper();
    let named = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|id| SessionId::from(id.to_owned()));
    // A POST without a session is an `initialize`, which opens one.
    let _creating = if named.is_none() && request.method() == Method::POST {
        let open = sessions.count().await;
        let mut creating = lock(&sessions.creating);
        if open + *creating >= sessions.limits.sessions {
            drop(creating);
            return full(sessions.limits.sessions);
        }
        *creating += 1;
        drop(creating);
        Some(Creating(&sessions.creating))
    } else {
        None
    };
    let response = next.run(request).await;
    let id = named.or_else(|| {
        response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|id| SessionId::from(id.to_owned()))
    });
    let Some(id) = id else {
        return response;
    };
    let open = sessions.opened(id);
    response.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _held = &open;
            chunk
        }))
    })
}

/// The `503` of a full server, as a JSON-RPC error an MCP client shows.
fn full(limit: usize) -> Response {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000,
        "message": format!("{limit} MCP sessions are open, the limit of this server; close one (an HTTP DELETE of /mcp with its Mcp-Session-Id), or retry once an idle one has been closed")}});
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
