#!/usr/bin/env bash
# SSE load benchmark of `greenlight serve` (release build): SUBSCRIBERS watchers of one goal,
# FRAMES frames written at RATE/s by a separate writer process through the store, every 10th
# watcher dropped once mid-stream and resumed by cursor. Prints p50/p99/max delivery latency
# (receive time minus the microsecond timestamp the writer puts in each frame just before its
# commit) and the server's peak RSS (VmHWM). Fails on any gap, duplicate or incomplete
# watcher; prints MET/MISSED for the targets p99 < 50 ms and RSS < 64 MiB.
#
# usage: scripts/bench-stream.sh [SUBSCRIBERS [FRAMES [RATE]]]   (default 1000 10000 200)
set -euo pipefail

subscribers=${1:-1000}
frames=${2:-10000}
rate=${3:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# One descriptor per watcher on each side, plus the store and the pipes.
need=$((subscribers * 2 + 256))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    ulimit -n "$need" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    if [ "$(ulimit -n)" -lt "$need" ]; then
        echo "bench-stream: open files limit $(ulimit -n) is below the $need this run needs; raise the hard limit (ulimit -Hn)" >&2
        exit 1
    fi
fi

cargo build --release --quiet -p greenlight -p greenlight-testkit --bin greenlight --bin greenlight-stream-load
bin="${CARGO_TARGET_DIR:-$root/target}/release"

work=$(mktemp -d "${TMPDIR:-/tmp}/greenlight-bench-stream.XXXXXX")
server=
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# Server and client on separate cores when taskset is there, so one does not starve the other.
pin_server=() pin_client=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    pin_server=(taskset -c 0) pin_client=(taskset -c 1)
fi

"${pin_server[@]}" "$bin/greenlight" serve --listen 127.0.0.1:0 --state "$work/state.db" 2>"$work/serve.log" &
server=$!
addr=
for _ in $(seq 1 100); do
    addr=$(sed -n 's|.*serving on http://\([^/]*\)/.*|\1|p' "$work/serve.log")
    [ -n "$addr" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$addr" ] || { echo "bench-stream: the server did not start:" >&2; cat "$work/serve.log" >&2; exit 1; }

echo "bench-stream: greenlight serve on $addr (pid $server), $subscribers subscribers x $frames frames at $rate/s"
status=0
"${pin_client[@]}" "$bin/greenlight-stream-load" --addr "$addr" --state "$work/state.db" \
    --subscribers "$subscribers" --frames "$frames" --rate "$rate" --drop-every 10 \
    --server-pid "$server" --p99-ms 50 --rss-mib 64 || status=$?

kill -TERM "$server"
wait "$server" || { echo "bench-stream: the server did not exit 0 on SIGTERM" >&2; status=1; }
server=
exit "$status"
