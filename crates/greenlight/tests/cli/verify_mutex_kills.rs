//! One mutex, 16 worktrees, the holder SIGKILLed at random moments: never two gates under the
//! mutex at once. Each gate writes its start, a tick every 40 ms and its end to one log from
//! inside the gate (appends, with nanosecond timestamps); the log must read as gates one after
//! another, a killed gate's last line before the next gate's first.
//!
//! A trial takes about 2.5 s (the waiters' 2 s budget runs out after the last kill), so plain
//! `cargo test` runs 10 trials and `scripts/test`, whose `GREENLIGHT_FUZZ_CASES` is large, 25
//! (about a minute: the longest test of the suite, so more would lengthen every CI run);
//! `GREENLIGHT_MUTEX_TRIALS` sets the number outright. `GREENLIGHT_FUZZ_SEED` is a number to
//! replay one run's kill moments (else the clock chooses, and a failure prints it).

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;
use greenlight_testkit::procs::{alive, end, wait_until};

const WORKTREES: usize = 16;

fn trials() -> u32 {
    let var = |name| std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok());
    var("GREENLIGHT_MUTEX_TRIALS")
        .or_else(|| var("GREENLIGHT_FUZZ_CASES").map(|cases| cases.clamp(10, 25)))
        .unwrap_or(10)
}

fn seed() -> u64 {
    std::env::var("GREENLIGHT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        })
}

/// xorshift64: the kill moments, reproducible from the seed.
struct Moments(u64);

impl Moments {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One gate's lines in the log, in the order they were appended.
#[derive(Debug)]
struct Span {
    gate: String,
    first_ns: u128,
    last_ns: u128,
}

/// The log as gates one after another; the first interleaving is an error.
fn spans(log: &str) -> Result<Vec<Span>, String> {
    let mut spans: Vec<Span> = Vec::new();
    let mut closed = HashSet::new();
    for line in log.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, gate, ns] = fields[..] else {
            return Err(format!("a torn line: {line:?}"));
        };
        let ns: u128 = ns.parse().map_err(|_| format!("a torn line: {line:?}"))?;
        match spans.last_mut() {
            Some(span) if span.gate == gate => span.last_ns = ns,
            _ => {
                if !closed.insert(gate.to_owned()) {
                    return Err(format!(
                        "gate {gate} wrote again after another gate started"
                    ));
                }
                spans.push(Span {
                    gate: gate.to_owned(),
                    first_ns: ns,
                    last_ns: ns,
                });
            }
        }
    }
    for pair in spans.windows(2) {
        if pair[1].first_ns <= pair[0].last_ns {
            return Err(format!("{:?} started before {:?} ended", pair[1], pair[0]));
        }
    }
    Ok(spans)
}

fn lock_holder(root: &Path) -> Option<u32> {
    let text = fs::read_to_string(root.join("fuzz.lock/owner")).ok()?;
    let owner: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    owner["pid"].as_u64().and_then(|p| u32::try_from(p).ok())
}

#[test]
fn sigkilled_holders_never_leave_two_gates_under_one_mutex() {
    let seed = seed();
    let mut moments = Moments(seed);
    let repos: Vec<TempRepo> = (0..WORKTREES)
        .map(|_| TempRepo::worktree_with_commit())
        .collect();
    let root = repos[0].lock_root().to_path_buf();
    let started = Instant::now();
    let (mut kills, mut gates_run) = (0, 0);
    for trial in 0..trials() {
        let log = repos[0].home().join(format!("trial-{trial}.log"));
        let stamp = format!("$(date +%s%N) >> {}", log.display());
        let gate = format!(
            "version: 1\ngates:\n  - id: under-mutex\n    command: echo start $$ {stamp}; i=0; while [ $i -lt 4 ]; do sleep 0.04; echo tick $$ {stamp}; i=$((i+1)); done; echo end $$ {stamp}\n    mutex: fuzz\n    timeoutSec: 2\n"
        );
        for repo in &repos {
            repo.verify_yaml(&gate);
        }
        let mut runs: Vec<Child> = repos
            .iter()
            .map(|repo| {
                repo.command(["verify", "--no-record"])
                    .env("CM_VERIFY_LOCK_ROOT", &root)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let ours: Vec<u32> = runs.iter().map(Child::id).collect();
        // Two kills at random moments of the trial, each of whoever holds the mutex then (or
        // first holds it after).
        let mut at = [100 + moments.below(1_300), 100 + moments.below(1_300)];
        at.sort_unstable();
        let trial_start = Instant::now();
        for ms in at {
            let due = Duration::from_millis(ms);
            std::thread::sleep(due.saturating_sub(trial_start.elapsed()));
            let limit = Instant::now() + Duration::from_millis(400);
            while Instant::now() < limit {
                if let Some(pid) = lock_holder(&root).filter(|p| ours.contains(p)) {
                    let _ = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status();
                    kills += 1;
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        for run in &mut runs {
            run.wait().unwrap();
        }
        let text = fs::read_to_string(&log).unwrap_or_default();
        let found = spans(&text).unwrap_or_else(|why| {
            panic!("trial {trial} (GREENLIGHT_FUZZ_SEED={seed}): {why}\n{text}")
        });
        gates_run += found.len();
        // A killed holder with no waiter left ends its gate on its own within a moment.
        let pids: Vec<i32> = found.iter().filter_map(|s| s.gate.parse().ok()).collect();
        wait_until(Duration::from_secs(5), "every gate ended", || {
            pids.iter().all(|&p| !alive(p)).then_some(())
        });
        for p in pids {
            end(p);
        }
    }
    assert!(kills > 0 && gates_run > 0, "nothing was tested");
    eprintln!(
        "{} trials, {kills} holders killed, {gates_run} gates, in {:.1?} (seed {seed})",
        trials(),
        started.elapsed()
    );
}

#[test]
fn the_overlap_check_finds_an_interleaving() {
    assert!(spans("start 1 10\ntick 1 20\nend 1 30\nstart 2 40\nend 2 50\n").is_ok());
    assert!(spans("start 1 10\nstart 2 15\ntick 1 20\n").is_err());
    assert!(
        spans("start 1 10\ntick 1 30\nstart 2 20\n").is_err(),
        "by the clock"
    );
    assert!(spans("start 1 1").is_ok());
    assert!(spans("start 1").is_err());
}
