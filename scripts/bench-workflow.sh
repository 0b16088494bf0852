#!/usr/bin/env bash
# What greenlight's workflow runtime costs on top of its agents, as two ratios measured in one
# run on one generated repository:
#
#   (a) a 50-step plan of no-op command agents, each step waiting for the one before: the run's
#       wall time against 50 calls of the same agent straight from the shell. The difference per
#       step is greenlight's scheduling cost (the state database's transactions, the worktree's
#       reset and commit, the dispatch seam), agents excluded.
#   (b) a fan-out of WIDTH members, each agent sleeping 1 s, with maxFanout = WIDTH: the run's
#       wall time against the critical path (one member, 1 s). Target: <= 1.25x — the window runs
#       every member at once, their worktrees made and removed at once too, so the fan-out costs
#       about one member, not WIDTH.
#
# Each run is checked to have completed (exit 0, every step dispatched once). A missed target is
# printed as MISSED and still exits 0, like the other bench scripts; exit 1 when something
# could not be measured.
#
# Usage: scripts/bench-workflow.sh [WIDTH]      (WIDTH defaults to 8)
# Env:   GREENLIGHT_BIN  a prebuilt greenlight binary (default: built here, release)
#        BENCH_DIR       where to generate the repository (default: a fresh temp dir, removed)
# Needs: git, cargo unless GREENLIGHT_BIN is given.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WIDTH="${1:-8}"
STEPS=50

if [[ -z "${GREENLIGHT_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build --quiet --release -p greenlight)
    GREENLIGHT_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/greenlight"
fi
[[ -x "$GREENLIGHT_BIN" ]] || { echo "no executable at GREENLIGHT_BIN=$GREENLIGHT_BIN" >&2; exit 1; }

if [[ -n "${BENCH_DIR:-}" ]]; then
    mkdir -p "$BENCH_DIR"
    WORK="$BENCH_DIR"
else
    WORK="$(mktemp -d)"
    trap 'rm -rf "$WORK"' EXIT
fi

now_ns() { date +%s%N; }

REPO="$WORK/repo"
rm -rf "$REPO"
git init -q -b main "$REPO"
git -C "$REPO" config user.name bench
git -C "$REPO" config user.email bench@greenlight.invalid
echo bench > "$REPO/README"
git -C "$REPO" add README
git -C "$REPO" commit -q -m initial

# The agents: answer the probe, then do nothing (a) or sleep a second (b).
cat > "$WORK/noop.sh" <<'AGENT'
#!/bin/sh
cat > /dev/null
echo OK
AGENT
cat > "$WORK/sleep.sh" <<'AGENT'
#!/bin/sh
prompt=$(cat)
if [ "$prompt" != 'Reply with exactly: OK' ]; then sleep 1; fi
echo OK
AGENT
chmod +x "$WORK/noop.sh" "$WORK/sleep.sh"

{
    echo "workflow: 1"
    echo "name: bench-steps"
    echo "agent: \"command:$WORK/noop.sh\""
    echo "steps:"
    for i in $(seq 1 "$STEPS"); do
        echo "  - id: s$i"
        echo "    kind: agent"
        echo "    prompt: step $i"
        if (( i > 1 )); then echo "    needs: [s$((i - 1))]"; fi
    done
} > "$WORK/steps.yaml"

{
    echo "workflow: 1"
    echo "name: bench-fanout"
    echo "agent: \"command:$WORK/sleep.sh\""
    echo "steps:"
    echo "  - id: fan"
    echo "    kind: fanout"
    echo -n "    items: ["
    for i in $(seq 1 "$WIDTH"); do echo -n "m$i"; (( i < WIDTH )) && echo -n ", "; done
    echo "]"
    echo "    maxFanout: $WIDTH"
    echo "    template:"
    echo "      prompt: \"member {{item}}\""
    echo "  - id: joined"
    echo "    kind: join"
    echo "    for: fan"
    echo "    policy: all-declared"
} > "$WORK/fanout.yaml"

run_plan() {
    local plan="$1" out
    out="$(cd "$REPO" && "$GREENLIGHT_BIN" workflow run "$plan" --json --state "$WORK/state.db")" || {
        echo "the run of $plan did not complete: $out" >&2
        exit 1
    }
    echo "$out"
}

# (a) the agents alone, then the same agents under greenlight.
start=$(now_ns)
for _ in $(seq 1 "$STEPS"); do echo "step" | "$WORK/noop.sh" > /dev/null; done
agents_ns=$(( $(now_ns) - start ))
start=$(now_ns)
out="$(run_plan "$WORK/steps.yaml")"
run_ns=$(( $(now_ns) - start ))
[[ "$out" == *"\"dispatched\":$STEPS"* ]] || { echo "expected $STEPS dispatches: $out" >&2; exit 1; }
per_step_ms=$(awk -v r="$run_ns" -v a="$agents_ns" -v n="$STEPS" 'BEGIN { printf "%.1f", (r - a) / n / 1e6 }')
ratio_a=$(awk -v r="$run_ns" -v a="$agents_ns" 'BEGIN { printf "%.1f", r / a }')
echo "(a) $STEPS steps: run $((run_ns / 1000000)) ms, agents alone $((agents_ns / 1000000)) ms; scheduling cost ${per_step_ms} ms per step (run/agents ${ratio_a}x)"

# (b) the fan-out against its critical path (one member: 1 s).
start=$(now_ns)
out="$(run_plan "$WORK/fanout.yaml")"
fan_ns=$(( $(now_ns) - start ))
[[ "$out" == *"\"dispatched\":$WIDTH"* ]] || { echo "expected $WIDTH dispatches: $out" >&2; exit 1; }
ratio_b=$(awk -v f="$fan_ns" 'BEGIN { printf "%.2f", f / 1e9 }')
verdict=$(awk -v r="$ratio_b" 'BEGIN { print (r <= 1.25) ? "met" : "MISSED" }')
echo "(b) fan-out of $WIDTH at maxFanout $WIDTH: $((fan_ns / 1000000)) ms against a 1000 ms critical path: ${ratio_b}x (target <= 1.25x: $verdict)"
