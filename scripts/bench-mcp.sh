#!/usr/bin/env bash
# The cost of verify through MCP against the CLI, and of paging a large gate output.
#
# (a) A warm `greenlight mcp` session answering `verify` on 50 gates of `true` (the median of 30
#     calls, timed from the request line written to the answer line read) against `greenlight
#     verify` on the same worktree as a process of its own (hyperfine median of 30). Both record
#     the run. Target: the MCP call <= 1.1 x the CLI process (a warm session pays no start-up).
# (b) A gate printing 50 MB (`seq`), paged through `evidence` 1 MiB at a time: greenlight's side
#     (request written to answer read) in MB/s, and against the time the gate itself took to
#     print it; the client's own JSON parse is reported apart. Target: greenlight serves the
#     whole output in less time than printing it took.
# Usage: scripts/bench-mcp.sh   (builds the release binary; needs hyperfine and python3)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
command -v hyperfine >/dev/null || { echo "bench-mcp: hyperfine is missing (apt-get install -y hyperfine)" >&2; exit 1; }
cargo build --release -p greenlight --manifest-path "$here/Cargo.toml" >/dev/null
bin="${CARGO_TARGET_DIR:-$here/target}/release/greenlight"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git -C "$work" init -q -b main repo
git -C "$work/repo" -c user.name=b -c user.email=b@b commit -q --allow-empty -m base
git -C "$work/repo" worktree add -q -b work "$work/wt"
echo work > "$work/wt/file"
git -C "$work/wt" add file
git -C "$work/wt" -c user.name=b -c user.email=b@b commit -q -m work
mkdir -p "$work/wt/.commandmate"
{
  echo "version: 1"
  echo "gates:"
  for i in $(seq 1 50); do printf '  - id: g%s\n    command: "true"\n' "$i"; done
  echo "options:"
  echo "  baseRef: main"
} > "$work/wt/.commandmate/verify.yaml"
git -C "$work/repo" worktree add -q -b big "$work/big"
mkdir -p "$work/big/.commandmate"
printf 'version: 1\ngates:\n  - id: big\n    command: seq 1 6700000\n    timeoutSec: 600\noptions:\n  baseRef: main\n' \
  > "$work/big/.commandmate/verify.yaml"

export CM_VERIFY_LOCK_ROOT="$work/locks"
export GREENLIGHT_STATE="$work/state/state.db"
unset GREENLIGHT_NO_RECORD

hyperfine --warmup 3 --runs 30 -N --export-json "$work/cli.json" \
  -n cli "$bin verify --cwd $work/wt --skip-work-evidence" >/dev/null

python3 - "$bin" "$work" <<'PY'
import json, statistics, subprocess, sys, time
bin, work = sys.argv[1], sys.argv[2]
server = subprocess.Popen([bin, "mcp"], cwd=f"{work}/wt", stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, bufsize=1)
next_id = 0
def call(method, params):
    global next_id
    next_id += 1
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}) + "\n")
    server.stdin.flush()
    while True:
        answer = json.loads(server.stdout.readline())
        if answer.get("id") == next_id:
            if "error" in answer:
                sys.exit(f"bench-mcp: {method}: {answer['error']}")
            return answer["result"]
call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"}})
server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
def verify(cwd):
    t = time.perf_counter()
    result = call("tools/call", {"name": "verify", "arguments": {"cwd": cwd, "skip_work_evidence": True}})
    return time.perf_counter() - t, result["structuredContent"]
for _ in range(3):
    verify(f"{work}/wt")
times = []
for _ in range(30):
    took, answer = verify(f"{work}/wt")
    assert answer["result"] == "passed", answer
    times.append(took)
mcp = statistics.median(times)
cli = json.load(open(f"{work}/cli.json"))["results"][0]["median"]
print(f"(a) verify, 50 gates: MCP call median {mcp*1000:.1f} ms, CLI process median {cli*1000:.1f} ms, "
      f"ratio {mcp/cli:.2f}x, target <= 1.1x: {'MET' if mcp <= 1.1 * cli else 'MISSED'}")

took, answer = verify(f"{work}/big")
gate = answer["gates"][0]
printed_s = gate["duration_ms"] / 1000
# greenlight's side of a page is from the request written to the answer's last byte read; the
# client's JSON parse of the answer (which carries the page twice, as text and as structured
# content, as MCP asks) is timed apart.
serving = parsing = 0.0
offset, total = 0, 0
while True:
    next_id += 1
    t = time.perf_counter()
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id, "method": "tools/call", "params": {
        "name": "evidence", "arguments": {"run_id": answer["run_id"], "gate": "big",
                                          "offset": offset, "limit": 1 << 20}}}) + "\n")
    server.stdin.flush()
    line = server.stdout.readline()
    t2 = time.perf_counter()
    page = json.loads(line)["result"]["structuredContent"]
    serving += t2 - t
    parsing += time.perf_counter() - t2
    total += len(page["text"].encode())
    if page["next_offset"] is None:
        break
    offset = page["next_offset"]
assert total == gate["output_bytes"], (total, gate["output_bytes"])
print(f"(b) evidence: {total/1e6:.1f} MB paged 1 MiB at a time; greenlight's side {serving:.2f} s "
      f"({total/1e6/serving:.0f} MB/s), the client's JSON parse {parsing:.2f} s more; the gate printed it in "
      f"{printed_s:.2f} s; ratio (greenlight's side / printing) {serving/printed_s:.2f}x, target < 1x: "
      f"{'MET' if serving < printed_s else 'MISSED'}")
server.stdin.close()
server.wait(timeout=30)
PY
