#!/usr/bin/env bash
# What building greenlight costs a newcomer, from an empty target directory with the crates
# already downloaded: the README's first command (`cargo run -p greenlight --no-default-features
# -- demo`: the binary without its `remote` and `openai` features), then `cargo build --release
# -p greenlight` (every feature: what `cargo install` does), then the release binary's size. Each build starts from its own empty temporary target directory, removed on exit.
#
# Reports wall time and CPU time (user + sys of cargo and every rustc, linker and build script
# it waited for, from /usr/bin/time). Wall time depends on what else the machine runs; CPU time
# is the figure to compare between runs.
#
# Targets: demo <= 120 s wall (on a quiet machine) and <= 180 s CPU; release build <= 540 s
# CPU; release binary <= 30 MB. Prints MET or MISSED for each and exits 0 either way; exits 2
# when a tool is missing or a build fails.
# Usage: scripts/bench-build.sh [demo|release|all]   (default all)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHAT="${1:-all}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

for tool in cargo /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench-build: $tool is missing; install it" >&2; exit 2; }
done
case "$WHAT" in demo | release | all) ;; *) echo "bench-build: unknown step '$WHAT' (demo, release or all)" >&2; exit 2 ;; esac

cd "$ROOT"
# Downloading is not building: fetch first, then build offline so no timing includes the network.
cargo fetch --locked --quiet

# measure NAME TARGET_DIR COMMAND...: runs COMMAND with CARGO_TARGET_DIR=TARGET_DIR, prints its
# wall and CPU seconds and leaves them in WALL and CPU.
measure() {
  local name="$1" target="$2"
  shift 2
  local times="$TMP/$name.time"
  if ! CARGO_TARGET_DIR="$target" /usr/bin/time -o "$times" -f '%e %U %S' "$@" >"$TMP/$name.out" 2>&1; then
    tail -30 "$TMP/$name.out" >&2
    echo "bench-build: '$*' failed (its output's tail is above)" >&2
    exit 2
  fi
  read -r WALL user sys < <(tail -1 "$times")
  CPU="$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')"
  printf '%-8s wall %7.1f s   cpu %7.1f s (user %s s, sys %s s)   %s\n' "$name" "$WALL" "$CPU" "$user" "$sys" "$*"
  echo "  $(grep -c '^ *Compiling ' "$TMP/$name.out") crates compiled"
}

verdict() { awk -v v="$2" -v t="$3" -v n="$1" 'BEGIN { printf "  %s = %.1f (target <= %s) %s\n", n, v, t, (v <= t ? "MET" : "MISSED") }'; }

echo "bench-build: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(rustc --version)"
if [[ "$WHAT" == demo || "$WHAT" == all ]]; then
  measure demo "$TMP/target-demo" cargo run --offline --locked -p greenlight --no-default-features -- demo
  verdict "demo wall s" "$WALL" 120
  verdict "demo cpu s" "$CPU" 180
  echo "  target dir $(du -sh "$TMP/target-demo" | cut -f1)"
  rm -rf "$TMP/target-demo"
fi
if [[ "$WHAT" == release || "$WHAT" == all ]]; then
  measure release "$TMP/target-release" cargo build --offline --locked --release -p greenlight
  verdict "release cpu s" "$CPU" 540
  bytes="$(stat -c %s "$TMP/target-release/release/greenlight")"
  verdict "binary MB" "$(awk -v b="$bytes" 'BEGIN { print b / 1000000 }')" 30
  echo "  binary $bytes bytes"
  echo "  target dir $(du -sh "$TMP/target-release" | cut -f1)"
  # What the binary needs from the system at run time (the README names it).
  echo "  links: $(ldd "$TMP/target-release/release/greenlight" | awk '{ print $1 }' | tr '\n' ' ')"
fi
