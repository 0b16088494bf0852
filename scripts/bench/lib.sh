# shellcheck shell=bash
# What the benchmarks that drive real services share, sourced by scripts/bench-*.sh: starting the
# loopback services of scripts/ci/remote-services.sh unless the caller already has them, and
# running a Python driver from this directory against a release binary in a scratch directory of
# the run's own, with everything stopped and removed however the script ends.
#
#   bench_services_start VAR WHAT   unless VAR is set, starts the services (WHAT names them in
#                                   messages) and sources their env file; returns 1 if they
#                                   did not start
#   bench_services_stop             stops what bench_services_start started (safe to repeat)
#   bench_driver NAME VAR WHAT ARG… the whole run of scripts/bench/NAME.py: checks ARG… with
#                                   its --check-args, takes GREENLIGHT_BIN or builds the release
#                                   binary, makes $BENCH_WORK with its own cache, state and lock
#                                   root, starts the services unless VAR is set, then calls
#                                   bench_driver_args (defined by the caller, printing one
#                                   argument per line: what the driver needs of the services)
#                                   and runs the driver with --bin, those, --work and ARG…;
#                                   exits with the driver's status (1 if the services did not
#                                   start, 2 on bad options)

BENCH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH_SERVICES="" # the services directory when this script started them

bench_services_start() {
    local var="$1" what="$2"
    [[ -z "${!var:-}" ]] || return 0
    # Its own mktemp dir (not under a scratch dir of the caller's): as root the cluster runs as
    # `postgres`, which must be able to reach it.
    BENCH_SERVICES="$(mktemp -d)"
    echo "== starting $what (scripts/ci/remote-services.sh)" >&2
    if ! "$BENCH_ROOT/scripts/ci/remote-services.sh" start "$BENCH_SERVICES" >&2; then
        echo "NOT MEASURED: $what did not start (above)" >&2
        return 1
    fi
    # shellcheck source=/dev/null
    source "$BENCH_SERVICES/env"
}

bench_services_stop() {
    if [[ -n "$BENCH_SERVICES" ]]; then
        "$BENCH_ROOT/scripts/ci/remote-services.sh" stop "$BENCH_SERVICES" || true
        BENCH_SERVICES=""
    fi
}

BENCH_DRIVER_PID=""
BENCH_WORK=""
# shellcheck disable=SC2329 # run by the EXIT trap
bench_driver_cleanup() {
    if [[ -n "$BENCH_DRIVER_PID" ]]; then
        kill -TERM "$BENCH_DRIVER_PID" 2>/dev/null || true
        wait "$BENCH_DRIVER_PID" 2>/dev/null || true
    fi
    bench_services_stop
    [[ -z "$BENCH_WORK" ]] || rm -rf "$BENCH_WORK"
}

bench_driver() {
    local name="$1" var="$2" what="$3"
    shift 3
    local driver="$BENCH_ROOT/scripts/bench/$name.py" tool
    for tool in git python3; do
        command -v "$tool" >/dev/null || { echo "bench $name: $tool is missing" >&2; exit 1; }
    done
    # Bad options fail here, before anything is built or started.
    python3 "$driver" --check-args "$@" || exit 2

    if [[ -z "${GREENLIGHT_BIN:-}" ]]; then
        cargo build --quiet --release -p greenlight --manifest-path "$BENCH_ROOT/Cargo.toml"
        GREENLIGHT_BIN="${CARGO_TARGET_DIR:-$BENCH_ROOT/target}/release/greenlight"
    fi
    [[ -x "$GREENLIGHT_BIN" ]] ||
        { echo "no executable at GREENLIGHT_BIN=$GREENLIGHT_BIN" >&2; exit 1; }
    local bin
    bin="$(realpath "$GREENLIGHT_BIN")"

    BENCH_WORK="$(mktemp -d)"
    trap bench_driver_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    # A cache, MAC key, state database and lock root of this run's own, never the user's.
    export XDG_CACHE_HOME="$BENCH_WORK/xdg-cache" XDG_STATE_HOME="$BENCH_WORK/xdg-state"
    export CM_VERIFY_LOCK_ROOT="$BENCH_WORK/locks"
    unset GREENLIGHT_CACHE_DIR GREENLIGHT_STATE GREENLIGHT_STORE GREENLIGHT_NO_RECORD

    bench_services_start "$var" "$what" || exit 1
    local services_args=()
    mapfile -t services_args < <(bench_driver_args)

    # In the background, so a TERM to the script reaches the driver (which stops its workers)
    # before the services go.
    python3 "$driver" --bin "$bin" "${services_args[@]}" --work "$BENCH_WORK/run" "$@" &
    BENCH_DRIVER_PID=$!
    local rc=0
    wait "$BENCH_DRIVER_PID" || rc=$?
    BENCH_DRIVER_PID=""
    exit "$rc"
}
