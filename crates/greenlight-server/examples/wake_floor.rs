//! The floor under `greenlight serve`'s delivery latency, for `scripts/bench-stream.sh`: a
//! writer process committing frames to the SQLite file exactly as the load benchmark's writer
//! does (the same store, the same durability, one transaction per frame, at the same rate),
//! and a reader in this process woken by the same wake-up socket the server uses, reading each
//! frame back from the file. No HTTP, no fan-out: what persisting first costs on this disk.
//!
//! `wake_floor --state PATH [--frames N] [--rate N]`; the last line is
//! `result p50_ms=… p99_ms=…`.
//!
//! `wake_floor serve --state PATH|URL --listen ADDR`: the same floor with the fan-out, on
//! either backend (woken by PostgreSQL's `LISTEN` as the server is), for the load
//! client to watch as it watches `greenlight serve` (prints `serving on http://ADDR/`). One
//! thread, woken by the same socket, reads each new frame back from the file and writes its SSE
//! bytes to every watcher's socket in turn: the least a server that persists first must do at
//! that many watchers, with no HTTP framework, runtime or tasks. A watcher that comes with
//! `Last-Event-ID` is replayed from the file first, as the server does.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line report

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use greenlight_server::wake::{Listener, SAFETY_POLL, interrupt};
use greenlight_store::greenlight_stream::{FrameBody, StreamId, encode_frame};
use greenlight_store::{GoalId, Reads, Store};
use greenlight_testkit::load;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: Option<T>) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a value")),
        None => default.ok_or_else(|| format!("{name} is required")),
    }
}

fn stamp(text: &str) -> Option<u64> {
    let rest = &text[text.find("t=")? + 2..];
    rest[..rest.find(' ')?].parse().ok()
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let state: PathBuf = arg(args, "--state", None)?;
    let frames: u64 = arg(args, "--frames", Some(2000))?;
    let rate: u64 = arg(args, "--rate", Some(200))?;
    if args.first().map(String::as_str) == Some("write") {
        let goal: i64 = arg(args, "--goal", None)?;
        load::write_frames(&state, GoalId(goal), frames, rate);
        return Ok(ExitCode::SUCCESS);
    }
    let dir = state.parent().map(PathBuf::from).unwrap_or_default();
    let goal = load::create_goal(&state, &dir);
    let store = Store::open(&state).map_err(|e| e.to_string())?;
    let mut position = store.last_frame_position().map_err(|e| e.to_string())?;
    let listener = Listener::bind(&state).map_err(|e| format!("bind the wake-up socket: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut writer = std::os::unix::process::CommandExt::process_group(
        Command::new(exe)
            .arg("write")
            .arg("--state")
            .arg(&state)
            .args(["--goal", &goal.0.to_string()])
            .args(["--frames", &frames.to_string(), "--rate", &rate.to_string()]),
        0,
    )
    .spawn()
    .map_err(|e| format!("start the writer: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs_f64(frames as f64 / rate as f64 + 60.0);
    let mut latencies = Vec::new();
    while (latencies.len() as u64) < frames && Instant::now() < deadline {
        listener.wait(SAFETY_POLL);
        let batch = store
            .frames_since(position, 1024)
            .map_err(|e| e.to_string())?;
        let now = load::now_us();
        for (at, frame) in batch {
            position = at;
            if let FrameBody::Activity { text, .. } = &frame.body
                && let Some(t) = stamp(text)
            {
                latencies.push(now.saturating_sub(t));
            }
        }
    }
    let writer_ok = writer.wait().is_ok_and(|s| s.success());
    latencies.sort_unstable();
    let q = |q: f64| {
        latencies
            .get(((latencies.len().max(1) - 1) as f64 * q).round() as usize)
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    println!(
        "floor: {} of {frames} frames read back woken by the socket; writer {}",
        latencies.len(),
        if writer_ok { "ok" } else { "FAILED" }
    );
    println!("result p50_ms={:.3} p99_ms={:.3}", q(0.5), q(0.99));
    Ok(if writer_ok && latencies.len() as u64 == frames {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One watcher of the fan-out floor: its stream, the last seq it was sent, its socket.
struct Watcher {
    stream: StreamId,
    last: u64,
    socket: TcpStream,
}

/// Reads a request head from `socket` and answers it with an SSE response head: the watcher it
/// asks for (`GET /api/goals/ID/stream`, `Last-Event-ID: ID:SEQ`), or `None` for anything else.
fn accept_watcher(mut socket: TcpStream) -> Option<Watcher> {
    socket.set_nodelay(true).ok()?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let n = socket.read(&mut buf).ok().filter(|n| *n > 0)?;
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.lines().next()?.split_whitespace().nth(1)?;
    let goal: i64 = path
        .strip_prefix("/api/goals/")?
        .strip_suffix("/stream")?
        .parse()
        .ok()?;
    let last = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("last-event-id")
                .then(|| v.trim().rsplit(':').next()?.parse().ok())?
        })
        .unwrap_or(0);
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
        )
        .ok()?;
    Some(Watcher {
        stream: StreamId::Goal(goal),
        last,
        socket,
    })
}

/// Sends `watcher` what the file holds after its last seq; false when its socket failed.
fn replay(store: &Store, watcher: &mut Watcher) -> bool {
    loop {
        let Ok(frames) = store.frames_after(watcher.stream, watcher.last, 512) else {
            return false;
        };
        let Some(last) = frames.last().map(|f| f.seq) else {
            return true;
        };
        let bytes: String = frames.iter().map(encode_frame).collect();
        if watcher.socket.write_all(bytes.as_bytes()).is_err() {
            return false;
        }
        watcher.last = last;
    }
}

fn serve(args: &[String]) -> Result<ExitCode, String> {
    let state: PathBuf = arg(args, "--state", None)?;
    let listen: std::net::SocketAddr = arg(args, "--listen", None)?;
    let store = Store::open(&state).map_err(|e| e.to_string())?;
    let mut position = store.last_frame_position().map_err(|e| e.to_string())?;
    // A SQLite file's wake-up socket, or a PostgreSQL store's LISTEN, as the server's.
    let wake = Listener::bind(&state).map_err(|e| format!("listen for commits: {e}"))?;
    let wake_path = wake.path().map(PathBuf::from);
    let tcp = TcpListener::bind(listen).map_err(|e| format!("bind {listen}: {e}"))?;
    let addr = tcp.local_addr().map_err(|e| e.to_string())?;
    eprintln!("serving on http://{addr}/");
    let arrived: Arc<Mutex<Vec<Watcher>>> = Arc::default();
    let inbox = Arc::clone(&arrived);
    std::thread::spawn(move || {
        for socket in tcp.incoming().flatten() {
            if let Some(watcher) = accept_watcher(socket) {
                inbox
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(watcher);
                // PostgreSQL has no socket to poke: a new watcher waits for the next commit.
                if let Some(path) = &wake_path {
                    interrupt(path);
                }
            }
        }
    });
    let mut watchers: Vec<Watcher> = Vec::new();
    loop {
        wake.wait(SAFETY_POLL);
        let new: Vec<Watcher> =
            std::mem::take(&mut *arrived.lock().unwrap_or_else(|e| e.into_inner()));
        for mut watcher in new {
            if replay(&store, &mut watcher) {
                watchers.push(watcher);
            }
        }
        let batch = store
            .frames_since(position, 1024)
            .map_err(|e| e.to_string())?;
        for (at, frame) in batch {
            position = at;
            let sse = encode_frame(&frame);
            watchers.retain_mut(|w| {
                if w.stream != frame.stream || frame.seq != w.last + 1 {
                    return true;
                }
                w.last = frame.seq;
                w.socket.write_all(sse.as_bytes()).is_ok()
            });
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let run = |args: &[String]| match args.first().map(String::as_str) {
        Some("serve") => serve(args),
        _ => run(args),
    };
    run(&args).unwrap_or_else(|e| {
        eprintln!("wake_floor: {e}");
        ExitCode::from(2)
    })
}
