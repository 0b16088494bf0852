#!/usr/bin/env bash
# What the byte-exact cache key costs, as two ratios measured in one hyperfine run on one
# generated repository:
#
#   (a) a fully cached re-verify (ten version 2 gates, each with its own `inputs`, all replayed)
#       against `git status --porcelain`. Target: <= 3x.
#   (b) a re-verify where one gate's inputs changed (that gate runs and is stored, the other nine
#       replay) against the fully cached re-verify. Target: <= 2x. After the gates only what the
#       stored gate may read is listed again, not the whole workspace.
#
# The repository: 20,000 committed files in 200 directories, then 100 of them modified, 100
# untracked files added and 100 ignored files written. The key reads every file's bytes (BLAKE3)
# unless the stat cache knows them for the same size, mtime, ctime, inode and mode; the warm-up
# runs fill it, as a user's earlier verify would have.
#
# Before timing, each case is checked to be what it claims (ten replays; one gate run and then
# stored). A missed target is printed as MISSED and still exits 0, like the other bench scripts
# (bench-verify-v2.sh); exit 1 when something could not be measured.
#
# Usage: scripts/bench-workspace-key.sh [FILES]      (FILES defaults to 20000)
# Env:   GREENLIGHT_BIN  a prebuilt greenlight binary (default: built here, release)
#        BENCH_DIR       where to generate the repository (default: a fresh temp dir, removed)
# Needs: git, hyperfine (apt-get install -y hyperfine), cargo unless GREENLIGHT_BIN is given.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILES="${1:-20000}"
DIRS=200
GATES=10

if ! command -v hyperfine >/dev/null; then
    echo "hyperfine is not installed: apt-get install -y hyperfine" >&2
    exit 1
fi

if [[ -z "${GREENLIGHT_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build --quiet --release -p greenlight)
    GREENLIGHT_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/greenlight"
fi
[[ -x "$GREENLIGHT_BIN" ]] || { echo "no executable at GREENLIGHT_BIN=$GREENLIGHT_BIN" >&2; exit 1; }
# The script works inside the generated repository: a relative path must not depend on that.
GREENLIGHT_BIN="$(realpath "$GREENLIGHT_BIN")"

WORK="$(mktemp -d)"
if [[ -n "${BENCH_DIR:-}" ]]; then
    REPO="$BENCH_DIR"
    rm -rf "$REPO"
    mkdir -p "$REPO"
else
    REPO="$WORK/repo"
    mkdir -p "$REPO"
fi
trap 'rm -rf "$WORK"' EXIT
# A cache, MAC key, state database and lock root of this run's own, never the user's.
export XDG_CACHE_HOME="$WORK/xdg-cache" XDG_STATE_HOME="$WORK/xdg-state"
export CM_VERIFY_LOCK_ROOT="$WORK/locks" GREENLIGHT_NO_RECORD=1
unset GREENLIGHT_CACHE_DIR GREENLIGHT_STATE

echo "generating $FILES files in $REPO" >&2
cd "$REPO"
git init -q -b main
git config user.name bench
git config user.email bench@example.invalid
git config gc.auto 0 # no background gc writing into the tree while it is timed or removed
printf '*.log\n' >.gitignore
per_dir=$(( (FILES + DIRS - 1) / DIRS ))
n=0
for ((d = 0; d < DIRS && n < FILES; d++)); do
    mkdir -p "src/m$d"
    for ((f = 0; f < per_dir && n < FILES; f++, n++)); do
        printf 'module %d file %d\nline two of %d\n' "$d" "$f" "$n" >"src/m$d/f$f.txt"
    done
done
mkdir -p .greenlight # version 2 is read only from greenlight's own config home
{
    printf 'version: 2\noptions:\n  skipInPrimaryCheckout: false\ngates:\n'
    for ((g = 0; g < GATES; g++)); do
        printf '  - id: g%d\n    command: "true"\n    inputs: ["src/m%d/**"]\n' "$g" "$g"
    done
} >.greenlight/verify.yaml
git add -A
git commit -q -m "generated $FILES files"
git update-ref refs/remotes/origin/main HEAD
git symbolic-ref refs/remotes/origin/HEAD refs/remotes/origin/main
git commit -q --allow-empty -m work
for ((i = 0; i < 100; i++)); do
    printf 'modified %d\n' "$i" >>"src/m$i/f0.txt"
    printf 'untracked %d\n' "$i" >"src/m$i/new.txt"
    printf 'ignored %d\n' "$i" >"src/m$i/build.log"
done
git status --porcelain >/dev/null # settle the index's stat cache, as a user's repo would be
sleep 0.1                         # and let the last writes settle for the key's stat cache

VERIFY="$GREENLIGHT_BIN verify"
# The change of case (b): new bytes in one of g0's inputs every time, so g0 never replays. The
# sleep lets the write's ctime pass a clock tick, as an agent's edit has before it runs verify
# (an edit younger than that is read again after the tick, which costs up to 20 ms).
CHANGE="date +%s%N > src/m0/f1.txt; sleep 0.05"

replays() { grep -c ' cached=' || true; }
$VERIFY >/dev/null 2>&1 || true # fill the result cache and the stat cache
got="$($VERIFY 2>&1 | replays)"
[[ "$got" == "$GATES" ]] || { echo "case (a) is not a full replay: $got of $GATES gates replayed" >&2; exit 1; }
sh -c "$CHANGE"
got="$($VERIFY 2>&1 | replays)"
[[ "$got" == "$((GATES - 1))" ]] || { echo "case (b) should replay $((GATES - 1)) gates, replayed $got" >&2; exit 1; }
got="$($VERIFY 2>&1 | replays)"
[[ "$got" == "$GATES" ]] || { echo "case (b) did not store the gate that ran ($got of $GATES replayed after it)" >&2; exit 1; }

JSON="$WORK/hyperfine.json"
hyperfine --warmup 3 --runs 20 -N --export-json "$JSON" \
    --prepare "true" --prepare "true" --prepare "sh -c '$CHANGE'" \
    --command-name "git status --porcelain" "git -C $REPO status --porcelain" \
    --command-name "cached re-verify" "$VERIFY" \
    --command-name "one gate's inputs changed" "$VERIFY"

# The three means, in command order, from hyperfine's JSON (no jq or python needed).
mapfile -t means < <(grep -o '"mean": *[0-9.eE+-]*' "$JSON" | sed 's/.*: *//')
awk -v s="${means[0]}" -v c="${means[1]}" -v o="${means[2]}" 'BEGIN {
    a = c / s; b = o / c
    printf "ratio (a): cached re-verify / git status = %.2f (target <= 3.00) %s\n", a, (a <= 3.0 ? "MET" : "MISSED")
    printf "ratio (b): one gate changed / cached re-verify = %.2f (target <= 2.00) %s\n", b, (b <= 2.0 ? "MET" : "MISSED")
}'
