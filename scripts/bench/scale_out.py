#!/usr/bin/env python3
"""The driver of scripts/bench-scale-out.sh: scripted agents running `greenlight verify` with
remote gates against a REAPI grid, measured under several worker configurations.

The workload is fixed by a seed: A agents start from identical git repositories; in each of R
rounds an agent works a while (a seeded sleep), appends a round line to its tracked file or
leaves it alone (p = 0.5), then runs `greenlight verify` (three `sleep` gates, `run: remote`). All agents run at once, each going
through its rounds on its own thread. Every configuration (N workers, the grid's shared cache on
or off) gets fresh repositories, a fresh salt in every gate's command (so nothing is replayed from
an earlier configuration) and a platform pool of its own that only its N workers offer.

Every gate appends one line to an executions log outside the repositories and prints an
execution id, so executions are counted exactly, each request is traced to the execution that
answered it, and a gate that ran in an agent's own repository (locally) is caught.

Exit codes: 0 measured (targets met or MISSED, as printed), 1 a part could not be measured,
2 bad usage.
"""

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# Gate id -> seconds of `sleep`. The shares follow a test/build/lint mix; the sum (2.4 s) keeps
# the whole benchmark (three configurations, services included) under 90 s on two cores.
GATES = {"test": 1.2, "build": 0.8, "lint": 0.4}
JOBS = 3
TRACKED = "notes.txt"
GATE_SCRIPT = "bench-gate.sh"
# Each verify gets this long before the run is declared stuck.
VERIFY_TIMEOUT_S = 180
# How long the workers of a configuration get to connect and all take a lease at once.
WARMUP_DEADLINE_S = 60
WORKER_STOP_GRACE_S = 10

# One gate of the benchmark: sleep, then append one line (tab-separated: salt, gate, execution
# id, start, end, tree hash, the worker's CARGO_HOME, working directory) to the log, and print
# the execution id so the requester's output names the execution that answered it.
GATE_SH = r"""#!/bin/sh
# Usage: sh bench-gate.sh GATE SECONDS SALT LOG
gate=$1 secs=$2 salt=$3 log=$4
start=$(date +%s.%N)
sleep "$secs"
tree=$(sha256sum notes.txt | cut -c1-16)
end=$(date +%s.%N)
id="$salt.$gate.$$.$start"
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$salt" "$gate" "$id" "$start" "$end" "$tree" \
    "${CARGO_HOME:--}" "$PWD" >>"$log"
echo "exec=$id tree=$tree"
"""


class Unmeasured(Exception):
    """A part of the benchmark could not be measured; the message says which and why."""


class Stopped(BaseException):
    """SIGTERM or SIGINT: unwind, stopping the workers and the running verifies on the way."""


def on_stop_signal(signum, _frame):
    STOPPING.set()
    with RUNNING_LOCK:
        for proc in RUNNING:
            if proc.poll() is None:
                proc.terminate()
    raise Stopped(signal.Signals(signum).name)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The workload: who edits when, and which actions that asks for.


def plan(seed, agents, rounds, think_max):
    """(edits, think): edits[a][r] is True when agent a appends a line in round r, after working
    think[a][r] seconds (uniform in [0, think_max)); draws go round by round, agent by agent."""
    rng = random.Random(seed)
    edits = [[False] * rounds for _ in range(agents)]
    think = [[0.0] * rounds for _ in range(agents)]
    for r in range(rounds):
        for a in range(agents):
            edits[a][r] = rng.random() < 0.5
            think[a][r] = rng.uniform(0, think_max)
    return edits, think


def base_text():
    return "notes of the scale-out benchmark\n"


def round_line(r):
    return f"round {r + 1}\n"


def tree_hash(text):
    """What the gate logs for its tree: the first 16 hex digits of SHA-256 of the tracked file
    (every other file is the same in every repository of a configuration)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def trees(edits):
    """trees[a][r]: the tree hash agent a verifies in round r."""
    out = []
    for row in edits:
        text, per_round = base_text(), []
        for r, edit in enumerate(row):
            if edit:
                text += round_line(r)
            per_round.append(tree_hash(text))
        out.append(per_round)
    return out


def distinct_actions(tree_table):
    """Distinct (gate, tree) pairs: agents whose files are identical ask for the same action,
    whatever the agent or the round."""
    return len({(g, t) for row in tree_table for t in row for g in GATES})


def ideal_executed_seconds(tree_table):
    return sum(GATES[g] for g, _ in {(g, t) for row in tree_table for t in row for g in GATES})


# ---------------------------------------------------------------------------------------------
# Repositories.

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo, *args):
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, **GIT_ENV},
    )


def verify_yaml(endpoint, cache, pool, gates):
    """verify.yaml version 2: the local cache off, the grid's cache as configured, every gate
    remote on the configuration's pool. `gates` is a list of (id, command)."""
    q = json.dumps  # a JSON string is a YAML double-quoted scalar
    lines = [
        "version: 2",
        "options:",
        "  baseRef: main",
        "  skipInPrimaryCheckout: false",
        "  cache: off",
        f"  jobs: {max(JOBS, len(gates))}",
        "  remote:",
        f"    endpoint: {q(endpoint)}",
        f"    cache: {cache}",
        "    platform:",
        f"      pool: {q(pool)}",
        "gates:",
    ]
    for gate_id, command in gates:
        lines += [
            f"  - id: {gate_id}",
            f"    command: {q(command)}",
            "    run: remote",
            "    timeoutSec: 120",
        ]
    return "\n".join(lines) + "\n"


def gate_command(gate, seconds, salt, log_path):
    return f"sh {GATE_SCRIPT} {gate} {seconds} {salt} {log_path}"


def make_repo(path, config_text):
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / TRACKED).write_text(base_text())
    (path / GATE_SCRIPT).write_text(GATE_SH)
    # Version 2 is greenlight's own format, read only from its own config home.
    (path / ".greenlight").mkdir()
    (path / ".greenlight" / "verify.yaml").write_text(config_text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")


# ---------------------------------------------------------------------------------------------
# The executions log and verify's JSON.


def read_log(path, salt):
    """The executions of one salt, as dicts."""
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) != 8 or parts[0] != salt:
            continue
        rows.append(
            {
                "gate": parts[1],
                "id": parts[2],
                "start": float(parts[3]),
                "end": float(parts[4]),
                "tree": parts[5],
                "cargo_home": parts[6],
                "pwd": parts[7],
            }
        )
    return rows


def exec_id_in(text):
    """The execution id a gate printed (`exec=<id>`), from any text."""
    marker = text.find("exec=")
    if marker < 0:
        return None
    rest = text[marker + 5 :]
    end = 0
    while end < len(rest) and not rest[end].isspace() and rest[end] not in '"\\':
        end += 1
    return rest[:end] or None


# The verifies running now, so a stop request can end them (their remote executions included)
# instead of leaving them behind.
RUNNING = set()
RUNNING_LOCK = threading.RLock()
STOPPING = threading.Event()


def run_verify(binary, repo):
    """Runs `greenlight verify --format json` in repo; returns (report, seconds) or raises
    Unmeasured with what went wrong."""
    cmd = [binary, "verify", "--no-record", "--skip-work-evidence", "--format", "json"]
    t0 = time.monotonic()
    with RUNNING_LOCK:
        if STOPPING.is_set():
            raise Unmeasured("stopped")
        proc = subprocess.Popen(
            cmd, cwd=repo, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        RUNNING.add(proc)
    try:
        raw_out, raw_err = proc.communicate(timeout=VERIFY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise Unmeasured(f"verify in {repo} did not finish within {VERIFY_TIMEOUT_S} s")
    finally:
        with RUNNING_LOCK:
            RUNNING.discard(proc)
    seconds = time.monotonic() - t0
    code = proc.returncode
    stdout = raw_out.decode(errors="replace")
    stderr = raw_err.decode(errors="replace")
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        raise Unmeasured(
            f"verify in {repo} exited {code} without a JSON report\n"
            f"--- stdout\n{stdout[-2000:]}\n--- stderr\n{stderr[-2000:]}"
        )
    if code != 0:
        raise Unmeasured(
            f"verify in {repo} exited {code} (expected 0: every gate passes)\n"
            f"--- stdout\n{stdout[-3000:]}\n--- stderr\n{stderr[-2000:]}"
        )
    return report, seconds


def gate_requests(report, repo, wanted):
    """Per gate id in `wanted`: (source, cached, exec id) from verify's JSON. A gate that is
    missing, did not pass, or carries no `remote` object did not run remotely: Unmeasured."""
    by_id = {g.get("id"): g for g in report.get("gates", []) if isinstance(g, dict)}
    found = {}
    for gate_id in wanted:
        g = by_id.get(gate_id)
        if g is None:
            raise Unmeasured(f"verify in {repo} reported no gate '{gate_id}'")
        if g.get("verdict") != "PASS":
            raise Unmeasured(
                f"gate '{gate_id}' in {repo} is {g.get('verdict')}, not PASS: {json.dumps(g)[:1500]}"
            )
        remote = g.get("remote")
        if not isinstance(remote, dict):
            raise Unmeasured(
                f"gate '{gate_id}' in {repo} has no `remote` object in verify's JSON: it did not run remotely ({json.dumps(g)[:1500]})"
            )
        tails = " ".join(a.get("tail", "") for a in g.get("attempts", []) if isinstance(a, dict))
        found[gate_id] = {
            "source": remote.get("source"),
            "cached": g.get("cached"),
            "exec": exec_id_in(tails) or exec_id_in(json.dumps(remote)),
            "action": remote.get("action"),
        }
    return found


# ---------------------------------------------------------------------------------------------
# Workers.


class Workers:
    """N `greenlight worker` processes, each in a process group of its own, stopped together."""

    def __init__(self, binary, endpoint, pool, count, work):
        self.procs = []
        self.cache_dirs = []
        self.logs = []
        for i in range(count):
            cache_dir = work / f"worker-{i}"
            cache_dir.mkdir(parents=True)
            log_path = work / f"worker-{i}.log"
            cmd = [
                binary,
                "worker",
                "--grid",
                endpoint,
                "--capacity",
                "1",
                "--property",
                f"pool={pool}",
                "--cache-dir",
                str(cache_dir),
            ]
            with open(log_path, "wb") as out:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.procs.append(proc)
            self.cache_dirs.append(str(cache_dir))
            self.logs.append(log_path)

    def which(self, cargo_home):
        """The index of the worker whose cache dir holds cargo_home, or None."""
        for i, d in enumerate(self.cache_dirs):
            if cargo_home.startswith(d + "/"):
                return i
        return None

    def check_alive(self):
        for i, p in enumerate(self.procs):
            if p.poll() is not None:
                last = gist(self.logs[i])
                raise Unmeasured(
                    f"worker {i} exited with {p.returncode} ({last}); its log ends:\n{tail(self.logs[i])}"
                )

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + WORKER_STOP_GRACE_S
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(
                    f"worker pid {p.pid} ignored SIGTERM for {WORKER_STOP_GRACE_S} s; killing its group"
                )
            try:
                os.killpg(p.pid, signal.SIGKILL)  # anything left in its group
            except ProcessLookupError:
                pass
            p.wait()


def gist(path):
    """The line of a log most likely to say what went wrong: its first error, else its last."""
    lines = [l.strip() for l in tail(path, 200).splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower()]
    return (errors or lines or ["no output"])[0 if errors else -1]


def tail(path, lines=20):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"(unreadable: {e})"


# ---------------------------------------------------------------------------------------------
# One configuration.


def warm_up(args, cfg, workers, work, salt_base):
    """Runs N one-second gates at once until all N executions overlap: then all N workers are
    connected and taking leases, and the timed workload does not wait for a worker to start."""
    n = cfg["workers"]
    warm_log = work / "warmup.log"
    deadline = time.monotonic() + WARMUP_DEADLINE_S
    attempt = 0
    while True:
        attempt += 1
        salt = f"{salt_base}w{attempt}"
        repo = work / f"warmup-{attempt}"
        gates = [(f"w{i}", gate_command(f"w{i}", 1.0, salt, warm_log)) for i in range(n)]
        make_repo(repo, verify_yaml(args.endpoint, cfg["cache"], cfg["pool"], gates))
        workers.check_alive()
        report, _ = run_verify(args.bin, repo)
        gate_requests(report, repo, [g for g, _ in gates])
        rows = read_log(warm_log, salt)
        if len(rows) == n and max(r["start"] for r in rows) < min(r["end"] for r in rows):
            return
        if time.monotonic() > deadline:
            raise Unmeasured(
                f"{cfg['name']}: after {WARMUP_DEADLINE_S} s the {n} workers still did not run "
                f"{n} gates at once ({len(rows)} executions, not all overlapping); worker logs:\n"
                + "\n".join(f"--- worker {i}\n{tail(p)}" for i, p in enumerate(workers.logs))
            )
        time.sleep(0.5)


def run_configuration(args, cfg, edits, think, tree_table, work):
    work.mkdir(parents=True)
    exec_log = work / "executions.log"
    salt = f"s{os.getpid()}x{cfg['index']}x{random.SystemRandom().getrandbits(32):08x}"
    cfg["pool"] = f"bench-scale-out-{salt}"
    cfg["salt"] = salt
    gates = [(g, gate_command(g, s, salt, exec_log)) for g, s in GATES.items()]
    config_text = verify_yaml(args.endpoint, cfg["cache"], cfg["pool"], gates)
    repos = [work / f"agent-{a}" for a in range(args.agents)]
    for repo in repos:
        make_repo(repo, config_text)

    log(f"== {cfg['name']}: starting {cfg['workers']} worker(s) on pool {cfg['pool']}")
    workers = Workers(args.bin, args.endpoint, cfg["pool"], cfg["workers"], work)
    try:
        warm_up(args, cfg, workers, work, salt)
        requests, failures, spans = [], [], []
        lock = threading.Lock()

        def agent(a):
            try:
                for r in range(args.rounds):
                    time.sleep(think[a][r])
                    if edits[a][r]:
                        with open(repos[a] / TRACKED, "a") as f:
                            f.write(round_line(r))
                    t0, wall0 = time.monotonic(), time.time()
                    report, seconds = run_verify(args.bin, repos[a])
                    found = gate_requests(report, repos[a], GATES)
                    with lock:
                        spans.append((t0, t0 + seconds))
                        for g, fact in found.items():
                            requests.append(
                                {
                                    "agent": a,
                                    "round": r,
                                    "gate": g,
                                    "tree": tree_table[a][r],
                                    "verify_started": wall0,
                                    **fact,
                                }
                            )
            except Unmeasured as e:
                with lock:
                    failures.append(f"agent {a}: {e}")
            except Exception as e:  # a bug here must not hang the other threads' join
                with lock:
                    failures.append(f"agent {a}: {type(e).__name__}: {e}")

        log(f"== {cfg['name']}: {args.agents} agents x {args.rounds} rounds")
        t_start = time.monotonic()
        threads = [
            threading.Thread(target=agent, args=(a,), daemon=True) for a in range(args.agents)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        makespan = time.monotonic() - t_start
        workers.check_alive()
    finally:
        workers.stop()
    if failures:
        raise Unmeasured(f"{cfg['name']}: " + "\n".join(failures))
    # Every answer, for a look at what happened when the scratch directory is kept (--work).
    (work / "requests.json").write_text(json.dumps(requests, indent=1))
    return figures(cfg, requests, read_log(exec_log, salt), makespan, tree_table, repos, workers)


def figures(cfg, requests, executions, makespan, tree_table, repos, workers):
    """The row of one configuration, after checking that what was timed is what it claims."""
    name = cfg["name"]
    requested_trees = {(q["gate"], q["tree"]) for q in requests}
    for e in executions:
        if any(e["pwd"] == str(r) or e["pwd"].startswith(str(r) + "/") for r in repos):
            raise Unmeasured(
                f"{name}: gate {e['gate']} ran in an agent's repository ({e['pwd']}), not on a worker"
            )
        if (e["gate"], e["tree"]) not in requested_trees:
            raise Unmeasured(
                f"{name}: an execution of {e['gate']} saw tree {e['tree']}, which no agent asked for (input root not the agent's files?)"
            )
    logged = {e["id"]: e for e in executions}
    missing = [q for q in requests if q["exec"] not in logged]
    if missing:
        q = missing[0]
        raise Unmeasured(
            f"{name}: {len(missing)} answers name no logged execution of this configuration "
            f"(first: agent {q['agent']} round {q['round']} gate {q['gate']}, exec id {q['exec']!r})"
        )
    wrong_tree = [
        q
        for q in requests
        if logged[q["exec"]]["tree"] != q["tree"] or logged[q["exec"]]["gate"] != q["gate"]
    ]
    if wrong_tree:
        q = wrong_tree[0]
        raise Unmeasured(
            f"{name}: agent {q['agent']} round {q['round']} got the result of another action ({q['exec']})"
        )

    expected = len(tree_table) * len(tree_table[0]) * len(GATES)
    if len(requests) != expected:
        raise Unmeasured(f"{name}: {len(requests)} gate results, expected {expected}")
    # The driver's count of distinct actions is the cluster's, or the executions target would
    # be measured against the wrong number: identical files must mean one action digest.
    digests = {}
    for q in requests:
        digests.setdefault((q["gate"], q["tree"]), set()).add(q["action"])
    split = {k: v for k, v in digests.items() if len(v) != 1}
    if split or len({d for v in digests.values() for d in v}) != len(digests):
        example = next(iter(split.items()), None)
        raise Unmeasured(
            f"{name}: the action digests in verify's JSON do not follow the files: "
            f"{len(digests)} distinct (gate, tree) pairs, "
            f"{len({d for v in digests.values() for d in v})} distinct digests"
            + (
                f"; e.g. gate {example[0][0]} on tree {example[0][1]} has {len(example[1])}"
                if example
                else ""
            )
        )
    sources = {}
    for q in requests:
        sources[q["source"]] = sources.get(q["source"], 0) + 1
    executed_answers = [q for q in requests if q["source"] == "executed"]
    merged = len(executed_answers) - len({q["exec"] for q in executed_answers})
    busy = {}
    for e in executions:
        w = workers.which(e["cargo_home"])
        busy[w] = busy.get(w, 0.0) + (e["end"] - e["start"])
    return {
        "name": name,
        "workers": cfg["workers"],
        "cache": cfg["cache"],
        "salt": cfg["salt"],
        "pool": cfg["pool"],
        "requests": len(requests),
        "distinct_actions": distinct_actions(tree_table),
        "executions": len(executions),
        # Runs beyond one per distinct action: identical requests that BuildGrid did not merge.
        "executions_beyond_distinct": len(executions) - distinct_actions(tree_table),
        "action_cache_hits": sources.get("action-cache", 0),
        "executed_answers": len(executed_answers),
        "merged_in_flight": merged,
        "other_sources": {
            k: v for k, v in sources.items() if k not in ("action-cache", "executed")
        },
        "makespan_s": round(makespan, 3),
        "gate_seconds_executed": round(sum(e["end"] - e["start"] for e in executions), 2),
        "busy_seconds_per_worker": (
            [round(busy.get(i, 0.0), 2) for i in range(cfg["workers"])]
            if None not in busy
            else None
        ),
    }


# ---------------------------------------------------------------------------------------------
# Report.


def table(rows):
    head = [
        "configuration",
        "requests",
        "distinct",
        "executions",
        "AC hits",
        "merged",
        "makespan",
        "gate-s executed",
        "busy s per worker",
    ]
    body = []
    for r in rows:
        busy = r["busy_seconds_per_worker"]
        body.append(
            [
                r["name"],
                str(r["requests"]),
                str(r["distinct_actions"]),
                str(r["executions"]),
                str(r["action_cache_hits"]),
                str(r["merged_in_flight"]),
                f"{r['makespan_s']:.1f} s",
                f"{r['gate_seconds_executed']:.1f}",
                " ".join(f"{b:.1f}" for b in busy) if busy else "n/a",
            ]
        )
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def checks(rows):
    by = {(r["workers"], r["cache"]): r for r in rows}
    out = []
    one, four = by.get((1, "shared")), by.get((4, "shared"))
    if one and four:
        ratio = four["makespan_s"] / one["makespan_s"]
        out.append(
            {
                "check": "makespan(N=4, shared) <= 0.4 x makespan(N=1, shared)",
                "value": round(ratio, 3),
                "target": 0.4,
                "met": ratio <= 0.4,
                "line": f"makespan N=4 shared {four['makespan_s']:.1f} s vs N=1 shared {one['makespan_s']:.1f} s: {ratio:.2f}x (target <= 0.4x)",
            }
        )
    for r in rows:
        if r["cache"] != "shared":
            continue
        ratio = r["executions"] / r["distinct_actions"]
        out.append(
            {
                "check": f"{r['name']}: executions <= 1.1 x distinct actions",
                "value": round(ratio, 3),
                "target": 1.1,
                "met": ratio <= 1.1,
                "line": f"{r['name']}: {r['executions']} executions for {r['distinct_actions']} distinct actions: {ratio:.2f}x (target <= 1.1x)",
            }
        )
    for r in rows:
        if r["cache"] != "off":
            continue
        out.append(
            {
                "check": f"{r['name']}: every request executes (cache off)",
                "value": r["executions"],
                "target": r["requests"],
                "met": r["executions"] == r["requests"],
                "line": f"{r['name']}: {r['executions']} executions for {r['requests']} requests (cache off: every request executes)",
            }
        )
    return out


# ---------------------------------------------------------------------------------------------


def parse_configs(text):
    """`1:shared,4:shared,4:off` -> configuration dicts."""
    out = []
    for i, item in enumerate(text.split(",")):
        try:
            n, cache = item.split(":")
            n = int(n)
        except ValueError:
            raise ValueError(f"--configs: `{item}` is not WORKERS:shared|off (e.g. 4:shared)")
        if n < 1 or cache not in ("shared", "off"):
            raise ValueError(f"--configs: `{item}` needs WORKERS >= 1 and shared or off")
        out.append({"index": i, "workers": n, "cache": cache, "name": f"N={n} {cache}"})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", help="the greenlight binary (needed unless --plan-only)")
    p.add_argument("--endpoint", help="the grid, http://host:port (needed unless --plan-only)")
    p.add_argument("--work", help="an empty scratch directory (needed unless --plan-only)")
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument(
        "--think",
        type=float,
        default=1.5,
        help="most seconds an agent works before each verify (seeded, uniform)",
    )
    p.add_argument("--configs", default="1:shared,4:shared,4:off")
    p.add_argument("--json", help="also write the JSON document to this file")
    p.add_argument("--plan-only", action="store_true", help="print the workload and stop")
    p.add_argument("--check-args", action="store_true", help="check the options and stop")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, on_stop_signal)
    signal.signal(signal.SIGINT, on_stop_signal)
    if args.agents < 1 or args.rounds < 1 or args.think < 0:
        p.error("--agents and --rounds must be at least 1, --think at least 0")
    try:
        configs = parse_configs(args.configs)
    except ValueError as e:
        p.error(str(e))
    if args.check_args:
        return 0

    edits, think = plan(args.seed, args.agents, args.rounds, args.think)
    tree_table = trees(edits)
    requests = args.agents * args.rounds * len(GATES)
    distinct = distinct_actions(tree_table)
    log(
        f"seed {args.seed}: {args.agents} agents x {args.rounds} rounds, gates "
        + ", ".join(f"{g} {s} s" for g, s in GATES.items())
        + f"; each agent works 0-{args.think} s before each verify"
    )
    for a, row in enumerate(edits):
        log(
            f"  agent {a}: "
            + "".join("E" if e else "." for e in row)
            + "   work s: "
            + " ".join(f"{t:.2f}" for t in think[a])
        )
    log("  (E: the agent appends a line to its tracked file before that round's verify)")
    log(
        f"  {requests} gate requests, {distinct} distinct actions, "
        f"{ideal_executed_seconds(tree_table):.1f} gate-seconds if each distinct action runs once"
    )
    workload = {
        "seed": args.seed,
        "agents": args.agents,
        "rounds": args.rounds,
        "gates_s": GATES,
        "jobs": JOBS,
        "edits": ["".join("E" if e else "." for e in row) for row in edits],
        "think_max_s": args.think,
        "think_s": [[round(t, 3) for t in row] for row in think],
        "requests": requests,
        "distinct_actions": distinct,
        "gate_seconds_requested": round(args.agents * args.rounds * sum(GATES.values()), 2),
        "gate_seconds_distinct": round(ideal_executed_seconds(tree_table), 2),
        "critical_path_s": round(args.rounds * max(GATES.values()), 2),
        "longest_agent_work_s": round(max(sum(row) for row in think), 2),
    }
    if args.plan_only:
        print(json.dumps({"workload": workload}, indent=2))
        return 0
    if not (args.bin and args.endpoint and args.work):
        p.error("--bin, --endpoint and --work are needed to run the benchmark")
    work = Path(args.work)

    rows, unmeasured = [], []
    for cfg in configs:
        try:
            rows.append(
                run_configuration(
                    args, cfg, edits, think, tree_table, work / f"config-{cfg['index']}"
                )
            )
        except Unmeasured as e:
            log(f"NOT MEASURED {e}")
            unmeasured.append(str(e).splitlines()[0])

    note = (
        "the gates are `sleep`s: a 2-core machine cannot show CPU parallelism, so the makespan "
        "ratio shows scheduling across workers, not compute"
    )
    results = checks(rows)
    version = subprocess.run([args.bin, "--version"], capture_output=True, text=True).stdout.strip()
    print()
    print(
        f"== scale-out ({version}, {os.cpu_count()} CPUs, seed {args.seed}, "
        f"{args.agents} agents x {args.rounds} rounds x {len(GATES)} gates)"
    )
    print(table(rows))
    print(
        f"reference: {workload['gate_seconds_requested']:.1f} gate-s requested, "
        f"{workload['gate_seconds_distinct']:.1f} gate-s if each distinct action runs once, "
        f"critical path {workload['critical_path_s']:.1f} s of gates "
        f"+ {workload['longest_agent_work_s']:.1f} s of the busiest agent's work"
    )
    print(f"note: {note}")
    for c in results:
        print(f"{c['line']}: {'MET' if c['met'] else 'MISSED'}")
    for u in unmeasured:
        print(f"NOT MEASURED {u}")
    document = {
        "benchmark": "scale-out",
        "greenlight": version,
        "cpus": os.cpu_count(),
        "workload": workload,
        "configurations": rows,
        "checks": [{k: v for k, v in c.items() if k != "line"} for c in results],
        "not_measured": unmeasured,
        "note": note,
    }
    text = json.dumps(document, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n")
        print(f"JSON written to {args.json}")
    print(text)
    return 1 if unmeasured else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Stopped as stop:
        log(f"scale-out: stopped by {stop}")
        sys.exit(130 if str(stop) == "SIGINT" else 143)
