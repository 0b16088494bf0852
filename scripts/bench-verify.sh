#!/usr/bin/env bash
# Whole-process cost of `greenlight verify`: 50 gates of `true` against a shell loop that runs
# `/bin/sh -c true` 50 times, measured in one hyperfine run, with the run recorded in a state file
# (the default) and with --no-record. Target: greenlight <= 1.5 x loop + 30 ms, recording on.
# Usage: scripts/bench-verify.sh   (builds the release binary; needs hyperfine: apt-get install hyperfine)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
command -v hyperfine >/dev/null || { echo "bench-verify: hyperfine is missing (apt-get install -y hyperfine)" >&2; exit 1; }
cargo build --release -p greenlight --manifest-path "$here/Cargo.toml" >/dev/null
bin="${CARGO_TARGET_DIR:-$here/target}/release/greenlight"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A linked worktree with one commit of work, as gates really run.
git -C "$work" init -q -b main repo
git -C "$work/repo" -c user.name=b -c user.email=b@b commit -q --allow-empty -m base
git -C "$work/repo" worktree add -q -b work "$work/wt"
echo work > "$work/wt/file"
git -C "$work/wt" add file
git -C "$work/wt" -c user.name=b -c user.email=b@b commit -q -m work
{
  echo "version: 1"
  echo "gates:"
  for i in $(seq 1 50); do printf '  - id: g%s\n    command: "true"\n' "$i"; done
  echo "options:"
  echo "  baseRef: main"
} > "$work/verify.yaml"

export CM_VERIFY_LOCK_ROOT="$work/locks"
# Recorded runs go to a state file of their own, on the same disk as the work (not a tmpfs).
export GREENLIGHT_STATE="$work/state/state.db"
unset GREENLIGHT_NO_RECORD
hyperfine --warmup 3 --runs 30 -N --export-json "$work/result.json" \
  -n greenlight "$bin verify --cwd $work/wt --config $work/verify.yaml" \
  -n greenlight-no-record "$bin verify --no-record --cwd $work/wt --config $work/verify.yaml" \
  -n sh-loop "sh -c 'for i in \$(seq 1 50); do /bin/sh -c true; done'"

python3 - "$work/result.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
l = r["sh-loop"]["median"]
budget = 1.5 * l + 0.030
for name in ["greenlight", "greenlight-no-record"]:
    g = r[name]["median"]
    print(f"{name} median {g*1000:.1f} ms, loop median {l*1000:.1f} ms, ratio {g/l:.2f}x, "
          f"budget (1.5 x loop + 30 ms) {budget*1000:.1f} ms: {'MET' if g <= budget else 'MISSED'}")
PY
