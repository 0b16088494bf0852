//! The floor under `greenlight serve`'s delivery latency, for `scripts/bench-stream.sh`: a
//! writer process committing frames to the SQLite file exactly as the load benchmark's writer
//! does (the same store, the same durability, one transaction per frame, at the same rate),
//! and a reader in this process woken by the same wake-up socket the server uses, reading each
//! frame back from the file. No HTTP, no fan-out: what persisting first costs on this disk.
//!
//! `wake_floor --state PATH [--frames N] [--rate N]`; the last line is
//! `result p50_ms=… p99_ms=…`.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line report

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use greenlight_server::wake::{Listener, SAFETY_POLL};
use greenlight_store::greenlight_stream::FrameBody;
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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    run(&args).unwrap_or_else(|e| {
        eprintln!("wake_floor: {e}");
        ExitCode::from(2)
    })
}
