#!/usr/bin/env bash
# What verify.yaml version 2 costs, as three ratios, each measured in one hyperfine run:
#
#   (a) DAG: six `sleep` gates with `needs`, `jobs: 6`, cache off, against the critical path of
#       the same graph (computed here from the same numbers). Target: mean wall time within
#       5 % + 100 ms of the critical path. A plain `sleep <critical path>` is timed beside it to
#       show the fixed cost.
#   (b) Replay: re-verify of an unchanged 20,000-file repository (200 directories, plus 100
#       modified, 100 untracked and 100 ignored files), five cached gates with different
#       `inputs`, against `git status --porcelain` on the same tree. Target: <= 3x.
#   (c) Turborepo: the same five tasks as turbo tasks (same `inputs` globs, cache on) on the same
#       tree, fully cached, against greenlight's replay. Target: greenlight faster.
#
# Every part checks that what it times is what it claims (all five gates replayed, turbo at a
# full cache hit) and stops that part loudly when not. A missed target still exits 0, like the
# other bench scripts; a part that could not be measured exits 1 after the summary.
#
# Usage: scripts/bench-verify-v2.sh
# Env:   GREENLIGHT_BIN  a prebuilt greenlight binary (default: built here, release)
# Needs: git, hyperfine (apt-get install -y hyperfine), python3, node and npm (turbo@2 is
#        installed from the npm registry into the temp dir), cargo unless GREENLIGHT_BIN is set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILES=20000
DIRS=200

for tool in git hyperfine python3; do
    command -v "$tool" >/dev/null || { echo "bench-verify-v2: $tool is missing" >&2; exit 1; }
done

if [[ -z "${GREENLIGHT_BIN:-}" ]]; then
    cargo build --quiet --release -p greenlight --manifest-path "$ROOT/Cargo.toml"
    GREENLIGHT_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/greenlight"
fi
[[ -x "$GREENLIGHT_BIN" ]] || { echo "no executable at GREENLIGHT_BIN=$GREENLIGHT_BIN" >&2; exit 1; }
BIN="$GREENLIGHT_BIN"

WORK="$(mktemp -d)"
mkdir -p "$WORK/.greenlight" # version 2 is read only from a .greenlight directory
trap 'rm -rf "$WORK"' EXIT

# A cache, MAC key, state database and lock root of this run's own, never the user's.
export XDG_CACHE_HOME="$WORK/xdg-cache" XDG_STATE_HOME="$WORK/xdg-state"
export CM_VERIFY_LOCK_ROOT="$WORK/locks"
unset GREENLIGHT_CACHE_DIR GREENLIGHT_STATE GREENLIGHT_NO_RECORD
# turbo stays on this machine: no telemetry, no update check, no remote cache configured.
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1 TURBO_NO_UPDATE_NOTIFIER=1

SUMMARY=()    # one line per ratio
UNMEASURED=() # one line per part that could not be measured

# The mean (seconds) of the command named $2 in hyperfine's JSON $1.
mean_of() {
    python3 - "$1" "$2" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
print(r[sys.argv[2]]["mean"])
PY
}
ms() { awk -v s="$1" 'BEGIN { printf "%.1f ms", s * 1000 }'; }
verdict() { awk -v ok="$1" 'BEGIN { print (ok ? "MET" : "MISSED") }'; }

# ---------------------------------------------------------------------------------------------
# (a) DAG against its critical path.
# Gates in an order where every need comes first, so one pass finds each gate's finish time.
echo "== (a) six sleep gates with needs, jobs: 6, cache off" >&2
ids=(a b c d e f)
secs=(0.3 0.2 0.4 0.2 0.5 0.1)
needs=("" "a" "a" "b,c" "" "e")
declare -A finish=()
critical=0
for i in "${!ids[@]}"; do
    start=0
    IFS=, read -ra deps <<<"${needs[$i]}"
    for dep in "${deps[@]}"; do
        start=$(awk -v a="$start" -v b="${finish[$dep]}" 'BEGIN { print (b > a) ? b : a }')
    done
    finish[${ids[$i]}]=$(awk -v a="$start" -v b="${secs[$i]}" 'BEGIN { print a + b }')
    critical=$(awk -v a="$critical" -v b="${finish[${ids[$i]}]}" 'BEGIN { print (b > a) ? b : a }')
done

git init -q -b main "$WORK/dag"
git -C "$WORK/dag" -c user.name=b -c user.email=b@b.invalid commit -q --allow-empty -m base
{
    printf 'version: 2\noptions:\n  baseRef: main\n  skipInPrimaryCheckout: false\n  jobs: 6\n  cache: off\ngates:\n'
    for i in "${!ids[@]}"; do
        printf '  - id: %s\n    command: sleep %s\n' "${ids[$i]}" "${secs[$i]}"
        if [[ -n "${needs[$i]}" ]]; then printf '    needs: [%s]\n' "${needs[$i]}"; fi
    done
} >"$WORK/.greenlight/dag.yaml"
DAG_CMD="$BIN verify --no-record --skip-work-evidence --cwd $WORK/dag --config $WORK/.greenlight/dag.yaml"
$DAG_CMD >"$WORK/dag.out" || { cat "$WORK/dag.out" >&2; echo "(a): verify failed" >&2; exit 1; }

hyperfine --warmup 1 --runs 10 -N --export-json "$WORK/a.json" \
    -n "greenlight DAG" "$DAG_CMD" \
    -n "sleep critical path" "sleep $critical"
dag=$(mean_of "$WORK/a.json" "greenlight DAG")
slp=$(mean_of "$WORK/a.json" "sleep critical path")
budget=$(awk -v c="$critical" 'BEGIN { print c * 1.05 + 0.1 }')
ok=$(awk -v g="$dag" -v b="$budget" 'BEGIN { print (g <= b) }')
SUMMARY+=("(a) DAG wall $(ms "$dag") vs critical path $(ms "$critical") (ratio $(awk -v g="$dag" -v c="$critical" 'BEGIN { printf "%.3f", g / c }'), budget 1.05 x + 100 ms = $(ms "$budget")): $(verdict "$ok")   [sleep $critical alone: $(ms "$slp"), greenlight's fixed cost $(ms "$(awk -v g="$dag" -v s="$slp" 'BEGIN { print g - s }')")]")

# ---------------------------------------------------------------------------------------------
# (b) Replay on 20,000 files against git status.
echo "== (b) generating $FILES files in $DIRS directories" >&2
REPO="$WORK/tree"
mkdir -p "$REPO"
cd "$REPO"
git init -q -b main
git config user.name bench
git config user.email bench@example.invalid
# turbo's own cache and the tool it runs from stay out of both tools' view of the tree.
printf '*.log\n.turbo/\nnode_modules/\n' >.gitignore
per_dir=$(( (FILES + DIRS - 1) / DIRS ))
n=0
for ((d = 0; d < DIRS && n < FILES; d++)); do
    mkdir -p "src/m$d"
    for ((f = 0; f < per_dir && n < FILES; f++, n++)); do
        printf 'module %d file %d\nline two of %d\n' "$d" "$f" "$n" >"src/m$d/f$f.txt"
    done
done
# The same five tasks for turbo (single-package mode: the tasks are the root package's scripts).
cat >package.json <<EOF
{
  "name": "bench-tree",
  "private": true,
  "packageManager": "npm@$(npm --version 2>/dev/null || echo 10.0.0)",
  "scripts": { "t1": "true", "t2": "true", "t3": "true", "t4": "true", "t5": "true" }
}
EOF
GLOBS=("" "src/m1*/**" "src/m2*/**" "src/m3*/**" "src/m4*/**")
{
    printf '{\n  "$schema": "https://turbo.build/schema.json",\n  "tasks": {\n'
    for i in 1 2 3 4 5; do
        glob="${GLOBS[$((i - 1))]}"
        inputs=""
        if [[ -n "$glob" ]]; then inputs=", \"inputs\": [\"$glob\"]"; fi
        sep=","
        if [[ $i == 5 ]]; then sep=""; fi
        printf '    "t%d": { "cache": true, "outputs": []%s }%s\n' "$i" "$inputs" "$sep"
    done
    printf '  }\n}\n'
} >turbo.json
git add -A
git commit -q -m "generated $FILES files"
for ((i = 0; i < 100; i++)); do
    printf 'modified %d\n' "$i" >>"src/m$i/f0.txt"
    printf 'untracked %d\n' "$i" >"src/m$i/new.txt"
    printf 'ignored %d\n' "$i" >"src/m$i/build.log"
done
git status --porcelain >/dev/null # settle the index's stat cache, as a user's repo would be

# Five gates: t1 reads the whole workspace (no inputs), t2..t5 a tenth or so of it each.
{
    printf 'version: 2\noptions:\n  baseRef: main\n  skipInPrimaryCheckout: false\ngates:\n'
    for i in 1 2 3 4 5; do
        printf '  - id: t%d\n    command: "true"\n' "$i"
        glob="${GLOBS[$((i - 1))]}"
        if [[ -n "$glob" ]]; then printf '    inputs: ["%s"]\n' "$glob"; fi
    done
} >"$WORK/.greenlight/tree.yaml"
GL_ARGS="verify --skip-work-evidence --cwd $REPO --config $WORK/.greenlight/tree.yaml"

# Every gate must replay, or the timing below is of something else.
check_replay() {
    local out="$WORK/replay.out" hits
    "$BIN" $GL_ARGS --no-record >"$out" || { cat "$out" >&2; echo "verify failed on the tree" >&2; return 1; }
    hits=$(grep -cE '^GATE t[1-5] PASS .*cached=[0-9a-f]{12}' "$out" || true)
    if [[ "$hits" != 5 ]]; then
        echo "expected all 5 gates replayed (cached=), found $hits:" >&2
        cat "$out" >&2
        return 1
    fi
}
"$BIN" $GL_ARGS --no-record >"$WORK/fill.out" || { cat "$WORK/fill.out" >&2; echo "(b): verify failed" >&2; exit 1; }
if check_replay; then
    hyperfine --warmup 3 --runs 20 -N --export-json "$WORK/b.json" \
        -n "git status --porcelain" "git -C $REPO status --porcelain" \
        -n "git status" "git -C $REPO status" \
        -n "greenlight replay" "$BIN $GL_ARGS --no-record" \
        -n "greenlight replay, recorded" "$BIN $GL_ARGS"
    gs=$(mean_of "$WORK/b.json" "git status --porcelain")
    gsp=$(mean_of "$WORK/b.json" "git status")
    gl=$(mean_of "$WORK/b.json" "greenlight replay")
    glr=$(mean_of "$WORK/b.json" "greenlight replay, recorded")
    ratio=$(awk -v g="$gl" -v s="$gs" 'BEGIN { printf "%.2f", g / s }')
    SUMMARY+=("(b) replay of 5 cached gates $(ms "$gl") vs git status --porcelain $(ms "$gs"): ${ratio}x (target <= 3x): $(verdict "$(awk -v r="$ratio" 'BEGIN { print (r <= 3) }')")   [plain git status $(ms "$gsp"); with recording $(ms "$glr"), $(awk -v g="$glr" -v s="$gs" 'BEGIN { printf "%.2f", g / s }')x]")
else
    UNMEASURED+=("(b) the second verify did not replay all five gates (output above)")
fi

# ---------------------------------------------------------------------------------------------
# (c) Turborepo on the same tree.
# turbo is measured two ways, both with its defaults (full log replay, no daemon: turbo 2 no
# longer uses one for `run`): through node_modules/.bin/turbo, the node launcher `npx turbo` and
# package scripts go through, and as the platform binary that launcher starts, which is turbo
# at its fastest. The target is against the faster of the two.
echo "== (c) turbo on the same tree" >&2
turbo_part() {
    local tool="$WORK/turbo-tool" log="$WORK/turbo.log" shim native
    if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
        echo "node/npm are not installed; turbo cannot be installed" >"$log"; return 1
    fi
    mkdir -p "$tool"
    printf '{ "name": "turbo-tool", "private": true }\n' >"$tool/package.json"
    if ! (cd "$tool" && npm install --no-audit --no-fund --loglevel=error turbo@2) >"$log" 2>&1; then
        echo "npm install turbo@2 failed" >>"$log"; return 1
    fi
    shim="$tool/node_modules/.bin/turbo"
    native=$(find "$tool/node_modules/@turbo" -path '*/bin/turbo' -type f 2>/dev/null | head -n1)
    if [[ ! -x "$shim" || -z "$native" ]]; then
        echo "turbo@2 installed but no launcher ($shim) or platform binary under node_modules/@turbo" >>"$log"
        return 1
    fi
    echo "turbo $("$native" --version 2>/dev/null) at $native" >&2
    if ! (cd "$REPO" && "$native" run t1 t2 t3 t4 t5) >"$log" 2>&1; then
        echo "the filling turbo run failed" >>"$log"; return 1
    fi
    (cd "$REPO" && "$native" run t1 t2 t3 t4 t5) >"$log" 2>&1 || { echo "the second turbo run failed" >>"$log"; return 1; }
    if ! grep -q '5 cached, 5 total' "$log"; then
        echo "the second turbo run was not a full cache hit (no '5 cached, 5 total')" >>"$log"; return 1
    fi
    grep -q 'FULL TURBO' "$log" || echo "note: turbo did not print FULL TURBO" >&2
    # turbo's runs wrote only ignored files: greenlight must still replay everything.
    check_replay 2>>"$log" || { echo "greenlight stopped replaying after turbo ran" >>"$log"; return 1; }
    (cd "$REPO" && hyperfine --warmup 3 --runs 20 -N --export-json "$WORK/c.json" \
        -n "greenlight replay" "$BIN $GL_ARGS --no-record" \
        -n "turbo (platform binary)" "$native run t1 t2 t3 t4 t5" \
        -n "turbo (node launcher)" "$shim run t1 t2 t3 t4 t5") || return 1
    # Still a full hit after the timed runs, so every timed run was one.
    (cd "$REPO" && "$native" run t1 t2 t3 t4 t5) >"$log" 2>&1 || { echo "the last turbo run failed" >>"$log"; return 1; }
    grep -q '5 cached, 5 total' "$log" || { echo "turbo stopped hitting its cache during the timed runs" >>"$log"; return 1; }
}
if turbo_part; then
    gl=$(mean_of "$WORK/c.json" "greenlight replay")
    tn=$(mean_of "$WORK/c.json" "turbo (platform binary)")
    ts=$(mean_of "$WORK/c.json" "turbo (node launcher)")
    SUMMARY+=("(c) greenlight replay $(ms "$gl") vs turbo full hit $(ms "$tn") (platform binary): $(awk -v g="$gl" -v t="$tn" 'BEGIN { printf "%.2f", g / t }')x (target < 1x): $(verdict "$(awk -v g="$gl" -v t="$tn" 'BEGIN { print (g < t) }')")   [turbo via node launcher $(ms "$ts"), $(awk -v g="$gl" -v t="$ts" 'BEGIN { printf "%.2f", g / t }')x]")
else
    echo "(c) turbo could not be measured:" >&2
    tail -n 30 "$WORK/turbo.log" >&2
    UNMEASURED+=("(c) turbo: $(tail -n 1 "$WORK/turbo.log")")
fi

# ---------------------------------------------------------------------------------------------
echo
echo "== summary ($("$BIN" --version 2>/dev/null | head -n1), one run, $(nproc) CPUs)"
for line in "${SUMMARY[@]}"; do echo "$line"; done
for line in "${UNMEASURED[@]+"${UNMEASURED[@]}"}"; do echo "NOT MEASURED $line"; done
[[ ${#UNMEASURED[@]} -eq 0 ]]
