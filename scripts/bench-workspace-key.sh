#!/usr/bin/env bash
# Times the workspace key against `git status --porcelain` on the same generated repository, in
# one hyperfine run, and prints the ratio (target: the key costs at most 3x git status).
#
# The repository: 20,000 committed files in 200 directories, then 100 of them modified, 100
# untracked files added and 100 ignored files written, so the key has real work to do beyond the
# stat cache (new blobs to hash, untracked files to find, ignored ones to skip).
#
# Usage: scripts/bench-workspace-key.sh [FILES]      (FILES defaults to 20000)
# Env:   WSKEY_BIN  a prebuilt `workspace_key` example binary (default: built here, release)
#        BENCH_DIR  where to generate the repository (default: a fresh temp dir, removed after)
# Needs: git, hyperfine (apt-get install -y hyperfine), cargo unless WSKEY_BIN is given.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILES="${1:-20000}"
DIRS=200

if ! command -v hyperfine >/dev/null; then
    echo "hyperfine is not installed: apt-get install -y hyperfine" >&2
    exit 1
fi

if [[ -z "${WSKEY_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build --quiet --release -p greenlight-gate --example workspace_key)
    TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
    WSKEY_BIN="$TARGET/release/examples/workspace_key"
fi
[[ -x "$WSKEY_BIN" ]] || { echo "no executable at WSKEY_BIN=$WSKEY_BIN" >&2; exit 1; }

if [[ -n "${BENCH_DIR:-}" ]]; then
    REPO="$BENCH_DIR"
    rm -rf "$REPO"
    mkdir -p "$REPO"
else
    REPO="$(mktemp -d)"
    trap 'rm -rf "$REPO"' EXIT
fi

echo "generating $FILES files in $REPO" >&2
cd "$REPO"
git init -q -b main
git config user.name bench
git config user.email bench@example.invalid
printf '*.log\n' >.gitignore
per_dir=$(( (FILES + DIRS - 1) / DIRS ))
n=0
for ((d = 0; d < DIRS && n < FILES; d++)); do
    mkdir -p "src/m$d"
    for ((f = 0; f < per_dir && n < FILES; f++, n++)); do
        printf 'module %d file %d\nline two of %d\n' "$d" "$f" "$n" >"src/m$d/f$f.txt"
    done
done
git add -A
git commit -q -m "generated $FILES files"
for ((i = 0; i < 100; i++)); do
    printf 'modified %d\n' "$i" >>"src/m$i/f0.txt"
    printf 'untracked %d\n' "$i" >"src/m$i/new.txt"
    printf 'ignored %d\n' "$i" >"src/m$i/build.log"
done
git status --porcelain >/dev/null # settle the index's stat cache, as a user's repo would be

echo "key: $("$WSKEY_BIN" "$REPO")" >&2
JSON="$(mktemp)"
hyperfine --warmup 3 --runs 30 -N --export-json "$JSON" \
    --command-name "git status --porcelain" "git -C $REPO status --porcelain" \
    --command-name "workspace key" "$WSKEY_BIN $REPO"

# The two means, in command order, from hyperfine's JSON (no jq or python needed).
mapfile -t means < <(grep -o '"mean": *[0-9.eE+-]*' "$JSON" | sed 's/.*: *//')
rm -f "$JSON"
awk -v s="${means[0]}" -v k="${means[1]}" 'BEGIN {
    printf "ratio: workspace key / git status = %.2f (target <= 3.00)\n", k / s
    exit (k / s <= 3.0) ? 0 : 3
}'
