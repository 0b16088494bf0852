//! Starting and stopping a server: bind (so a busy port or a refused address is reported before
//! anything runs), the poller (woken by committing writers), the routes behind the guard, the
//! connection loop (`TCP_NODELAY`, each connection to [`crate::front`]), and a clean stop that
//! ends every open stream.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use hyper_util::rt::TokioTimer;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::sync::oneshot;

use crate::api::{self, App};
use crate::guard::{self, Access};
use crate::hub::Hub;
use crate::{Config, Error};

/// How long a stop waits for connections to finish after every stream was told to end.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long a client gets to send a request's head (request line and headers), counted from
/// when the server starts waiting for it, on a new connection or between two requests on a
/// kept-alive one. A connection that stalls is dropped rather than held: without this bound
/// 150 half-open connections were all still held after 35 s.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the loop waits after `accept` failed (out of file descriptors, say) before trying
/// again, so a full table is not spun on.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Every route, `extra` included, behind the guard.
pub fn router(app: App, extra: Option<Router>) -> Router {
    let access = Arc::clone(&app.access);
    let routes = Router::new()
        .route("/", get(api::goals_page))
        .route("/goals/{id}", get(api::goal_page))
        .route("/runs/{id}", get(api::run_page))
        .route("/workflows", get(api::workflows_page))
        .route("/workflows/{id}", get(api::workflow_page))
        .route("/assets/app.js", get(api::app_js))
        .route("/assets/style.css", get(api::style_css))
        .route("/login", get(api::login))
        .route("/api/live", get(api::live))
        .route("/api/goals", get(api::goals))
        .route("/api/goals/{id}", get(api::goal))
        .route("/api/goals/{id}/events", get(api::goal_events))
        .route("/api/goals/{id}/stream", get(api::goal_stream))
        .route("/api/goals/{id}/pause", post(api::pause))
        .route("/api/goals/{id}/resume", post(api::resume))
        .route("/api/runs", get(api::runs))
        .route("/api/runs/{id}", get(api::run))
        .route("/api/runs/{id}/events", get(api::run_events))
        .route("/api/runs/{id}/stream", get(api::run_stream))
        .route("/api/workflows", get(api::workflows))
        .route("/api/workflows/{id}", get(api::workflow))
        .route("/api/workflows/{id}/events", get(api::workflow_events))
        .route("/api/workflows/{id}/stream", get(api::workflow_stream))
        .with_state(app);
    let routes = match extra {
        Some(extra) => routes.merge(extra),
        None => routes,
    };
    routes
        .fallback(|| async { crate::error::ApiError::not_found("no such page or endpoint") })
        .layer(axum::middleware::from_fn_with_state(access, guard::guard))
}

/// A running server, on its own thread and runtime.
pub struct Server {
    addr: SocketAddr,
    hub: Arc<Hub>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), Error>>>,
    wake_unavailable: Option<std::io::Error>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// The address it listens on (the real port when port 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What its live feed holds right now (watchers and their streams).
    pub fn held(&self) -> crate::Held {
        self.hub.held()
    }

    /// Why committing writers cannot wake this server (its socket could not be bound beside
    /// the state file), when they cannot: it then looks every [`crate::POLL_INTERVAL`].
    pub fn wake_unavailable(&self) -> Option<&std::io::Error> {
        self.wake_unavailable.as_ref()
    }

    /// `http://<addr>/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Ends every stream, stops accepting, waits for the thread.
    pub fn stop(mut self) -> Result<(), Error> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), Error> {
        self.hub.stop();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Error::Runtime(std::io::Error::other(
                "the server thread panicked",
            ))),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Checks `config`, binds, and serves on a thread of its own until [`Server::stop`].
pub fn start(config: Config) -> Result<Server, Error> {
    config.check()?;
    let listener = std::net::TcpListener::bind(config.listen).map_err(|source| Error::Bind {
        listen: config.listen,
        source,
    })?;
    let addr = listener.local_addr().map_err(Error::Runtime)?;
    listener.set_nonblocking(true).map_err(Error::Runtime)?;
    let hub = Hub::new(config.state.clone(), config.limits)?;
    let crate::hub::Poller {
        thread: poller,
        wake_unavailable,
    } = hub.spawn_poller()?;
    let extra = config.extra_routes.clone();
    let app = App {
        hub: Arc::clone(&hub),
        access: Arc::new(Access::new(&Config {
            listen: addr,
            ..config
        })),
    };
    // The CPUs this process may run on (its affinity mask, so `taskset -c 0` gives 1). On one
    // CPU the current-thread scheduler does the same work without the work-stealing machinery:
    // measured with `scripts/bench-stream.sh` pinned to one core, it is the cheaper fan-out.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let mut builder = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut multi = tokio::runtime::Builder::new_multi_thread();
        multi.worker_threads(workers);
        multi
    };
    let runtime = builder
        .max_blocking_threads(8)
        .thread_name("greenlight-serve")
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let stalled_write = hub.limits().stalled_write;
    let thread_hub = Arc::clone(&hub);
    let sweep_hub = Arc::clone(&hub);
    let thread = std::thread::Builder::new()
        .name("greenlight-serve".into())
        .spawn(move || {
            let served = runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).map_err(Error::Runtime)?;
                tokio::spawn(crate::sweep::close_abandoned_runs(sweep_hub));
                serve_connections(listener, router(app, extra), stalled_write, stop_rx).await;
                Ok(())
            });
            thread_hub.stop();
            let _ = poller.join();
            runtime.shutdown_timeout(Duration::from_millis(100));
            served
        })
        .map_err(Error::Runtime)?;
    Ok(Server {
        addr,
        hub,
        stop: Some(stop_tx),
        thread: Some(thread),
        wake_unavailable,
    })
}

/// Sets up an accepted connection's socket. Small frames must not wait behind Nagle's algorithm
/// and the peer's delayed ACK. And a peer that vanished without closing (a laptop asleep, a
/// dropped network) must give its watcher place back: once bytes sent to it (a frame, the
/// heartbeat) go unacknowledged for `stalled_write`, the kernel drops the connection, where by
/// default it would retransmit for about fifteen minutes.
fn tune(tcp: &tokio::net::TcpStream, stalled_write: Duration) {
    let _ = tcp.set_nodelay(true);
    let _ = socket2::SockRef::from(tcp).set_tcp_user_timeout(Some(stalled_write));
}

/// Accepts and serves connections until `stop`, then lets them finish (every stream was told to
/// end) and cuts what still hangs after [`STOP_GRACE`].
async fn serve_connections(
    listener: tokio::net::TcpListener,
    routes: Router,
    stalled_write: Duration,
    stop: oneshot::Receiver<()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    // One request per connection: every request's head passes the front first, so a stream
    // request never comes on a connection hyper holds (a browser reuses idle ones).
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(crate::front::MAX_HEAD)
        .max_headers(crate::front::MAX_HEADERS)
        .keep_alive(false);
    let connections = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let tcp = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(_) => {
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        tune(&tcp, stalled_write);
        tokio::spawn(crate::front::serve(
            tcp,
            routes.clone(),
            http.clone(),
            connections.watcher(),
        ));
    }
    drop(listener);
    let _ = tokio::time::timeout(STOP_GRACE, connections.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An accepted socket sends small frames at once and gives up on a peer that acknowledges
    /// nothing for the stall limit (the kernel's default would be about fifteen minutes).
    #[tokio::test]
    async fn an_accepted_socket_is_tuned_for_frames_and_a_vanished_peer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let socket = socket2::SockRef::from(&tcp);
        assert_eq!(
            socket.tcp_user_timeout().unwrap(),
            None,
            "the kernel's default"
        );
        tune(&tcp, Duration::from_secs(7));
        assert!(tcp.nodelay().unwrap());
        assert_eq!(
            socket.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(7))
        );
    }
}
