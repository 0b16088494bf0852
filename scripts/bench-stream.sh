#!/usr/bin/env bash
# SSE load benchmark of `greenlight serve` (release build), side by side with nchan (nginx's
# pub/sub module) on the same workload, in one run:
#   - greenlight at 100 and at 1,000 watchers of one goal, FRAMES frames committed at RATE/s by a
#     separate writer process through the store (it pokes the server's wake-up socket after each
#     commit), every 10th watcher dropped once mid-stream and resumed by cursor; on each backend:
#     a SQLite file, and PostgreSQL (a fresh schema; the server LISTENs, each commit NOTIFYs);
#   - nchan, where nginx and libnginx-mod-nchan are installed, at 100 and 1,000 watchers of one
#     channel: the same watcher client, the writer publishing by HTTP POST at the same rate;
#   - the durable floor: the same writer committing to a SQLite file with the same durability
#     and a reader woken by the same socket, reading each frame back from the file: with no
#     HTTP and no watchers ("floor"), and writing each frame's SSE bytes to each of 100 watchers'
#     sockets in turn, the same load client watching it as it watches serve ("floor-100", and
#     "floor-pg-100" on PostgreSQL, woken by its LISTEN: the least a server that persists first
#     must do at that fan-out on each backend).
# Latency is receive time minus the microsecond timestamp the writer puts in each frame just
# before its commit (or POST); the load client also prints, per frame, the first watcher's
# latency (what a frame cost before the fan-out's spread). Prints p50/p99 for each, the
# servers' peak RSS (VmHWM), and MET/MISSED for the targets: 100-watcher p50 <= 2 x nchan's
# (or, where durability costs more than that, <= 1.5 x its backend's floor at 100 watchers),
# 1,000-watcher p99 < 50 ms, server RSS < 64 MiB. Exits non-zero only on a correctness failure
# of greenlight's: a gap, a duplicate, an incomplete watcher.
#
# usage: scripts/bench-stream.sh [FRAMES [RATE]]   (default 2000 200)
#        BENCH_STREAM_AB=N scripts/bench-stream.sh [FRAMES [RATE]]: only the 100-watcher runs of
#        greenlight (SQLite), floor-100 and nchan, in N alternating rounds
# env:   GREENLIGHT_TEST_PG  a PostgreSQL URL whose user may create schemas; unset, the script
#                            starts the services of scripts/ci/remote-services.sh and stops them
set -euo pipefail

frames=${1:-2000}
rate=${2:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# One descriptor per watcher on each side, plus the store and the pipes.
need=$((1000 * 2 + 256))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    ulimit -n "$need" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    if [ "$(ulimit -n)" -lt "$need" ]; then
        echo "bench-stream: open files limit $(ulimit -n) is below the $need this run needs; raise the hard limit (ulimit -Hn)" >&2
        exit 1
    fi
fi

cargo build --release --quiet -p greenlight -p greenlight-testkit -p greenlight-server \
    --bin greenlight --bin greenlight-stream-load --example wake_floor
bin="${CARGO_TARGET_DIR:-$root/target}/release"

work=$(mktemp -d "${TMPDIR:-/tmp}/greenlight-bench-stream.XXXXXX")
server=
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    bench_services_stop
    rm -rf "$work"
}
trap cleanup EXIT

psql_bin="${GREENLIGHT_PG_BIN:-/usr/lib/postgresql/15/bin}/psql"
[ -x "$psql_bin" ] || psql_bin=$(command -v psql) ||
    { echo "bench-stream: psql is missing: apt-get install postgresql" >&2; exit 1; }
bench_services_start GREENLIGHT_TEST_PG PostgreSQL || exit 1

# fresh_pg_store NAME: a schema of its own on the test server, as a store URL.
fresh_pg_store() {
    local schema="stream_$1_$$_$RANDOM"
    "$psql_bin" "$GREENLIGHT_TEST_PG" -XAtq -v ON_ERROR_STOP=1 -c "CREATE SCHEMA $schema" >&2
    case $GREENLIGHT_TEST_PG in
        *\?*) echo "$GREENLIGHT_TEST_PG&options=-csearch_path%3D$schema" ;;
        *) echo "$GREENLIGHT_TEST_PG?options=-csearch_path%3D$schema" ;;
    esac
}

# Server and client on separate cores when taskset is there, so one does not starve the other.
pin_server=() pin_client=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    pin_server=(taskset -c 0) pin_client=(taskset -c 1)
fi

status=0
declare -A p50 p99 rss

# result NAME FILE: reads the load client's `result` line of FILE into p50/p99/rss[NAME].
result() {
    local line
    # A run that printed no result (it crashed) leaves its figures empty, not the script ended.
    line=$(grep '^result ' "$2" | tail -n 1 || true)
    p50[$1]=$(sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<<"$line")
    p99[$1]=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<<"$line")
    rss[$1]=$(sed -n 's/.*rss_kib=\([0-9]*\).*/\1/p' <<<"$line")
}

# greenlight BACKEND N: serve a fresh store (BACKEND sqlite: a file; postgres: a schema; floor:
# a file served by the fan-out floor instead of greenlight), N watchers, the writer; stop the
# server.
greenlight() {
    local backend=$1 n=$2 name dir addr='' store
    case $backend in
        sqlite) name="greenlight-$n" ;;
        postgres) name="postgres-$n" ;;
        floor) name="floor-$n" ;;
        floor-pg) name="floor-pg-$n" ;;
    esac
    dir="$work/$name"
    rm -rf "$dir"
    mkdir -p "$dir"
    case $backend in
        postgres | floor-pg) store=$(fresh_pg_store "$n") ;;
        *) store="$dir/state.db" ;;
    esac
    if [ "${backend%-pg}" = floor ]; then
        "${pin_server[@]}" "$bin/examples/wake_floor" serve --listen 127.0.0.1:0 --state "$store" 2>"$dir/serve.log" &
    else
        "${pin_server[@]}" "$bin/greenlight" serve --listen 127.0.0.1:0 --state "$store" 2>"$dir/serve.log" &
    fi
    server=$!
    for _ in $(seq 1 100); do
        addr=$(sed -n 's|.*serving on http://\([^/]*\)/.*|\1|p' "$dir/serve.log")
        [ -n "$addr" ] && break
        kill -0 "$server" 2>/dev/null || { cat "$dir/serve.log" >&2; exit 1; }
        sleep 0.1
    done
    [ -n "$addr" ] || { echo "bench-stream: the server did not start:" >&2; cat "$dir/serve.log" >&2; exit 1; }
    echo "== $([ "${backend%-pg}" = floor ] && echo "the fan-out floor ($backend)" || echo "greenlight serve ($backend)") on $addr (pid $server): $n watchers x $frames frames at $rate/s"
    local p99_target=()
    [ "$n" -ge 1000 ] && p99_target=(--p99-ms 50)
    "${pin_client[@]}" "$bin/greenlight-stream-load" --addr "$addr" --state "$store" \
        --subscribers "$n" --frames "$frames" --rate "$rate" --drop-every 10 \
        --server-pid "$server" "${p99_target[@]}" --rss-mib 64 | tee "$dir/load.out" || status=1
    result "$name" "$dir/load.out"
    kill -TERM "$server"
    if [ "${backend%-pg}" = floor ]; then
        # The floor has no clean stop of its own: SIGTERM ends it, its socket is in $work.
        wait "$server" 2>/dev/null || true
        server=
        return
    fi
    wait "$server" || { echo "bench-stream: the server did not exit 0 on SIGTERM" >&2; status=1; }
    server=
    if [ -e "$dir/state.db-wake" ]; then
        echo "bench-stream: the server left its wake-up directory behind" >&2
        status=1
    fi
}

nchan_module=/usr/lib/nginx/modules/ngx_nchan_module.so
have_nchan() { command -v nginx >/dev/null && [ -f "$nchan_module" ]; }

# nchan N: nginx with nchan on a free port, N watchers of channel 1, the POST writer.
nchan() {
    local n=$1 dir="$work/nchan-$1" port worker=
    mkdir -p "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    {
        echo "load_module $nchan_module;"
        [ "$(id -u)" = 0 ] && echo "user root;"
        echo "worker_processes 1; worker_rlimit_nofile 8192; daemon off;"
        echo "pid $dir/nginx.pid; error_log $dir/error.log warn;"
        echo "events { worker_connections 8192; }"
        echo "http {"
        echo "  access_log off;"
        for t in client_body proxy fastcgi uwsgi scgi; do echo "  ${t}_temp_path $dir/$t;"; done
        echo "  nchan_shared_memory_size 256m;"
        echo "  server {"
        echo "    listen 127.0.0.1:$port;"
        # Every message kept for the whole run, so a dropped watcher resumes by Last-Event-ID.
        echo "    location ~ ^/pub/(\\w+)\$ { nchan_publisher; nchan_channel_id \$1;"
        echo "      nchan_message_buffer_length $((frames + 10)); nchan_message_timeout 1h; }"
        echo "    location ~ ^/sub/(\\w+)\$ { nchan_subscriber eventsource; nchan_channel_id \$1; }"
        echo "  }"
        echo "}"
    } >"$dir/nginx.conf"
    "${pin_server[@]}" nginx -p "$dir" -c "$dir/nginx.conf" 2>"$dir/nginx.log" &
    server=$!
    for _ in $(seq 1 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),1)" 2>/dev/null && break
        kill -0 "$server" 2>/dev/null || { cat "$dir/nginx.log" "$dir/error.log" >&2 2>/dev/null; return 1; }
        sleep 0.1
    done
    worker=$(pgrep -P "$server" | head -n 1 || true)
    echo "== nchan (nginx $(nginx -v 2>&1 | sed 's|.*/||')) on 127.0.0.1:$port (worker pid ${worker:-?}): $n watchers x $frames messages at $rate/s"
    # nchan's own misses (a watcher left behind) are reported, not a failure of this benchmark.
    "${pin_client[@]}" "$bin/greenlight-stream-load" --addr "127.0.0.1:$port" --nchan \
        --subscribers "$n" --frames "$frames" --rate "$rate" --drop-every 10 \
        ${worker:+--server-pid "$worker"} | tee "$dir/load.out" ||
        echo "bench-stream: nchan did not deliver every message to every watcher in time (see above)"
    result "nchan-$n" "$dir/load.out"
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
}

# BENCH_STREAM_AB=N: instead of the whole run, N rounds of the 100-watcher runs that decide the
# low fan-out target, alternating (greenlight on SQLite, its floor at 100 watchers, nchan), a
# line each: the p50 and the first watcher's p50 (what is left is the fan-out's spread).
if [ -n "${BENCH_STREAM_AB:-}" ]; then
    ab_line() {
        echo "round $1 $2: p50 ${p50[$3]:-?} ms, first watcher p50 $(sed -n 's/.*first watcher of each frame: p50 \([0-9.]*\) ms.*/\1/p' "$4") ms"
    }
    for round in $(seq 1 "$BENCH_STREAM_AB"); do
        greenlight sqlite 100 >"$work/ab.log"
        ab_line "$round" greenlight greenlight-100 "$work/greenlight-100/load.out"
        greenlight floor 100 >"$work/ab.log"
        ab_line "$round" floor-100 floor-100 "$work/floor-100/load.out"
        if have_nchan; then
            nchan 100 >"$work/ab.log" || echo "bench-stream: nchan did not start"
            ab_line "$round" nchan nchan-100 "$work/nchan-100/load.out"
        fi
    done
    exit "$status"
fi

greenlight sqlite 100
greenlight sqlite 1000
greenlight postgres 100
greenlight postgres 1000
if have_nchan; then
    nchan 100 || echo "bench-stream: nchan did not start; its figures are missing"
    nchan 1000 || echo "bench-stream: nchan did not start; its figures are missing"
else
    echo "== nchan not installed (apt-get install nginx libnginx-mod-nchan): no side-by-side figures"
fi
echo "== floor: the same writer, a reader woken by the same socket, no HTTP, no fan-out"
mkdir -p "$work/floor"
"$bin/examples/wake_floor" --state "$work/floor/state.db" --frames "$frames" --rate "$rate" |
    tee "$work/floor/out" || { echo "bench-stream: the floor run failed" >&2; status=1; }
result floor "$work/floor/out"
# The durable floor at 100 watchers, on each backend: that reader writing each frame to every
# watcher's socket.
greenlight floor 100
greenlight floor-pg 100

mark() { if awk "BEGIN { exit !($1) }"; then echo MET; else echo MISSED; fi; }
echo
echo "== summary ($frames frames at $rate/s; latency in ms)"
printf '%-18s %9s %9s %10s\n' "" p50 p99 "peak RSS"
for name in greenlight-100 greenlight-1000 postgres-100 postgres-1000 nchan-100 nchan-1000 floor floor-100 floor-pg-100; do
    [ -n "${p50[$name]:-}" ] || continue
    kib=${rss[$name]:-0}
    printf '%-18s %9s %9s %10s\n' "$name" "${p50[$name]}" "${p99[$name]}" \
        "$( ((kib > 0)) && awk "BEGIN { printf \"%.1f MiB\", $kib / 1024 }" || echo -)"
done
for backend in greenlight postgres; do
    g100=${p50[$backend-100]:-1e9}
    label=$([ "$backend" = greenlight ] && echo SQLite || echo PostgreSQL)
    # The 100-watcher target: 2 x nchan's p50; where making each frame durable first already
    # costs more than that (the durable floor at 100 watchers is above 2 x nchan's), 1.5 x that
    # floor instead.
    n100=${p50[nchan-100]:-}
    f100=$([ "$backend" = greenlight ] && echo "${p50[floor-100]:-}" || echo "${p50[floor-pg-100]:-}")
    if [ -n "$n100" ]; then
        echo "$label: 100-watcher p50 ${g100} ms = $(awk "BEGIN { printf \"%.2f\", $g100 / $n100 }") x nchan's (${n100} ms)"
    fi
    if [ -n "$f100" ]; then
        echo "$label: 100-watcher p50 = $(awk "BEGIN { printf \"%.2f\", $g100 / $f100 }") x the durable floor's at 100 watchers (${f100} ms)"
    fi
    if [ -n "$n100" ] && [ -n "$f100" ] && awk "BEGIN { exit !($f100 > 2 * $n100) }"; then
        echo "$label: target 100-watcher p50 <= 1.5 x the durable floor's (the floor is $(awk "BEGIN { printf \"%.2f\", $f100 / $n100 }") x nchan's, above the 2 x target): $(mark "$g100 <= 1.5 * $f100")"
    elif [ -n "$n100" ]; then
        echo "$label: target 100-watcher p50 <= 2 x nchan's: $(mark "$g100 <= 2 * $n100")"
    fi
    echo "$label: target 1,000-watcher p99 < 50 ms: $(mark "${p99[$backend-1000]:-1e9} < 50")"
    peak=$(( ${rss[$backend-100]:-0} > ${rss[$backend-1000]:-0} ? ${rss[$backend-100]:-0} : ${rss[$backend-1000]:-0} ))
    echo "$label: target server RSS < 64 MiB: $(mark "$peak > 0 && $peak < 64 * 1024")"
done
exit "$status"
