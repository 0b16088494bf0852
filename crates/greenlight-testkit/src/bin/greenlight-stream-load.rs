//! The SSE load client of `scripts/bench-stream.sh`: creates a goal in the store a running
//! `greenlight serve` reads (a SQLite file or a PostgreSQL URL), connects the subscribers, starts
//! itself again as the writer (a separate process appending frames through the store at a fixed
//! rate), and reports delivery latency, the server's peak RSS, and any gap, duplicate or
//! incomplete subscriber. With `--nchan` instead of `--state`, the same subscribers follow
//! channel 1 of an nchan server and the writer publishes to it by HTTP POST at the same rate.
//!
//! `greenlight-stream-load --addr ADDR (--state PATH|URL | --nchan) [--subscribers N] [--frames N]
//! [--rate N] [--drop-every N] [--server-pid PID] [--p99-ms N] [--rss-mib N]`; the last line is
//! `result p50_ms=… p99_ms=… rss_kib=…` for the script; exit 1 on any gap, duplicate or
//! incomplete subscriber, 2 on bad arguments.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line report

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use greenlight_testkit::load::{self, Plan, Source};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: Option<T>) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a value")),
        None => default.ok_or_else(|| format!("{name} is required")),
    }
}

/// The peak resident set of `pid` in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn write_mode(args: &[String]) -> Result<ExitCode, String> {
    let state: PathBuf = arg(args, "--state", None)?;
    let goal: i64 = arg(args, "--goal", None)?;
    let frames: u64 = arg(args, "--frames", None)?;
    let rate: u64 = arg(args, "--rate", None)?;
    load::write_frames(&state, greenlight_store::GoalId(goal), frames, rate);
    Ok(ExitCode::SUCCESS)
}

/// The nchan writer: `publish --addr ADDR --frames N --rate N`.
fn publish_mode(args: &[String]) -> Result<ExitCode, String> {
    let addr: std::net::SocketAddr = arg(args, "--addr", None)?;
    let frames: u64 = arg(args, "--frames", None)?;
    let rate: u64 = arg(args, "--rate", None)?;
    current_thread()?.block_on(load::publish_frames(addr, NCHAN_CHANNEL, frames, rate));
    Ok(ExitCode::SUCCESS)
}

/// The nchan channel the subscribers follow.
const NCHAN_CHANNEL: i64 = 1;

fn current_thread() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

fn load_mode(args: &[String]) -> Result<ExitCode, String> {
    let nchan = args.iter().any(|a| a == "--nchan");
    let addr = arg(args, "--addr", None)?;
    let subscribers: usize = arg(args, "--subscribers", Some(1000))?;
    let frames: u64 = arg(args, "--frames", Some(10_000))?;
    let rate: u64 = arg(args, "--rate", Some(200))?;
    let drop_every: usize = arg(args, "--drop-every", Some(10))?;
    let server_pid: Option<u32> = arg(args, "--server-pid", Some(0)).ok().filter(|p| *p > 0);
    let p99_target: Option<f64> = arg(args, "--p99-ms", None).ok();
    let rss_target: Option<u64> = arg(args, "--rss-mib", None).ok();
    let runtime = current_thread()?;
    let (source, goal, mut writer_command) = if nchan {
        // Seq 1, before the subscribers come, as a goal's own first frame is.
        runtime
            .block_on(load::nchan_publish(
                addr,
                NCHAN_CHANNEL,
                &load::nchan_message(load::GOAL_FRAMES_BEFORE_WRITER),
            ))
            .map_err(|e| format!("nchan at {addr}: {e}"))?;
        let mut command = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
        command.arg("publish").arg("--addr").arg(addr.to_string());
        (Source::Nchan, NCHAN_CHANNEL, command)
    } else {
        let state: PathBuf = arg(args, "--state", None)?;
        // The goal's worktree must exist but is never used; a PostgreSQL store has no directory
        // of its own, so its goal names the current one.
        let dir = if greenlight_store::pg::is_url(&state.to_string_lossy()) {
            std::env::current_dir().map_err(|e| e.to_string())?
        } else {
            state.parent().unwrap_or(Path::new(".")).to_path_buf()
        };
        let goal = load::create_goal(&state, &dir).0;
        let mut command = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
        command
            .arg("write")
            .arg("--state")
            .arg(&state)
            .args(["--goal", &goal.to_string()]);
        (Source::Greenlight, goal, command)
    };
    writer_command.args(["--frames", &frames.to_string(), "--rate", &rate.to_string()]);
    let plan = Plan {
        addr,
        source,
        goal,
        subscribers,
        frames,
        drop_every,
        deadline: Duration::from_secs_f64(frames as f64 / rate.max(1) as f64 + 60.0),
    };
    let mut writer = None;
    let started = std::time::Instant::now();
    let report = runtime.block_on(load::run(plan, || {
        let spawned =
            std::os::unix::process::CommandExt::process_group(&mut writer_command, 0).spawn();
        writer = Some(spawned);
    }));
    let writer_ok = match writer {
        Some(Ok(mut child)) => child.wait().is_ok_and(|s| s.success()),
        _ => false,
    };
    let rss = server_pid.and_then(peak_rss_kib);
    let mark = |met: bool| if met { "MET" } else { "MISSED" };
    let p99 = report.quantile_ms(0.99);
    println!(
        "subscribers {subscribers}, frames {frames} at {rate}/s, every {drop_every}th dropped once and resumed"
    );
    println!(
        "run took {:.1} s; writer {}",
        started.elapsed().as_secs_f64(),
        if writer_ok { "ok" } else { "FAILED" }
    );
    println!(
        "delivered {} of {}; reconnects {}",
        report.delivered,
        subscribers as u64 * (frames + load::GOAL_FRAMES_BEFORE_WRITER),
        report.reconnects
    );
    println!(
        "gaps {}  duplicates {}  incomplete {}",
        report.gaps, report.duplicates, report.incomplete
    );
    println!(
        "latency p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms",
        report.quantile_ms(0.5),
        report.quantile_ms(0.9),
        p99,
        report.quantile_ms(0.999),
        report.quantile_ms(1.0)
    );
    println!(
        "first watcher of each frame: p50 {:.2} ms  p99 {:.2} ms",
        report.first_quantile_ms(0.5),
        report.first_quantile_ms(0.99)
    );
    if let Some(target) = p99_target {
        println!("target p99 < {target} ms: {}", mark(p99 < target));
    }
    match (rss, rss_target) {
        (Some(kib), Some(target)) => println!(
            "server peak RSS {:.1} MiB; target < {target} MiB: {}",
            kib as f64 / 1024.0,
            mark(kib < target * 1024)
        ),
        (Some(kib), None) => println!("server peak RSS {:.1} MiB", kib as f64 / 1024.0),
        (None, _) => println!("server peak RSS unknown (no --server-pid)"),
    }
    for problem in &report.problems {
        println!("problem: {problem}");
    }
    println!(
        "result p50_ms={:.3} p99_ms={p99:.3} rss_kib={}",
        report.quantile_ms(0.5),
        rss.unwrap_or(0)
    );
    let clean = report.gaps == 0 && report.duplicates == 0 && report.incomplete == 0 && writer_ok;
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("write") => write_mode(&args),
        Some("publish") => publish_mode(&args),
        _ => load_mode(&args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("greenlight-stream-load: {e}");
        ExitCode::from(2)
    })
}
