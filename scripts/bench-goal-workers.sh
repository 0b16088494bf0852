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
# Needs: git, python3, psql (PostgreSQL 15's, or GREENLIGHT_PG_BIN's), and for the services what
#        scripts/ci/remote-services.sh needs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"

# The results are read back with PostgreSQL's own client, the one remote-services.sh uses.
PSQL="${GREENLIGHT_PG_BIN:-/usr/lib/postgresql/15/bin}/psql"
[[ -x "$PSQL" ]] || PSQL="$(command -v psql)" ||
    { echo "bench-goal-workers: psql is missing: apt-get install postgresql" >&2; exit 1; }

# shellcheck disable=SC2329 # called by bench_driver once the services are up
bench_driver_args() {
    printf '%s\n' --pg "$GREENLIGHT_TEST_PG" --psql "$PSQL"
}
bench_driver goal_workers GREENLIGHT_TEST_PG PostgreSQL "$@"
