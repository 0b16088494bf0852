#!/usr/bin/env bash
# How the goal queue spreads work over worker processes, measured with real `greenlight goal
# worker`s on a real PostgreSQL (scripts/bench/goal_workers.py drives it).
#
# Makespan: for each worker count (1, 2, 4; fresh schema each, so every run starts from an empty
# queue), 200 goals are submitted with `greenlight goal submit`, each of one scripted agent turn
# of fixed length (the agent sleeps 0.2 s, makes the gate `test -f done.txt` pass and replies),
# then N workers of capacity 1 start with --until-empty. The makespan runs from the workers'
# start to the last item's end as the store recorded it. Target:
#   makespan(4 workers) <= 0.3 x makespan(1 worker)
# The turns are sleeps: a 2-core machine cannot show CPU parallelism, so the ratio shows how
# well claims, worktree preparation and leases scale across workers, not compute.
#
# Claim latency: 4 idle workers (waiting on LISTEN, not polling), 60 goals submitted one at a
# time 0.1 s apart; per goal, from its submitted_at to its first dispatch's started_at, both from
# the store; p50, p99 and max.
#
# What is timed is checked to be what it claims: every item ended "done" after exactly one claim,
# and the agents' own records show one turn per goal, each in a worktree of its own. A run that
# did anything else is NOT MEASURED (exit 1 after the summary); a missed target prints MISSED and
# exits 0, like the other bench scripts.
#
# Usage: scripts/bench-goal-workers.sh [--goals N] [--turn SECONDS] [--workers 1,2,4]
#                                      [--latency-goals N] [--latency-gap SECONDS] [--json FILE]
#        The JSON document is the last thing on stdout, and also written to FILE with --json.
# Env:   GREENLIGHT_BIN      a prebuilt greenlight binary (default: built here, release)
#        GREENLIGHT_TEST_PG  a PostgreSQL URL whose user may create schemas; unset, the script
#                            starts the services of scripts/ci/remote-services.sh and stops them
# Needs: git, python3, psql (PostgreSQL 15's, or GREENLIGHT_PG_BIN's), and for the services what scripts/ci/remote-services.sh needs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

for tool in git python3; do
    command -v "$tool" >/dev/null || { echo "bench-goal-workers: $tool is missing" >&2; exit 1; }
done
# The results are read back with PostgreSQL's own client, the one remote-services.sh uses.
PSQL="${GREENLIGHT_PG_BIN:-/usr/lib/postgresql/15/bin}/psql"
[[ -x "$PSQL" ]] || PSQL="$(command -v psql)" ||
    { echo "bench-goal-workers: psql is missing: apt-get install postgresql" >&2; exit 1; }
# Bad options fail here, before anything is built or started.
python3 "$ROOT/scripts/bench/goal_workers.py" --check-args "$@" || exit 2

if [[ -z "${GREENLIGHT_BIN:-}" ]]; then
    cargo build --quiet --release -p greenlight --manifest-path "$ROOT/Cargo.toml"
    GREENLIGHT_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/greenlight"
fi
[[ -x "$GREENLIGHT_BIN" ]] || { echo "no executable at GREENLIGHT_BIN=$GREENLIGHT_BIN" >&2; exit 1; }
BIN="$(realpath "$GREENLIGHT_BIN")"

WORK="$(mktemp -d)"
SERVICES="" # the services directory when this script started them
DRIVER_PID=""
# shellcheck disable=SC2329 # run by the EXIT trap
cleanup() {
    if [[ -n "$DRIVER_PID" ]]; then
        kill -TERM "$DRIVER_PID" 2>/dev/null || true
        wait "$DRIVER_PID" 2>/dev/null || true
    fi
    if [[ -n "$SERVICES" ]]; then
        "$ROOT/scripts/ci/remote-services.sh" stop "$SERVICES" || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A state directory of this run's own, never the user's.
export XDG_CACHE_HOME="$WORK/xdg-cache" XDG_STATE_HOME="$WORK/xdg-state"
unset GREENLIGHT_CACHE_DIR GREENLIGHT_STATE GREENLIGHT_STORE GREENLIGHT_NO_RECORD

if [[ -z "${GREENLIGHT_TEST_PG:-}" ]]; then
    # Its own mktemp dir (not under $WORK): as root the cluster runs as `postgres`, which must
    # be able to reach it.
    SERVICES="$(mktemp -d)"
    echo "== starting PostgreSQL (scripts/ci/remote-services.sh)" >&2
    if ! "$ROOT/scripts/ci/remote-services.sh" start "$SERVICES" >&2; then
        echo "NOT MEASURED: the services did not start (above)" >&2
        exit 1
    fi
    # shellcheck source=/dev/null
    source "$SERVICES/env"
fi

# In the background, so a TERM to this script reaches the driver (which stops its workers)
# before the services go.
python3 "$ROOT/scripts/bench/goal_workers.py" --bin "$BIN" --pg "$GREENLIGHT_TEST_PG" \
    --psql "$PSQL" \
    --work "$WORK/run" "$@" &
DRIVER_PID=$!
rc=0
wait "$DRIVER_PID" || rc=$?
DRIVER_PID=""
exit "$rc"
