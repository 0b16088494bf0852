#!/usr/bin/env bash
# What remote execution and the grid's shared cache give many agents on one grid, measured on a
# real BuildGrid + PostgreSQL with real `greenlight worker`s.
#
# Workload (fixed seed, printed): 8 scripted agents start from identical git repositories; in
# each of 4 rounds an agent works 0-1.5 s (seeded), appends a round line to its tracked file or
# not (p = 0.5), then runs `greenlight verify` with three `run: remote` gates (`sleep` 1.2 s,
# 0.8 s, 0.4 s; jobs: 3; greenlight's local cache off). The agents run at once, each through its
# rounds. Two agents whose files are identical at a round ask for the same action, so the driver
# knows the number of distinct actions from the workload alone.
# The work time stands in for what real agents do between verifies (minutes, here compressed
# like the gates). It matters because BuildGrid merges an identical request into a running job
# by a look-up and then an insert, and on two loaded cores that takes up to ~200 ms: identical
# requests closer than that each create a job and run. Agents that waited on the same job wake
# together, so with no work time (--think 0) up to a third more actions ran than needed.
#
# Configurations, each with fresh repositories, a fresh salt in every gate's command (nothing is
# replayed from an earlier configuration) and a platform pool only its own workers offer:
#   N = 1 worker,  options.remote.cache: shared
#   N = 4 workers, options.remote.cache: shared
#   N = 4 workers, options.remote.cache: off (every request executes; the contrast)
# Workers are `greenlight worker --capacity 1`; before the timed part, N one-second gates must
# run at once, so every worker is connected.
#
# Per configuration: requests (agent x round x gate), distinct actions, executions (every gate
# appends a line to a log outside the repositories), ActionCache hits and in-flight merges (from
# verify's JSON `remote.source` and the execution id each gate prints), makespan, gate-seconds
# executed. Targets:
#   makespan(N=4, shared) <= 0.4 x makespan(N=1, shared)
#   executions <= 1.1 x distinct actions, in both shared configurations
#   (and with the cache off, executions = requests)
# The gates are `sleep`s: a 2-core machine cannot show CPU parallelism, so the ratio shows
# scheduling across workers, not compute.
#
# What is timed is checked to be what it claims: every verify passes with every gate reported
# as run remotely, every answer names an execution in the log of its own configuration with the
# agent's tree, no gate ran inside an agent's repository, and the action digests in verify's
# JSON are one per distinct (gate, files) pair, the driver's count. A missed target prints MISSED and
# still exits 0, like the other bench scripts; a part that could not be measured (a gate not run
# remotely, services or workers that did not start) exits 1 after the summary.
#
# Usage: scripts/bench-scale-out.sh [--json FILE] [--seed N] [--agents A] [--rounds R]
#                                   [--think SECONDS] [--configs 1:shared,4:shared,4:off]
#        (the driver's options, scripts/bench/scale_out.py --help; the defaults are the above).
#        The JSON document is the last thing on stdout, and also written to FILE with --json.
# Env:   GREENLIGHT_BIN         a prebuilt greenlight binary (default: built here, release)
#        GREENLIGHT_TEST_REAPI  a running grid (http://host:port) with the test config of
#                               scripts/ci/buildgrid.yml; unset, the script starts PostgreSQL and
#                               BuildGrid with scripts/ci/remote-services.sh and stops them on exit
# Needs: git, python3, and for the services what scripts/ci/remote-services.sh needs
#        (PostgreSQL 15, the BuildGrid venv of scripts/ci/install-buildgrid.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

for tool in git python3; do
    command -v "$tool" >/dev/null || { echo "bench-scale-out: $tool is missing" >&2; exit 1; }
done
# Bad options fail here, before anything is built or started.
python3 "$ROOT/scripts/bench/scale_out.py" --check-args "$@" || exit 2

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

# A cache, MAC key, state database and lock root of this run's own, never the user's.
export XDG_CACHE_HOME="$WORK/xdg-cache" XDG_STATE_HOME="$WORK/xdg-state"
export CM_VERIFY_LOCK_ROOT="$WORK/locks"
unset GREENLIGHT_CACHE_DIR GREENLIGHT_STATE GREENLIGHT_NO_RECORD

if [[ -z "${GREENLIGHT_TEST_REAPI:-}" ]]; then
    # Its own mktemp dir (not under $WORK): as root the cluster runs as `postgres`, which must
    # be able to reach it.
    SERVICES="$(mktemp -d)"
    echo "== starting PostgreSQL and BuildGrid (scripts/ci/remote-services.sh)" >&2
    if ! "$ROOT/scripts/ci/remote-services.sh" start "$SERVICES" >&2; then
        echo "NOT MEASURED: the remote services did not start (above)" >&2
        exit 1
    fi
    # shellcheck source=/dev/null
    source "$SERVICES/env"
fi
echo "== grid $GREENLIGHT_TEST_REAPI" >&2

# In the background, so a TERM to this script reaches the driver (which stops its workers)
# before the services go.
python3 "$ROOT/scripts/bench/scale_out.py" --bin "$BIN" --endpoint "$GREENLIGHT_TEST_REAPI" \
    --work "$WORK/run" "$@" &
DRIVER_PID=$!
rc=0
wait "$DRIVER_PID" || rc=$?
DRIVER_PID=""
exit "$rc"
