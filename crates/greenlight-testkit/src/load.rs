//! The SSE load harness: a writer that appends activity frames to one goal through the store at
//! a fixed rate (each carrying its microsecond timestamp), and N subscribers that follow the
//! goal's stream, some dropping once and resuming by cursor, checking every frame arrives once
//! and in order and recording how late it arrived. The same subscribers follow an nchan
//! channel (nginx's pub/sub module) fed by HTTP POST at the same rate, for a side-by-side
//! figure: [`Source::Nchan`].

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use greenlight_store::greenlight_stream::{ActivityKind, FrameBody, StreamId};
use greenlight_store::{AgentSpec, Family, GoalId, NewGoal, Store};

use crate::sse;

/// Microseconds since the epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A goal in `worktree` whose agent is the command `true` and whose one gate is `true`: one
/// turn, one retry, a 60 s gate limit.
pub fn command_goal(worktree: std::path::PathBuf, text: &str) -> NewGoal {
    NewGoal {
        worktree,
        text: text.into(),
        agent: AgentSpec {
            family: Family::Command,
            model: None,
            argv_template: Some(vec!["true".into()]),
            endpoint: None,
        },
        judge: None,
        max_turns: 1,
        retries: 1,
        gate_timeout_sec: 60,
        gates: vec!["true".into()],
    }
}

/// Creates the goal the writer writes to (worktree `dir`, which must exist).
pub fn create_goal(state: &Path, dir: &Path) -> GoalId {
    let mut store = Store::open(state).expect("open the state file");
    store
        .write(|tx| tx.create_goal(&command_goal(dir.to_path_buf(), "stream load")))
        .expect("create the goal")
}

/// The `i`-th frame a writer appends: activity whose text is `t=<µs> n=<i>`, the time taken now,
/// just before its commit (what the subscribers measure latency from).
pub fn stamped_frame(i: u64) -> FrameBody {
    FrameBody::Activity {
        turn: 1,
        kind: ActivityKind::Output,
        text: format!("t={} n={i}", now_us()),
    }
}

/// Appends `frames` activity frames to `goal` at `rate` per second, one transaction each; the
/// text is `t=<µs> n=<i>`, the time taken just before the commit.
pub fn write_frames(state: &Path, goal: GoalId, frames: u64, rate: u64) {
    let mut store = Store::open(state).expect("open the state file");
    let start = Instant::now();
    let every = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    for i in 0..frames {
        let due = start + every.mul_f64(i as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        store
            .write(|tx| tx.append_frame(StreamId::Goal(goal.0), &stamped_frame(i)))
            .expect("append a frame");
    }
}

/// Frames a goal's stream holds before the writer's: the `goal-state active` frame the store
/// writes when the goal is created (on nchan, the message the load client publishes before
/// the subscribers come, `s=1`).
pub const GOAL_FRAMES_BEFORE_WRITER: u64 = 1;

/// The body of the nchan message with seq `seq`: `t=<µs> s=<seq>`, the time taken just before
/// it is sent.
pub fn nchan_message(seq: u64) -> String {
    format!("t={} s={seq}", now_us())
}

/// POSTs `body` to nchan's publisher location for channel `channel` on `addr`.
pub async fn nchan_publish(addr: SocketAddr, channel: i64, body: &str) -> std::io::Result<()> {
    let path = format!("/pub/{channel}");
    let headers = [("Content-Type", "text/plain")];
    let mut response =
        sse::request_with_body(addr, "POST", &path, &headers, body.as_bytes()).await?;
    let _ = response.body().await?;
    if (200..300).contains(&response.status) {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "POST {path}: status {}",
            response.status
        )))
    }
}

/// Publishes `frames` messages to nchan channel `channel` at `rate` per second, one POST each
/// (seqs 2, 3, …: seq 1 was published before the subscribers came), as [`write_frames`]
/// commits frames.
pub async fn publish_frames(addr: SocketAddr, channel: i64, frames: u64, rate: u64) {
    let start = tokio::time::Instant::now();
    let every = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    for i in 0..frames {
        tokio::time::sleep_until(start + every.mul_f64(i as f64)).await;
        nchan_publish(
            addr,
            channel,
            &nchan_message(i + 1 + GOAL_FRAMES_BEFORE_WRITER),
        )
        .await
        .expect("publish a message");
    }
}

/// The seq of the writer's last frame: where every subscriber must get to.
fn last_seq(plan: &Plan) -> u64 {
    plan.frames + GOAL_FRAMES_BEFORE_WRITER
}

/// Whose stream the subscribers follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `greenlight serve`: `/api/goals/<goal>/stream`; the seq is the id's (`<goal>:<seq>`).
    Greenlight,
    /// nchan: `/sub/<goal>`, published by [`publish_frames`]; its ids are its own
    /// (`<time>:<tag>`), so the seq is the data's `s=<seq>` and a resume sends the last id.
    Nchan,
}

/// What the subscribers do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The server.
    pub addr: SocketAddr,
    /// Which kind of server it is.
    pub source: Source,
    /// The goal streamed.
    pub goal: i64,
    /// How many subscribers.
    pub subscribers: usize,
    /// How many frames the writer appends; each subscriber must receive them all (after the
    /// goal's own first frame).
    pub frames: u64,
    /// Every `drop_every`-th subscriber drops its connection once, after frame `frames / 2`,
    /// and resumes with `Last-Event-ID` (0: none do).
    pub drop_every: usize,
    /// How long to wait for the last frame after the writer started.
    pub deadline: Duration,
}

/// What they saw.
#[derive(Debug, Default)]
pub struct Report {
    /// Frames received in order.
    pub delivered: u64,
    /// Frames that skipped ahead of the next expected seq (or a gap frame).
    pub gaps: u64,
    /// Frames received twice (seq ≤ the last one).
    pub duplicates: u64,
    /// Subscribers that did not reach the last frame.
    pub incomplete: usize,
    /// Resumes made.
    pub reconnects: u64,
    /// Delivery latencies, microseconds, sorted.
    pub latencies_us: Vec<u64>,
    /// Per frame, the latency of the first watcher to get it, microseconds, sorted: what a
    /// frame costs before the fan-out (the rest of `latencies_us` is the fan-out's spread).
    pub first_us: Vec<u64>,
    /// The first problems seen, for the failure message.
    pub problems: Vec<String>,
}

impl Report {
    /// The `q` quantile of the latencies, in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        quantile_ms(&self.latencies_us, q)
    }

    /// The `q` quantile of the first watchers' latencies, in milliseconds.
    pub fn first_quantile_ms(&self, q: f64) -> f64 {
        quantile_ms(&self.first_us, q)
    }
}

fn quantile_ms(sorted_us: &[u64], q: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let i = ((sorted_us.len() - 1) as f64 * q).round() as usize;
    sorted_us[i] as f64 / 1000.0
}

/// The number after `key` in `data` (`t=` the stamp, `s=` an nchan message's seq).
fn number_after(data: &str, key: &str) -> Option<u64> {
    let rest = &data[data.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn stamp(data: &str) -> Option<u64> {
    number_after(data, "t=")
}

#[derive(Default)]
struct One {
    last: u64,
    delivered: u64,
    gaps: u64,
    duplicates: u64,
    reconnects: u64,
    /// (seq, latency in microseconds).
    latencies: Vec<(u64, u64)>,
    problems: Vec<String>,
}

async fn subscriber(
    plan: &Plan,
    index: usize,
    deadline: Instant,
    ready: tokio::sync::mpsc::UnboundedSender<()>,
) -> One {
    let mut one = One::default();
    let mut ready = Some(ready);
    let path = match plan.source {
        Source::Greenlight => format!("/api/goals/{}/stream", plan.goal),
        Source::Nchan => format!("/sub/{}", plan.goal),
    };
    let mut drop_at =
        (plan.drop_every > 0 && index.is_multiple_of(plan.drop_every)).then_some(plan.frames / 2);
    let prefix = format!("{}:", plan.goal);
    // nchan's ids are its own: a resume sends back the last one seen.
    let mut last_id = String::new();
    while one.last < last_seq(plan) && Instant::now() < deadline {
        let cursor = match plan.source {
            Source::Greenlight => format!("{}:{}", plan.goal, one.last),
            Source::Nchan => last_id.clone(),
        };
        let headers: Vec<(&str, &str)> = if one.last > 0 {
            vec![("Last-Event-ID", &cursor)]
        } else {
            vec![]
        };
        let mut response = match sse::request(plan.addr, "GET", &path, &headers).await {
            Ok(r) if r.status == 200 => r,
            Ok(r) => {
                one.problems
                    .push(format!("subscriber {index}: status {}", r.status));
                return one;
            }
            Err(e) => {
                one.problems.push(format!("subscriber {index}: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if one.last > 0 {
            one.reconnects += 1;
        }
        if let Some(ready) = ready.take() {
            let _ = ready.send(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let reading = tokio::time::timeout(left, async {
            while let Ok(Some(event)) = response.next_event().await {
                let now = now_us();
                let seq = match plan.source {
                    Source::Greenlight => event
                        .id
                        .as_deref()
                        .and_then(|id| id.strip_prefix(&prefix))
                        .and_then(|s| s.parse::<u64>().ok()),
                    Source::Nchan => number_after(&event.data, "s="),
                };
                if let Some(id) = &event.id {
                    last_id.clone_from(id);
                }
                let Some(seq) = seq else {
                    one.gaps += 1;
                    one.problems.push(format!(
                        "subscriber {index}: event without a cursor: {}",
                        event.data
                    ));
                    return true;
                };
                if seq <= one.last {
                    one.duplicates += 1;
                    continue;
                }
                if seq != one.last + 1 {
                    one.gaps += 1;
                    one.problems
                        .push(format!("subscriber {index}: {} after {}", seq, one.last));
                }
                one.last = seq;
                one.delivered += 1;
                if let Some(t) = stamp(&event.data) {
                    one.latencies.push((seq, now.saturating_sub(t)));
                }
                if one.last >= last_seq(plan) {
                    return true;
                }
                if drop_at == Some(seq) {
                    drop_at = None;
                    return false;
                }
            }
            false
        })
        .await;
        if matches!(reading, Ok(true)) {
            break;
        }
    }
    one
}

/// Connects every subscriber, calls `start_writer` once all are connected and have read the
/// stream's start, and waits for them all.
pub async fn run(plan: Plan, start_writer: impl FnOnce()) -> Report {
    let deadline = Instant::now() + plan.deadline;
    let tasks = tokio::task::LocalSet::new();
    let mut handles = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for index in 0..plan.subscribers {
        let plan = plan.clone();
        let ready = ready_tx.clone();
        handles.push(
            tasks.spawn_local(async move { subscriber(&plan, index, deadline, ready).await }),
        );
    }
    drop(ready_tx);
    let results = tasks
        .run_until(async move {
            // Every subscriber answered (or gave up: its sender is dropped).
            while ready_rx.recv().await.is_some() {}
            // Give the connections a moment to be accepted before frames flow.
            tokio::time::sleep(Duration::from_millis(200)).await;
            start_writer();
            let mut results = Vec::new();
            for h in handles {
                results.push(h.await.unwrap_or_default());
            }
            results
        })
        .await;
    let mut report = Report::default();
    let mut first: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    for one in results {
        report.delivered += one.delivered;
        report.gaps += one.gaps;
        report.duplicates += one.duplicates;
        report.reconnects += one.reconnects;
        report.incomplete += usize::from(one.last < last_seq(&plan));
        for &(seq, us) in &one.latencies {
            first
                .entry(seq)
                .and_modify(|soonest| *soonest = (*soonest).min(us))
                .or_insert(us);
        }
        report
            .latencies_us
            .extend(one.latencies.into_iter().map(|(_, us)| us));
        report.problems.extend(one.problems.into_iter().take(3));
    }
    report.latencies_us.sort_unstable();
    report.first_us = first.into_values().collect();
    report.first_us.sort_unstable();
    report.problems.truncate(20);
    report
}
