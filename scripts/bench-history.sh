#!/usr/bin/env bash
# How `greenlight history` and `GET /api/goals` scale with the state file: both at 1k, 30k and
# 300k rows, in one run.
#
# Each size is its own state file, made by a real `greenlight verify` (so the schema is the
# store's own, migrated by the binary under test) and then filled with SQL inserts: N gate rows
# (10 gates a run, two worktrees of one repository, decided over 30 days — the runs kept) and
# N goals (created over 60 days, the newest 20 active, the rest done, so the older ones are
# archived), each goal with its gate and its first frame.
#   history:    hyperfine median of 15 `greenlight history -C <worktree>` (the runs table and
#               every gate's figures over its newest 100 runs).
#   /api/goals: median of 50 GETs of the first page from a running `greenlight serve`.
# Target: at 300k rows each takes at most 3 x its time at 1k (the reads cost their page, not the
# history kept). The script exits 1 when a target is missed.
# Usage: scripts/bench-history.sh   (builds the release binary; needs hyperfine and python3)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
command -v hyperfine >/dev/null || { echo "bench-history: hyperfine is missing (apt-get install -y hyperfine)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench-history: python3 is missing" >&2; exit 1; }
cargo build --release -p greenlight --manifest-path "$here/Cargo.toml" >/dev/null
bin="${CARGO_TARGET_DIR:-$here/target}/release/greenlight"
work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

git -C "$work" init -q -b main repo
git -C "$work/repo" -c user.name=b -c user.email=b@b commit -q --allow-empty -m base
git -C "$work/repo" worktree add -q -b work "$work/wt"
mkdir -p "$work/wt/.commandmate"
printf 'version: 1\ngates:\n  - id: g0\n    command: "true"\noptions:\n  baseRef: main\n' \
  > "$work/wt/.commandmate/verify.yaml"
export CM_VERIFY_LOCK_ROOT="$work/locks"
unset GREENLIGHT_NO_RECORD GREENLIGHT_STATE

sizes=(1000 30000 300000)
for n in "${sizes[@]}"; do
  db="$work/state-$n.db"
  # The schema comes from the binary itself: a recorded run creates and migrates the file.
  "$bin" verify --cwd "$work/wt" --state "$db" --skip-work-evidence >/dev/null
  python3 - "$db" "$n" "$work/wt" "$work/repo/.git" <<'PY'
import json, os, sqlite3, sys, time
db, n = sys.argv[1], int(sys.argv[2])
# Canonical, as the recorder keeps them.
wt, repo = os.path.realpath(sys.argv[3]).encode(), os.path.realpath(sys.argv[4]).encode()
other = wt + b"-other"
now = int(time.time() * 1000)
day = 24 * 3600 * 1000
c = sqlite3.connect(db)
c.execute("PRAGMA synchronous = OFF")
# Gate rows: 10 gates a run, runs spread over the 30 days history keeps.
runs = n // 10
span = 30 * day
rows = []
for r in range(runs):
    at = now - span + (span * r) // max(runs, 1)
    where = wt if r % 2 == 0 else other
    cur = c.execute(
        "INSERT INTO runs (kind, worktree, gates, result, exit_code, started_at, ended_at, repository) "
        "VALUES ('verify', ?, 10, 'passed', 0, ?, ?, ?)", (where, at, at + 500, repo))
    run = cur.lastrowid
    for g in range(10):
        verdict = "fail" if (r + g) % 17 == 0 else "pass"
        rows.append((run, f"gate-{g}", verdict, 0 if verdict == "pass" else 1,
                     10 + (r * 7 + g * 13) % 990, at + g, repo, where))
c.executemany(
    "INSERT INTO run_gates (run_id, gate, verdict, exit_code, duration_ms, attempts, cached, "
    "decided_at, repository, worktree) VALUES (?, ?, ?, ?, ?, 1, 0, ?, ?, ?)", rows)
# Goals: created over 60 days, each changed an hour after it was created; the newest 20 are
# active (one live goal per worktree), the rest done.
gspan = 60 * day
goals, gates, frames = [], [], []
first = c.execute("SELECT COALESCE(MAX(id), 0) FROM goals").fetchone()[0] + 1
for i in range(n):
    gid = first + i
    created = now - gspan + (gspan * i) // n
    live = i >= n - 20
    goals.append((gid, f"/bench/wt{gid}".encode(), f"goal {gid}", "active" if live else "done",
                   created, min(created + 3600 * 1000, now)))
    gates.append((gid, created))
    frames.append((str(gid), json.dumps({"type": "goal-state", "state": "active"}), created))
c.executemany(
    "INSERT INTO goals (id, worktree, text, state, agent_family, max_turns, retries, "
    "gate_timeout_sec, created_at, updated_at) VALUES (?, ?, ?, ?, 'command', 20, 3, 300, ?, ?)", goals)
c.executemany("INSERT INTO gates (goal_id, position, command, created_at) VALUES (?, 0, 'true', ?)", gates)
c.executemany("INSERT INTO frames (stream, seq, kind, body, at) VALUES (?, 1, 'goal-state', ?, ?)", frames)
c.commit()
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
PY
done

# What is timed must be the real answer: every gate, each over its newest 100 runs.
for n in "${sizes[@]}"; do
  "$bin" history --json -C "$work/wt" --state "$work/state-$n.db" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
gates = {g["gate"]: g["samples"] for g in doc["gates"] if g["gate"].startswith("gate-")}
assert len(gates) == 10 and set(gates.values()) == {100}, f"bench-history: history read {gates}"
'
done

# history: one hyperfine run over the three files.
commands=()
for n in "${sizes[@]}"; do commands+=(-n "history-$n" "$bin history -C $work/wt --state $work/state-$n.db"); done
hyperfine --warmup 3 --runs 15 -N --export-json "$work/history.json" "${commands[@]}" >/dev/null

# /api/goals: a server per file, 50 timed GETs of the first page each.
for n in "${sizes[@]}"; do
  "$bin" serve --listen 127.0.0.1:0 --state "$work/state-$n.db" 2>"$work/serve-$n.log" &
  server=$!
  for _ in $(seq 1 100); do grep -q "serving on" "$work/serve-$n.log" && break; sleep 0.05; done
  url=$(grep -o 'http://[^ ]*' "$work/serve-$n.log" | head -1)
  [ -n "$url" ] || { echo "bench-history: serve did not start:" >&2; cat "$work/serve-$n.log" >&2; exit 1; }
  python3 - "$url" "$work/goals-$n.json" <<'PY'
import json, statistics, sys, time, urllib.request
url, out = sys.argv[1], sys.argv[2]
def get():
    t = time.perf_counter()
    with urllib.request.urlopen(url + "api/goals") as r:
        body = r.read()
    return time.perf_counter() - t, len(body)
for _ in range(5):
    get()
samples = [get() for _ in range(50)]
json.dump({"median": statistics.median(s[0] for s in samples), "bytes": samples[-1][1]}, open(out, "w"))
PY
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
done

python3 - "$work" "${sizes[@]}" <<'PY'
import json, sys
work, sizes = sys.argv[1], sys.argv[2:]
history = {r["command"]: r["median"] for r in json.load(open(f"{work}/history.json"))["results"]}
ok = True
def report(what, times, extra=""):
    global ok
    ratio = times[-1] / times[0]
    line = ", ".join(f"{n} rows {t*1000:.1f} ms" for n, t in zip(sizes, times))
    hit = ratio <= 3.0
    ok = ok and hit
    print(f"{what}: {line}; {sizes[-1]} / {sizes[0]} = {ratio:.2f} x (target <= 3) {'ok' if hit else 'MISSED'}{extra}")
report("history", [history[f"history-{n}"] for n in sizes])
goals = [json.load(open(f"{work}/goals-{n}.json")) for n in sizes]
report("/api/goals", [g["median"] for g in goals],
       f"; first page {goals[-1]['bytes']} bytes at {sizes[-1]} goals")
sys.exit(0 if ok else 1)
PY
