//! The routes: JSON reads, the SSE streams, pause and resume, the login, the pages and assets,
//! and `/api/live` (summaries for the goals page whenever anything is committed).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::{Extension, Json};
use greenlight_run::goal_control::{self, Via};
use greenlight_store::{GoalId, GoalPage, Reads, SystemClock, WallClock};
use greenlight_stream::{Frame, StreamId};
use serde::Deserialize;

use crate::dashboard;
use crate::error::ApiError;
use crate::guard::{Access, COOKIE};
use crate::hub::Hub;
use crate::stream::{self, FromFront, PING_INTERVAL, RETRY_MS, sse_headers};
use crate::summary::{self, goal_snapshot, overview, run_summary};

/// What every handler shares.
#[derive(Clone)]
pub struct App {
    /// The live feed and the store.
    pub hub: Arc<Hub>,
    /// The token rules.
    pub access: Arc<Access>,
}

/// How long `/api/live` waits after a change before sending, so a burst is one update.
pub const LIVE_DEBOUNCE: Duration = Duration::from_millis(200);
/// The default and largest page of `/events`.
const PAGE: usize = 500;
const MAX_PAGE: usize = 5000;

fn parse_id(raw: &str, what: &str) -> Result<i64, ApiError> {
    match raw.parse::<StreamId>() {
        Ok(StreamId::Goal(id)) => Ok(id),
        _ => Err(ApiError::not_found(format!(
            "`{}` is not a {what} id (a positive number)",
            raw.escape_debug()
        ))),
    }
}

/// `?last_event_id=`.
#[derive(Debug, Deserialize)]
pub struct StreamQuery {
    last_event_id: Option<String>,
}

/// `?after=&limit=`.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    after: Option<u64>,
    limit: Option<usize>,
}

/// `?token=`.
#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    token: Option<String>,
}

/// A page of stored frames.
#[derive(Debug, serde::Serialize)]
struct EventsPage {
    stream: StreamId,
    head: u64,
    oldest: u64,
    frames: Vec<Frame>,
}

/// `?before=&limit=&archived=`: a page of the goal list.
#[derive(Debug, Default, Deserialize)]
pub struct GoalsQuery {
    before: Option<i64>,
    limit: Option<usize>,
    archived: Option<bool>,
}

impl GoalsQuery {
    fn page(&self) -> GoalPage {
        GoalPage {
            before: self.before.map(GoalId),
            limit: self
                .limit
                .unwrap_or(summary::GOAL_PAGE)
                .clamp(1, summary::MAX_GOAL_PAGE),
            archived: self.archived.unwrap_or(false),
            now: SystemClock.now_ms(),
        }
    }

    /// This page's own query, as much of it as was given (`before`, `limit`, `archived`).
    fn own_query(&self) -> String {
        let mut parts = Vec::new();
        if let Some(before) = self.before {
            parts.push(format!("before={before}"));
        }
        if let Some(limit) = self.limit {
            parts.push(format!("limit={limit}"));
        }
        if self.archived == Some(true) {
            parts.push("archived=true".to_owned());
        }
        parts.join("&")
    }

    /// The query of the page after this one, which ends at goal `next`.
    fn next_query(&self, next: i64) -> String {
        let page = self.page();
        let mut query = format!("before={next}&limit={}", page.limit);
        if page.archived {
            query.push_str("&archived=true");
        }
        query
    }
}

/// `GET /api/goals?before=ID&limit=N&archived=true`: a page of goals, newest first; a full
/// page carries `Link: </api/goals?before=…>; rel="next"`.
pub async fn goals(
    State(app): State<App>,
    Query(query): Query<GoalsQuery>,
) -> Result<Response, ApiError> {
    let page = query.page();
    let overview = app.hub.with_store(move |s| overview(s, &page)).await?;
    let mut response = Json(&overview.goals).into_response();
    if let Some(next) = overview.next {
        let link = format!("</api/goals?{}>; rel=\"next\"", query.next_query(next));
        if let Ok(value) = HeaderValue::from_str(&link) {
            response.headers_mut().insert(header::LINK, value);
        }
    }
    Ok(response)
}

/// `GET /api/goals/{id}`.
pub async fn goal(State(app): State<App>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "goal")?;
    let snapshot = app.hub.with_store(move |s| goal_snapshot(s, id)).await?;
    Ok(Json(snapshot).into_response())
}

/// `GET /api/runs`.
pub async fn runs(State(app): State<App>) -> Result<Response, ApiError> {
    let runs = app
        .hub
        .with_store(|s| Ok(s.runs(summary::RECENT_RUNS)?))
        .await?;
    Ok(Json(runs.into_iter().map(run_summary).collect::<Vec<_>>()).into_response())
}

/// `GET /api/runs/{id}`.
pub async fn run(State(app): State<App>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "run")?;
    let run = app.hub.with_store(move |s| summary::run(s, id)).await?;
    Ok(Json(run).into_response())
}

async fn events(app: App, stream: StreamId, query: EventsQuery) -> Result<Response, ApiError> {
    let after = query.after.unwrap_or(0);
    let limit = query.limit.unwrap_or(PAGE).clamp(1, MAX_PAGE);
    let page = app
        .hub
        .with_store(move |s| {
            if !summary::stream_exists(s, stream)? {
                return Err(ApiError::not_found(format!(
                    "no stream {stream} in this state file"
                )));
            }
            s.read(|snap| {
                let (oldest, head) = snap.frame_bounds(stream)?;
                let frames = snap.frames_after(stream, after, limit)?;
                Ok::<_, ApiError>(EventsPage {
                    stream,
                    head,
                    oldest,
                    frames,
                })
            })
        })
        .await?;
    Ok(Json(page).into_response())
}

/// `GET /api/goals/{id}/events?after=N&limit=M`.
pub async fn goal_events(
    State(app): State<App>,
    Path(raw): Path<String>,
    Query(query): Query<EventsQuery>,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "goal")?;
    events(app, StreamId::Goal(id), query).await
}

/// `GET /api/runs/{id}/events?after=N&limit=M`.
pub async fn run_events(
    State(app): State<App>,
    Path(raw): Path<String>,
    Query(query): Query<EventsQuery>,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "run")?;
    events(app, StreamId::Run(id), query).await
}

/// `GET /api/goals/{id}/stream`.
pub async fn goal_stream(
    State(app): State<App>,
    Path(raw): Path<String>,
    headers: HeaderMap,
    Query(query): Query<StreamQuery>,
    front: Option<Extension<FromFront>>,
) -> Result<Response, ApiError> {
    stream::from_front(front)?;
    let id = parse_id(&raw, "goal")?;
    let cursor = stream::cursor(&headers, query.last_event_id);
    Ok(stream::open(app.hub, StreamId::Goal(id), cursor).await)
}

/// `GET /api/runs/{id}/stream`.
pub async fn run_stream(
    State(app): State<App>,
    Path(raw): Path<String>,
    headers: HeaderMap,
    Query(query): Query<StreamQuery>,
    front: Option<Extension<FromFront>>,
) -> Result<Response, ApiError> {
    stream::from_front(front)?;
    let id = parse_id(&raw, "run")?;
    let cursor = stream::cursor(&headers, query.last_event_id);
    Ok(stream::open(app.hub, StreamId::Run(id), cursor).await)
}

/// A workflow run id in a path: `7` (the page's own spelling) or `wf-7` (its stream's).
fn workflow_id(raw: &str) -> Result<i64, ApiError> {
    match raw.parse::<StreamId>() {
        Ok(StreamId::Goal(id) | StreamId::Workflow(id)) => Ok(id),
        _ => Err(ApiError::not_found(format!(
            "`{}` is not a workflow run id (a positive number)",
            raw.escape_debug()
        ))),
    }
}

/// `GET /workflows`: the workflow runs, newest first.
pub async fn workflows_page(State(app): State<App>) -> Result<Response, ApiError> {
    let runs = app.hub.with_store(workflow_list).await?;
    Ok(Html(dashboard::workflows_page(&runs)).into_response())
}

/// `GET /api/workflows`: the workflow runs, newest first, as `greenlight workflow list --json`.
pub async fn workflows(State(app): State<App>) -> Result<Response, ApiError> {
    let runs = app.hub.with_store(workflow_list).await?;
    Ok(Json(runs).into_response())
}

fn workflow_list(
    s: &mut greenlight_store::Store,
) -> Result<Vec<greenlight_store::WorkflowRun>, ApiError> {
    greenlight_run::workflow_control::list(s, greenlight_run::workflow_control::LIST_DEFAULT)
        .map_err(|e| match e {
            greenlight_run::workflow_control::Error::Store(e) => ApiError::from(e),
            other => ApiError::internal(other.to_string()),
        })
}

/// `GET /workflows/{id}`: the plan as a graph, live.
pub async fn workflow_page(
    State(app): State<App>,
    Path(raw): Path<String>,
) -> Result<Response, ApiError> {
    let id = workflow_id(&raw)?;
    let snap = app
        .hub
        .with_store(move |s| crate::workflow::snapshot(s, id))
        .await?;
    Ok(Html(dashboard::workflow_page(&snap)).into_response())
}

/// `GET /api/workflows/{id}`: the run's header and its graph with each node's state.
pub async fn workflow(
    State(app): State<App>,
    Path(raw): Path<String>,
) -> Result<Response, ApiError> {
    let id = workflow_id(&raw)?;
    let snap = app
        .hub
        .with_store(move |s| crate::workflow::snapshot(s, id))
        .await?;
    Ok(Json(snap).into_response())
}

/// `GET /api/workflows/{id}/events?after=N&limit=M`.
pub async fn workflow_events(
    State(app): State<App>,
    Path(raw): Path<String>,
    Query(query): Query<EventsQuery>,
) -> Result<Response, ApiError> {
    let id = workflow_id(&raw)?;
    events(app, StreamId::Workflow(id), query).await
}

/// `GET /api/workflows/{id}/stream`.
pub async fn workflow_stream(
    State(app): State<App>,
    Path(raw): Path<String>,
    headers: HeaderMap,
    Query(query): Query<StreamQuery>,
    front: Option<Extension<FromFront>>,
) -> Result<Response, ApiError> {
    stream::from_front(front)?;
    let id = workflow_id(&raw)?;
    let cursor = stream::cursor(&headers, query.last_event_id);
    Ok(stream::open(app.hub, StreamId::Workflow(id), cursor).await)
}

/// `POST /api/goals/{id}/pause`: the goal pauses as `greenlight goal pause` pauses it; a loop
/// running it stops at its next step. A paused goal is answered as it is; a done or cleared one
/// is refused with 409.
pub async fn pause(State(app): State<App>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "goal")?;
    let snapshot = app
        .hub
        .with_store(move |s| {
            let steered = goal_control::pause(s, GoalId(id), Via::Dashboard)?;
            if let Some(refusal) = steered.outcome.refusal(steered.goal.id) {
                return Err(ApiError::conflict(refusal));
            }
            goal_snapshot(s, id)
        })
        .await?;
    Ok(Json(snapshot).into_response())
}

/// `POST /api/goals/{id}/resume`: marks a paused goal active (new turn budget, gate attempts
/// kept), as `greenlight goal resume` does before it runs the loop. The server runs no agent:
/// the answer is 202 and says to run `greenlight goal resume` where no runner is attached.
pub async fn resume(State(app): State<App>, Path(raw): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "goal")?;
    let snapshot = app
        .hub
        .with_store(move |s| {
            let steered = goal_control::resume(s, GoalId(id))?;
            if let Some(refusal) = steered.outcome.refusal(steered.goal.id) {
                return Err(ApiError::conflict(refusal));
            }
            goal_snapshot(s, id)
        })
        .await?;
    let worktree = snapshot.goal.worktree.clone();
    let body = serde_json::json!({
        "goal": snapshot.goal,
        "hint": format!("the goal is active; a runner continues it: run `greenlight goal resume` in {worktree} if none is running"),
    });
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// `GET /login?token=…`: sets the token cookie and goes to `/`.
pub async fn login(
    State(app): State<App>,
    Query(query): Query<LoginQuery>,
) -> Result<Response, ApiError> {
    let token = query.token.unwrap_or_default();
    if !app.access.token_matches(&token) {
        return Err(ApiError::unauthorized(
            "wrong or missing token: open /login?token=<the token in the server's --token-file>",
        ));
    }
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static("/"));
    headers.insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(|e| ApiError::bad_request(e.to_string()))?,
    );
    Ok(response)
}

/// `GET /?before=&limit=&archived=`.
pub async fn goals_page(
    State(app): State<App>,
    Query(query): Query<GoalsQuery>,
) -> Result<Response, ApiError> {
    let page = query.page();
    let overview = app.hub.with_store(move |s| overview(s, &page)).await?;
    let links = dashboard::GoalsPageLinks {
        query: query.own_query(),
        older: overview.next.map(|n| format!("/?{}", query.next_query(n))),
        archived: page.archived,
    };
    Ok(Html(dashboard::goals_page(&overview, &links)).into_response())
}

/// `GET /goals/{id}`.
pub async fn goal_page(
    State(app): State<App>,
    Path(raw): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "goal")?;
    let snapshot = app.hub.with_store(move |s| goal_snapshot(s, id)).await?;
    Ok(Html(dashboard::goal_page(&snapshot)).into_response())
}

/// `GET /runs/{id}`.
pub async fn run_page(
    State(app): State<App>,
    Path(raw): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw, "run")?;
    let run = app.hub.with_store(move |s| summary::run(s, id)).await?;
    Ok(Html(dashboard::run_page(&run)).into_response())
}

fn asset(content_type: &'static str, text: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        text,
    )
        .into_response()
}

/// `GET /assets/app.js`.
pub async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", dashboard::APP_JS)
}

/// `GET /assets/style.css`.
pub async fn style_css() -> Response {
    asset("text/css; charset=utf-8", dashboard::STYLE_CSS)
}

/// Where a live watcher is: the positions its last event was read at.
type Positions = (i64, i64);

async fn first_live_event(hub: &Arc<Hub>, page: GoalPage) -> Option<(Bytes, Positions)> {
    let overview = hub.with_store(move |s| overview(s, &page)).await.ok()?;
    let data = serde_json::to_string(&overview).ok()?;
    Some((
        Bytes::from(format!("event: goals\ndata: {data}\n\n")),
        (overview.event_seq, overview.frame_position),
    ))
}

/// `event: changes` with what changed after `at`; `None` when nothing the page shows did.
async fn changes_event(hub: &Arc<Hub>, at: &mut Positions) -> Option<Bytes> {
    let (seq, position) = *at;
    let changed = hub
        .with_store(move |s| summary::changes(s, seq, position))
        .await
        .ok()?;
    *at = (changed.event_seq, changed.frame_position);
    if changed.goals.is_empty() && changed.runs.is_empty() {
        return None;
    }
    let data = serde_json::to_string(&changed).ok()?;
    Some(Bytes::from(format!("event: changes\ndata: {data}\n\n")))
}

/// `GET /api/live?before=&limit=&archived=`: `event: goals` with a page of goals and the
/// recent runs on connect, then `event: changes` with only the goals and runs that changed,
/// after each commit (debounced).
pub async fn live(State(app): State<App>, Query(query): Query<GoalsQuery>) -> Response {
    let hub = app.hub;
    let mut changes = hub.changes();
    changes.mark_unchanged();
    let shutdown = hub.shutdown_signal();
    let page = query.page();
    let first = first_live_event(&hub, page).await;
    let at = first.as_ref().map(|(_, at)| *at);
    let first = first.map(|(bytes, _)| bytes);
    let mut ping =
        tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = (hub, changes, shutdown, ping, Some(first), at, page);
    let body = futures_util::stream::unfold(state, |mut st| async move {
        let (hub, changes, shutdown, ping, first, at, page) = &mut st;
        if let Some(first) = first.take() {
            let mut bytes = format!("retry: {RETRY_MS}\n\n").into_bytes();
            bytes.extend_from_slice(first.as_deref().unwrap_or(b": no summary yet\n\n"));
            return Some((Ok::<_, std::convert::Infallible>(Bytes::from(bytes)), st));
        }
        loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => return None,
                changed = changes.changed() => {
                    changed.ok()?;
                    tokio::time::sleep(LIVE_DEBOUNCE).await;
                    changes.mark_unchanged();
                    let sent = match at {
                        Some(at) => changes_event(hub, at).await,
                        // The first read failed: this watcher gets the whole page now.
                        None => first_live_event(hub, *page).await.map(|(bytes, read_at)| {
                            *at = Some(read_at);
                            bytes
                        }),
                    };
                    if let Some(bytes) = sent {
                        return Some((Ok(bytes), st));
                    }
                }
                _ = ping.tick() => return Some((Ok(Bytes::from_static(b": ping\n\n")), st)),
            }
        }
    });
    let mut response = Response::new(Body::from_stream(body));
    sse_headers(response.headers_mut());
    response
}
