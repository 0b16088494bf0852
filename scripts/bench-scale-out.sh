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
# shellcheck source=scripts/bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"

# shellcheck disable=SC2329 # called by bench_driver once the services are up
bench_driver_args() {
    echo "== grid $GREENLIGHT_TEST_REAPI" >&2
    printf '%s\n' --endpoint "$GREENLIGHT_TEST_REAPI"
}
bench_driver scale_out GREENLIGHT_TEST_REAPI "PostgreSQL and BuildGrid" "$@"
