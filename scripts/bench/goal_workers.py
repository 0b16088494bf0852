#!/usr/bin/env python3
"""The goal queue's makespan and claim latency with real `greenlight goal worker` processes on a
real PostgreSQL; run by scripts/bench-goal-workers.sh, which says what is measured and why."""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--check-args", action="store_true", help="check the options and exit")
    p.add_argument("--bin", help="the greenlight binary")
    p.add_argument("--pg", help="a PostgreSQL URL whose user may create schemas")
    p.add_argument("--work", help="a scratch directory of this run's own")
    p.add_argument("--psql", default="psql", help="PostgreSQL's client (psql on PATH)")
    p.add_argument("--goals", type=int, default=200, help="goals per makespan run (200)")
    p.add_argument("--turn", type=float, default=0.2, help="seconds each agent turn sleeps (0.2)")
    p.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated (1,2,4)")
    p.add_argument("--latency-goals", type=int, default=60,
                   help="goals submitted one by one to idle workers for the claim latency (60)")
    p.add_argument("--latency-gap", type=float, default=0.1,
                   help="seconds between those submits (0.1)")
    p.add_argument("--json", help="also write the JSON document here")
    args = p.parse_args(argv)
    try:
        args.worker_counts = [int(w) for w in args.workers.split(",")]
    except ValueError:
        p.error(f"--workers {args.workers!r}: give worker counts like 1,2,4")
    if not args.worker_counts or min(args.worker_counts) < 1:
        p.error(f"--workers {args.workers!r}: each count must be at least 1")
    if args.goals < 1 or args.latency_goals < 2:
        p.error("--goals must be at least 1 and --latency-goals at least 2")
    if args.turn < 0 or args.latency_gap < 0:
        p.error("--turn and --latency-gap are seconds, 0 or more")
    if not args.check_args and not (args.bin and args.pg and args.work):
        p.error("--bin, --pg and --work are needed to measure")
    return args


class NotMeasured(Exception):
    """A part whose figure would not mean what it claims."""


class Store:
    """A schema of its own on the server, so each configuration starts from an empty queue,
    read back with psql."""

    def __init__(self, args, name):
        self.psql, self.server = args.psql, args.pg
        self.schema = f"bench_{name}_{os.getpid()}_{time.time_ns() % 10**9}"
        self._run(f"CREATE SCHEMA {self.schema}")
        sep = "&" if "?" in args.pg else "?"
        self.url = f"{args.pg}{sep}options=-csearch_path%3D{self.schema}"

    def _run(self, sql):
        out = subprocess.run([self.psql, self.server, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise NotMeasured(f"psql failed on {sql!r}: {out.stderr.strip()}")
        return [line.split("|") for line in out.stdout.splitlines() if line]

    def query(self, sql):
        return self._run(f"SET search_path TO {self.schema}; {sql}")


def make_repo(path):
    path.mkdir(parents=True)
    for cmd in (["git", "init", "-q", "-b", "main"],
                ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
                 "commit", "-q", "--allow-empty", "-m", "base"]):
        subprocess.run(cmd, cwd=path, check=True)


def make_agent(path, records, turn):
    """A scripted agent: records its worktree and pid, works `turn` seconds, makes the gate pass
    and replies."""
    path.write_text(
        "#!/bin/sh\n"
        f"echo \"$(basename \"$PWD\") $$\" >> '{records}'\n"
        f"sleep {turn}\n"
        "touch done.txt\n"
        "echo done\n")
    path.chmod(0o755)
    return f"command:{path}"


def submit(args, store, repo, agent, text):
    out = subprocess.run(
        [args.bin, "goal", "submit", text, "--agent", agent, "--gate", "test -f done.txt",
         "--max-turns", "4", "--store", store, "--cwd", str(repo)],
        capture_output=True, text=True)
    if out.returncode != 0:
        raise NotMeasured(f"goal submit failed: {out.stderr.strip()}")


def start_workers(args, store, work, count, until_empty):
    workers = []
    for w in range(count):
        log = open(work / f"worker-{w}.log", "w")
        cmd = [args.bin, "goal", "worker", "--capacity", "1", "--name", f"w{w}",
               "--store", store, "--work-dir", str(work / f"w{w}")]
        if until_empty:
            cmd.append("--until-empty")
        workers.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log,
                                        start_new_session=True))
        log.close()
    return workers


def stop_workers(workers):
    for w in workers:
        if w.poll() is None:
            os.killpg(w.pid, signal.SIGTERM)
    for w in workers:
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(w.pid, signal.SIGKILL)
            w.wait()


def wait_started(work, count, limit=30):
    """Until every worker has said it takes goals (it listens from then on)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        ready = sum("taking work from" in (work / f"worker-{w}.log").read_text()
                    for w in range(count))
        if ready == count:
            return
        time.sleep(0.05)
    raise NotMeasured(f"not every worker started within {limit} s (logs in {work})")


def workload(args, work, name, turn):
    """A fresh store, a repository and a scripted agent of `turn` seconds, under `work`."""
    store = Store(args, name)
    repo = work / "repo"
    make_repo(repo)
    records = work / "records"
    return store, repo, records, make_agent(work / "agent.sh", records, turn)


def check_done(store, records, goals, work):
    """Each goal ended done, was claimed once, and its agent ran once, in its own worktree:
    a figure from a run that did anything else is not the makespan of this workload."""
    rows = store.query("SELECT i.id, i.state, coalesce(i.outcome, ''), "
                       "(SELECT count(*) FROM queue_claims c WHERE c.item_id = i.id) "
                       "FROM queue_items i ORDER BY i.id")
    if len(rows) != goals:
        raise NotMeasured(f"{len(rows)} queue items, not {goals}")
    bad = [r for r in rows if r[1:] != ["ended", "done", "1"]]
    if bad:
        raise NotMeasured(f"items not done after exactly one claim: {bad[:5]} (logs in {work})")
    seen = [line.split(" ")[0] for line in Path(records).read_text().splitlines()]
    if len(seen) != goals or len(set(seen)) != goals:
        raise NotMeasured(f"{len(seen)} agent turns in {len(set(seen))} worktrees, "
                          f"not one in each of {goals}")


def makespan(args, count, work):
    store, repo, records, agent = workload(args, work, f"m{count}", args.turn)
    for i in range(args.goals):
        submit(args, store.url, repo, agent, f"task {i}")
    started_ms = time.time_ns() // 10**6
    workers = start_workers(args, store.url, work, count, until_empty=True)
    try:
        for w in workers:
            if w.wait(timeout=1800) != 0:
                raise NotMeasured(f"a worker exited {w.returncode} (logs in {work})")
    finally:
        stop_workers(workers)
    check_done(store, records, args.goals, work)
    (ended_ms,), = store.query("SELECT max(ended_at) FROM queue_items")
    by_worker = dict(store.query("SELECT worker, count(*) FROM queue_claims "
                                 "GROUP BY worker ORDER BY worker"))
    return {"workers": count, "makespan_s": (int(ended_ms) - started_ms) / 1000,
            "goals_by_worker": {k: int(v) for k, v in by_worker.items()}}


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def claim_latency(args, work, count=4):
    """Idle workers (listening), goals submitted one at a time: submit to first dispatch."""
    store, repo, records, agent = workload(args, work, "latency", 0)
    workers = start_workers(args, store.url, work, count, until_empty=False)
    try:
        wait_started(work, count)
        for i in range(args.latency_goals):
            submit(args, store.url, repo, agent, f"task {i}")
            time.sleep(args.latency_gap)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            (open_items,), = store.query(
                "SELECT count(*) FROM queue_items WHERE state <> 'ended'")
            if open_items == "0":
                break
            time.sleep(0.1)
        else:
            raise NotMeasured(f"goals still open after 120 s (logs in {work})")
    finally:
        stop_workers(workers)
    check_done(store, records, args.latency_goals, work)
    rows = store.query(
        "SELECT i.id, (SELECT min(d.started_at) FROM dispatches d "
        "WHERE d.goal_id = i.goal_id) - i.submitted_at FROM queue_items i")
    latencies = [int(ms) for _, ms in rows]
    return {"goals": len(latencies), "idle_workers": count,
            "p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies)}


def main(argv):
    args = parse_args(argv)
    if args.check_args:
        return 0
    work = Path(args.work)
    doc = {"goals": args.goals, "turn_s": args.turn, "makespan": [], "claim_latency": None}
    failed = []
    for count in args.worker_counts:
        print(f"== {args.goals} goals, {count} worker(s)", file=sys.stderr)
        try:
            doc["makespan"].append(makespan(args, count, work / f"makespan-{count}"))
        except NotMeasured as e:
            failed.append(f"makespan with {count} worker(s): {e}")
    print(f"== claim latency: {args.latency_goals} goals to 4 idle workers", file=sys.stderr)
    try:
        doc["claim_latency"] = claim_latency(args, work / "latency")
    except NotMeasured as e:
        failed.append(f"claim latency: {e}")

    print(f"\n{args.goals} goals of one {args.turn} s scripted turn each "
          "(worker processes of capacity 1, one PostgreSQL)")
    spans = {m["workers"]: m["makespan_s"] for m in doc["makespan"]}
    for m in doc["makespan"]:
        ratio = f"  {m['makespan_s'] / spans[1]:.2f} x 1 worker" if 1 in spans else ""
        print(f"  {m['workers']} worker(s): makespan {m['makespan_s']:.2f} s{ratio}"
              f"  goals by worker {m['goals_by_worker']}")
    if 1 in spans and 4 in spans:
        ratio = spans[4] / spans[1]
        doc["ratio_4_to_1"] = ratio
        verdict = "MET" if ratio <= 0.3 else "MISSED"
        print(f"  target 4 workers <= 0.3 x 1 worker: {ratio:.3f}  {verdict}")
    lat = doc["claim_latency"]
    if lat:
        print(f"claim latency, submit to first dispatch ({lat['goals']} goals, "
              f"{lat['idle_workers']} idle workers): p50 {lat['p50_ms']} ms, "
              f"p99 {lat['p99_ms']} ms, max {lat['max_ms']} ms")
    for f in failed:
        print(f"NOT MEASURED: {f}")
    text = json.dumps(doc)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
