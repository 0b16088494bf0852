#!/usr/bin/env bash
# Regenerates the digest fixture corpus from the small projects under fixtures/projects/.
#
# Each case runs a real tool on a real project and stores, under
# crates/greenlight-digest/tests/fixtures/<format>/<case>/:
#   output.txt   stdout and stderr of the tool, interleaved in one pipe, bytes exactly as written
#   meta.json    tool, version, command, the directory it ran in (`root`: the digest gives the
#                paths under it relative to it, as a gate's are to its repository), exit code,
#                capture date
#   report.*     the tool's own structured report of the same project (JUnit XML, go test -json,
#                jest --json, eslint -f json) when the tool has one, for cross-checking counts
#
# Projects are copied to a fixed working directory first, so the paths tools print are the same
# on every machine that runs this script.
#
# Usage: scripts/capture-fixtures.sh [FILTER...]   (each FILTER: a whole case, "<format>/<case>",
#        or a whole format, "<format>/" or "<format>"; a case is captured when any FILTER names
#        it, every case when none is given)
# Needs: cargo, cargo-nextest, clippy (rustup component), python3 with pytest (`pip install
# pytest`, which brings iniconfig), go (`apt-get install golang-go`), node 20 + npm (the npm
# install below brings jest, vitest, mocha, tape, tap, eslint and its compact formatter,
# typescript and bun, whose npm package ships the binary), rustfmt (rustup component) and
# shellcheck (`apt-get install shellcheck`) for the problem matcher captures, and `script` from
# util-linux for the pseudo-terminal captures; make for the wrapper captures, which install
# their own pinned tox, nox and uv (pip, in a venv under the working directory), pnpm (npm,
# under the working directory) and vitest 4 (npm ci of wrappers/vitest4's own lock).
set -Eeuo pipefail
# A failed step names itself: set -e alone ends the script without a word.
trap 'echo "capture-fixtures: line $LINENO failed: $BASH_COMMAND" >&2' ERR

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/crates/greenlight-digest/tests/fixtures"
WORK="${GREENLIGHT_FIXTURE_WORKDIR:-/tmp/greenlight-fixtures}"
FILTERS=("$@")
DATE="$(date -u +%Y-%m-%d)"

export GOFLAGS=-count=1
unset CARGO_TARGET_DIR

rm -rf "$WORK"
mkdir -p "$WORK"
cp -R "$ROOT/fixtures/projects/." "$WORK/"

# wanted ID: whether case ID is selected by the filters: a filter names a whole case or a
# whole format, never part of a name (`go-build/` must not recapture `cargo-build/*`).
wanted() {
  local f
  [[ ${#FILTERS[@]} -eq 0 ]] && return 0
  for f in "${FILTERS[@]}"; do
    [[ "$1" == "$f" || "$1" == "${f%/}/"* ]] && return 0
  done
  return 1
}

# some_wanted PREFIX: whether a case whose id starts with PREFIX may be selected (what a block
# that installs tools for several cases asks before installing them).
some_wanted() {
  local f
  [[ ${#FILTERS[@]} -eq 0 ]] && return 0
  for f in "${FILTERS[@]}"; do
    [[ "$f" == "$1"* || "$1" == "${f%/}/"* ]] && return 0
  done
  return 1
}

# The npm install is skipped only when every filter names a Rust, Python, Go or shellcheck case.
needs_js=$((${#FILTERS[@]} == 0))
for f in "${FILTERS[@]}"; do
  case "$f" in
    cargo* | nextest* | pytest* | unittest* | go* | *shellcheck* | node-test/npm* | node-test/pnpm* | gcc* | clang* | mypy* | ruff* | pyright* | biome* | deno* | prettier*) ;;
    *) needs_js=1 ;;
  esac
done
if [[ $needs_js -eq 1 ]]; then
  # `npm ci` from the committed lock: the same dependency tree every time, and no failure when
  # the registry gains a release whose own dependencies it does not hold yet.
  (cd "$WORK/js" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
JSBIN="$WORK/js/node_modules/.bin"

json_string() {
  python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"
}

# capture FORMAT CASE DIR TOOL VERSION_CMD REPORT -- CMD...
#   REPORT: name of a structured report file the command leaves in DIR ("" for none)
capture() {
  local format="$1" case="$2" dir="$3" tool="$4" version_cmd="$5" report="$6"
  shift 7
  local id="$format/$case"
  if ! wanted "$id"; then
    return 0
  fi
  local dest="$OUT/$format/$case"
  rm -rf "$dest"
  mkdir -p "$dest"
  local version
  # sed, not head: head's early exit sends SIGPIPE to a tool still writing its version text
  # (make --version), and pipefail would then end the whole capture without a word.
  version="$(cd "$WORK/$dir" && bash -c "$version_cmd" 2>&1 | sed -n 1p)"
  local code=0
  (cd "$WORK/$dir" && bash -c "$*") >"$dest/output.txt" 2>&1 </dev/null || code=$?
  local report_name=null
  if [[ -n "$report" ]]; then
    local ext="${report##*.}"
    cp "$WORK/$dir/$report" "$dest/report.$ext"
    report_name="$(json_string "report.$ext")"
  fi
  cat >"$dest/meta.json" <<EOF
{
  "tool": $(json_string "$tool"),
  "version": $(json_string "$version"),
  "command": $(json_string "$*"),
  "project": $(json_string "fixtures/projects/$dir"),
  "root": $(json_string "$WORK/$dir"),
  "exit_code": $code,
  "captured": "$DATE",
  "report": $report_name
}
EOF
  echo "captured $id (exit $code, $(wc -c <"$dest/output.txt") bytes)"
}

# A separate run that only produces the structured report (for tools whose report replaces the
# human output): report_only DIR FILE -- CMD...
report_only() {
  local dir="$1" file="$2"
  shift 3
  (cd "$WORK/$dir" && bash -c "$*") >"$WORK/$dir/$file" 2>/dev/null </dev/null || true
}

CARGO_V="cargo --version"
NEXTEST_V="cargo nextest --version"
NEXTEST_JUNIT="target/nextest/default/junit.xml"

# ---- Rust: cargo test (libtest), cargo nextest, cargo build / clippy ----
capture cargo-test pass rust/pass cargo "$CARGO_V" "" -- cargo test
capture cargo-test fail rust/fail cargo "$CARGO_V" "" -- cargo test
capture cargo-test fail-no-fail-fast rust/fail cargo "$CARGO_V" "" -- cargo test --no-fail-fast
capture cargo-test fail-color rust/fail cargo "$CARGO_V" "" -- cargo test --color=always -- --color=always
capture cargo-test warn rust/warn cargo "$CARGO_V" "" -- cargo test
capture cargo-build test-compile-error rust/compile-error cargo "$CARGO_V" "" -- cargo test
capture cargo-test large rust/large cargo "$CARGO_V" "" -- cargo test
capture nextest pass rust/pass cargo-nextest "$NEXTEST_V" "$NEXTEST_JUNIT" -- cargo nextest run
capture nextest fail rust/fail cargo-nextest "$NEXTEST_V" "$NEXTEST_JUNIT" -- cargo nextest run --no-fail-fast
capture nextest fail-fast rust/fail cargo-nextest "$NEXTEST_V" "$NEXTEST_JUNIT" -- cargo nextest run
capture nextest large rust/large cargo-nextest "$NEXTEST_V" "$NEXTEST_JUNIT" -- cargo nextest run --no-fail-fast
capture cargo-build compile-error rust/compile-error cargo "$CARGO_V" "" -- cargo build
capture cargo-build warn rust/warn cargo "$CARGO_V" "" -- cargo build
capture cargo-build clippy rust/warn cargo-clippy "cargo clippy --version" "" -- cargo clippy
capture cargo-build compile-error-color rust/compile-error cargo "$CARGO_V" "" -- cargo build --color=always

# Failures whose values must reach the message, std-library panic locations, a doctest
# section after the unit tests, `-q`, and cargo's closing lines after a failed build.
capture cargo-test values rust/fail-more cargo "$CARGO_V" "" -- RUST_BACKTRACE=0 cargo test --no-fail-fast
capture cargo-test values-backtrace rust/fail-more cargo "$CARGO_V" "" -- RUST_BACKTRACE=1 cargo test --lib
capture cargo-test values-q rust/fail-more cargo "$CARGO_V" "" -- RUST_BACKTRACE=0 cargo test -q --no-fail-fast
capture cargo-test rerun-trailer rust/fail cargo "$CARGO_V" "" -- RUST_BACKTRACE=0 cargo test --lib
capture nextest values rust/fail-more cargo-nextest "$NEXTEST_V" "$NEXTEST_JUNIT" -- RUST_BACKTRACE=0 cargo nextest run --no-fail-fast
capture cargo-build nextest-compile-error rust/compile-error cargo-nextest "$NEXTEST_V" "" -- cargo nextest run
capture cargo-build clippy-lints rust/clippy-lints cargo-clippy "cargo clippy --version" "" -- cargo clippy
# `--nocapture`: a test's print without a newline has a result line glued to it (another
# test's in a parallel run, its own with one thread).
capture cargo-test glue-nocapture rust/glue cargo "$CARGO_V" "" -- RUST_BACKTRACE=0 cargo test -- --nocapture
capture cargo-test glue-nocapture-1 rust/glue cargo "$CARGO_V" "" -- RUST_BACKTRACE=0 cargo test -- --nocapture --test-threads=1
capture cargo-build clippy-lints-color rust/clippy-lints cargo-clippy "cargo clippy --version" "" -- cargo clippy --color=always

# ---- Python: pytest and unittest ----
# A virtualenv inside the working directory, so the interpreter path pytest -v prints is the
# same everywhere; it reuses the pytest installed for the system interpreter.
python3 -m venv --system-site-packages "$WORK/venv"
PATH="$WORK/venv/bin:$PATH"
PYTEST_V="python3 -m pytest --version"
capture pytest pass python/pass pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --junitxml=report.xml
capture pytest fail python/fail pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --junitxml=report.xml
capture pytest fail-q python/fail pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider -q --junitxml=report.xml
capture pytest fail-v python/fail pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider -v --junitxml=report.xml
capture pytest fail-ra python/fail pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider -rA --junitxml=report.xml
capture pytest fail-color python/fail pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --color=yes --junitxml=report.xml
capture pytest collection-error python/collection-error pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --junitxml=report.xml
capture pytest large python/large pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider -v --junitxml=report.xml
capture pytest syntax-error python/syntax-error pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --junitxml=report.xml
capture pytest syntax-error-color python/syntax-error pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --color=yes --junitxml=report.xml
capture pytest lib-frames python/lib-frames pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --junitxml=report.xml
capture pytest tb-line python/fail pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --tb=line --junitxml=report.xml
capture pytest tb-short python/lib-frames pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --tb=short --junitxml=report.xml
# `-s`: a test's print without a newline shares a line with pytest's progress.
capture pytest glue-s python/glue pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider -s --junitxml=report.xml
capture pytest glue-s-v python/glue pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider -s -v --junitxml=report.xml
capture unittest fail python/unittest-fail python3 "python3 --version" "" -- python3 -m unittest
capture unittest fail-v python/unittest-fail python3 "python3 --version" "" -- python3 -m unittest -v
capture unittest lib-frames python/unittest-lib python3 "python3 --version" "" -- python3 -m unittest
capture unittest pass python/unittest-pass python3 "python3 --version" "" -- python3 -m unittest

# ---- Go: go test (plain, -v, -json) and build failures; go test -json is the report ----
GO_V="go version"
for proj in pass fail build-fail large lib-panic; do
  report_only "go/$proj" report.json -- go test -json ./...
done
report_only go/timeout report.json -- go test -json -timeout 2s ./...
capture go-test pass go/pass go "$GO_V" report.json -- go test ./...
capture go-test pass-v go/pass go "$GO_V" report.json -- go test -v ./...
capture go-test fail go/fail go "$GO_V" report.json -- go test ./...
capture go-test fail-v go/fail go "$GO_V" report.json -- go test -v ./...
capture go-test fail-json go/fail go "$GO_V" "" -- go test -json ./...
capture go-test build-fail go/build-fail go "$GO_V" report.json -- go test ./...
capture go-test large go/large go "$GO_V" report.json -- go test -v ./...
capture go-test timeout go/timeout go "$GO_V" report.json -- go test -timeout 2s ./...
capture go-test timeout-v go/timeout go "$GO_V" report.json -- go test -v -timeout 2s ./...
capture go-test lib-panic go/lib-panic go "$GO_V" report.json -- go test ./...
# Tests that print without a trailing newline: the testing package's next line (a `--- FAIL`,
# a `--- PASS`, a subtest's `=== RUN`) is glued to their output, mid-line. No report: go
# 1.19's test2json reads results only at the start of a line and loses these too (the
# expected digests are in tests/glued.rs).
capture go-test glue go/glue go "$GO_V" "" -- go test ./...
capture go-test glue-one go/glue go "$GO_V" "" -- go test ./glue
capture go-test glue-v go/glue go "$GO_V" "" -- go test -v ./...
capture go-test glue-json go/glue go "$GO_V" "" -- go test -json ./...

# ---- JavaScript / TypeScript ----
NODE_V="node --version"
capture node-test spec js/node-test node "$NODE_V" report.xml -- node --test --test-reporter=spec --test-reporter-destination=stdout --test-reporter=junit --test-reporter-destination=report.xml
capture node-test tap js/node-test node "$NODE_V" "" -- node --test --test-reporter=tap
capture node-test pass js/node-test node "$NODE_V" "" -- node --test --test-reporter=spec pass.test.mjs
capture tap tape js/tape tape "node -p \"require('tape/package.json').version\"" "" -- node test.js
# A node-tap test file prints TAP when run directly (the `tap` runner's TypeScript plugin does
# not load next to TypeScript 7).
capture tap node-tap js/node-tap tap "$JSBIN/tap --version" "" -- node math.test.js
capture tap mocha js/mocha mocha "$JSBIN/mocha --version" "" -- "$JSBIN/mocha" --reporter tap math.test.js
capture tap tape-groups js/tape-groups tape "node -p \"require('tape/package.json').version\"" "" -- node test.js
capture tap node-tap-sub js/node-tap-sub tap "$JSBIN/tap --version" "" -- node math.test.js
report_only js/mocha-spec report.json -- "$JSBIN/mocha" --reporter json math.test.js
capture mocha spec js/mocha-spec mocha "$JSBIN/mocha --version" report.json -- "$JSBIN/mocha" math.test.js
capture mocha spec-color js/mocha-spec mocha "$JSBIN/mocha --version" report.json -- "$JSBIN/mocha" --color math.test.js
capture mocha spec-pty js/mocha-spec mocha "$JSBIN/mocha --version" report.json -- script -qec "'$JSBIN/mocha math.test.js'" /dev/null
capture mocha pass js/mocha mocha "$JSBIN/mocha --version" "" -- "$JSBIN/mocha" --grep 'adds$' math.test.js
capture tap mocha-spec js/mocha-spec mocha "$JSBIN/mocha --version" "" -- "$JSBIN/mocha" --reporter tap math.test.js
capture node-test syntax-error js/node-syntax node "$NODE_V" report.xml -- node --test --test-reporter=spec --test-reporter-destination=stdout --test-reporter=junit --test-reporter-destination=report.xml
capture node-test syntax-error-tap js/node-syntax node "$NODE_V" "" -- node --test --test-reporter=tap
capture vitest syntax-error js/vitest-syntax vitest "$JSBIN/vitest --version" report.xml -- "$JSBIN/vitest" run --reporter=default --reporter=junit --outputFile.junit=report.xml
capture jest syntax-error js/jest-syntax jest "$JSBIN/jest --version" report.json -- "$JSBIN/jest" --ci --json --outputFile=report.json
capture jest syntax-error-color js/jest-syntax jest "$JSBIN/jest --version" report.json -- FORCE_COLOR=1 "$JSBIN/jest" --ci --json --outputFile=report.json
BUN_V="$JSBIN/bun --version"
BUN_JUNIT="--reporter=junit --reporter-outfile=report.xml"
capture bun-test more js/bun-more bun "$BUN_V" report.xml -- "$JSBIN/bun" test $BUN_JUNIT
capture bun-test more-color js/bun-more bun "$BUN_V" report.xml -- FORCE_COLOR=1 "$JSBIN/bun" test $BUN_JUNIT
capture bun-test more-pty js/bun-more bun "$BUN_V" report.xml -- script -qec "'$JSBIN/bun test $BUN_JUNIT'" /dev/null
capture bun-test syntax-error js/bun-syntax bun "$BUN_V" report.xml -- "$JSBIN/bun" test $BUN_JUNIT
capture bun-test syntax-error-pty js/bun-syntax bun "$BUN_V" report.xml -- script -qec "'$JSBIN/bun test $BUN_JUNIT'" /dev/null
capture bun-test pass js/bun-pass bun "$BUN_V" report.xml -- "$JSBIN/bun" test $BUN_JUNIT
capture bun-test pass-pty js/bun-pass bun "$BUN_V" report.xml -- script -qec "'$JSBIN/bun test $BUN_JUNIT'" /dev/null
capture bun-test fail js/bun bun "$JSBIN/bun --version" report.xml -- "$JSBIN/bun" test --reporter=junit --reporter-outfile=report.xml
capture vitest fail js/vitest vitest "$JSBIN/vitest --version" report.xml -- "$JSBIN/vitest" run --reporter=default --reporter=junit --outputFile.junit=report.xml
capture vitest fail-color js/vitest vitest "$JSBIN/vitest --version" report.xml -- FORCE_COLOR=1 "$JSBIN/vitest" run --reporter=default --reporter=junit --outputFile.junit=report.xml
capture jest fail js/jest jest "$JSBIN/jest --version" report.json -- "$JSBIN/jest" --ci --json --outputFile=report.json
capture jest fail-verbose js/jest jest "$JSBIN/jest --version" report.json -- "$JSBIN/jest" --ci --verbose --json --outputFile=report.json
# A test writing without a newline: the file's `FAIL` header is glued to it.
capture jest glue js/jest-glue jest "$JSBIN/jest --version" report.json -- "$JSBIN/jest" --ci --json --outputFile=report.json
# The same with a failing test: mocha's TAP `not ok` point is glued to its output.
capture tap mocha-glue js/mocha-glue mocha "$JSBIN/mocha --version" "" -- "$JSBIN/mocha" --reporter tap glue.test.js
# `--json` without `--outputFile`: the report is printed after the summary.
capture jest json-stdout js/jest jest "$JSBIN/jest --version" "" -- "$JSBIN/jest" --ci --json
capture jest large js/large jest "$JSBIN/jest --version" report.json -- "$JSBIN/jest" --ci --verbose --json --outputFile=report.json
capture tsc plain js/tsc tsc "$JSBIN/tsc --version" "" -- "$JSBIN/tsc" -p . --pretty false
capture tsc pretty js/tsc tsc "$JSBIN/tsc --version" "" -- "$JSBIN/tsc" -p . --pretty true
report_only js/eslint report.json -- "$JSBIN/eslint" -f json .
capture eslint stylish js/eslint eslint "$JSBIN/eslint --version" report.json -- "$JSBIN/eslint" .
capture eslint stylish-color js/eslint eslint "$JSBIN/eslint --version" report.json -- "$JSBIN/eslint" --color .

# ---- Tools without a parser of their own, read through GitHub problem matchers ----
# Stored under matchers/runs/, beside the matcher files (tests/fixtures/matchers/*.json) that
# read them; tests/matchers.rs holds their expected problems.
report_only go/vet report.json -- 'go vet -json ./... 2>&1'
capture matchers/runs go-vet go/vet go "$GO_V" report.json -- go vet ./...
capture matchers/runs python-traceback python/traceback python3 "python3 --version" "" -- python3 main.py
capture matchers/runs eslint-compact js/eslint eslint "$JSBIN/eslint --version" report.json -- "$JSBIN/eslint" -f compact .
capture matchers/runs rustfmt-check rust/unformatted rustfmt "cargo fmt --version" "" -- cargo fmt --check
report_only shell/lint report.json -- 'shellcheck -f json1 *.sh'
capture matchers/runs shellcheck-gcc shell/lint shellcheck "shellcheck --version | sed -n 2p" report.json -- 'shellcheck -f gcc *.sh'

# ---- Wrappers and compound commands around the tools above ----
# npm, pnpm, make, tox, nox and uv print their own lines around the tool they run; the digest
# reads those as noise (docs/digest.md, "Wrappers"). The wrappers are installed inside the
# working directory, pinned, so every capture runs the same versions.
capture_wrappers() {
  local venv="$WORK/wrap-venv" pnpm="$WORK/wrap-npm/node_modules/.bin/pnpm"
  python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install --quiet tox==4.67.15 nox==2026.10.20 uv==0.13.9
  npm install --prefix "$WORK/wrap-npm" --no-audit --no-fund --loglevel=error pnpm@10.34.8 >/dev/null
  local tox="$venv/bin/tox" nox="$venv/bin/nox" uv="$venv/bin/uv"
  # npm workspaces: each package's `node --test` under npm's `> pkg@1.0.0 test` header.
  capture node-test npm-workspaces wrappers/npm-ws npm "npm --version" "" -- npm test --workspaces
  # pnpm -r, one package at a time: every line of a package's run carries its prefix.
  capture node-test pnpm-r wrappers/npm-ws pnpm "$pnpm --version" "" -- "$pnpm" -r --workspace-concurrency=1 test
  # pnpm -r's append-only reporter: every line carries `packages/<name> test: `.
  capture node-test pnpm-r-prefixed wrappers/npm-ws pnpm "$pnpm --version" "" -- "$pnpm" -r --reporter=append-only test
  # make -C into a subdirectory that runs pytest.
  capture pytest make-c wrappers/make make "make --version" "" -- make
  capture pytest tox wrappers/tox tox "$tox --version" "" -- "$tox" -q
  capture pytest nox wrappers/tox nox "$nox --version" "" -- "$nox"
  capture pytest uv-run wrappers/tox uv "$uv --version" "" -- "$uv" run --no-project --with pytest==9.2.0 python -m pytest -p no:cacheprovider
  # Compound commands: two pytest sessions in one output.
  capture pytest two-sessions python/fail pytest "$PYTEST_V" "" -- "python3 -m pytest -p no:cacheprovider test_math.py; python3 -m pytest -p no:cacheprovider -k add"
  # A check the digest cannot read, then a passing pytest: the exit code is pytest's 0.
  capture pytest compound-unread wrappers/compound pytest "$PYTEST_V" "" -- "python3 check_config.py; python3 -m pytest -p no:cacheprovider"
  # Variants of pytest's own output: class tests, ` - ` in a node id, a missing fixture, a
  # location printed by a test, native tracebacks, and a run over a minute (the conftest moves
  # pytest's own clock on at the end of the session; pytest itself prints the suffix).
  capture pytest variants wrappers/pyvariants pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --junitxml=report.xml
  capture pytest variants-native wrappers/pyvariants pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --tb=native --junitxml=report.xml
  capture pytest over-a-minute wrappers/pyslow pytest "$PYTEST_V" report.xml -- python3 -m pytest -p no:cacheprovider --junitxml=report.xml
}
if some_wanted node-test/npm-workspaces || some_wanted node-test/pnpm-r || some_wanted pytest/make-c \
  || some_wanted pytest/tox || some_wanted pytest/nox || some_wanted pytest/uv-run \
  || some_wanted pytest/two-sessions || some_wanted pytest/variants \
  || some_wanted pytest/over-a-minute || some_wanted pytest/compound-unread; then
  capture_wrappers
fi

# vitest 4: tests failing with one shared error under several FAIL headers, a file whose import
# fails, a file that does not parse (vite names it with `File: path:line:col`), and the GitHub
# Actions reporter's annotations after the summary. Its own lock, beside the other JS projects'.
capture_vitest4() {
  (cd "$WORK/wrappers/vitest4" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  local vitest="$WORK/wrappers/vitest4/node_modules/.bin/vitest"
  capture vitest v4 wrappers/vitest4 vitest "$vitest --version" report.xml -- "$vitest" run --reporter=default --reporter=junit --outputFile.junit=report.xml
  capture vitest v4-github wrappers/vitest4 vitest "$vitest --version" report.xml -- GITHUB_ACTIONS=true "$vitest" run --reporter=default --reporter=github-actions --reporter=junit --outputFile.junit=report.xml
}
if some_wanted vitest/v4; then
  capture_vitest4
fi

# ---- Line-based linters, type checkers, compilers and format checkers ----
# Needs gcc, clang, make, shellcheck and go (`apt-get install gcc clang make shellcheck
# golang-go`); mypy, ruff (pip, pinned in fixtures/projects/lint/tools/requirements.txt) and
# biome, deno, prettier, pyright and eslint's unix formatter (npm, locked in
# fixtures/projects/lint/tools/package-lock.json) are installed under the work directory. shellcheck, go build and eslint print nothing on a
# clean run: they have no clean case. Beside each case, truth.json holds the problems the
# tool's own structured report lists (scripts/lint-truth.py turns it into one shape), or, where
# the tool has none, its one-line rendering or the mistakes planted in the project.
lint_cases_wanted() {
  local id
  for id in gcc/ clang/ mypy/ ruff/ pyright/ shellcheck/ go-build/build go-build/vet biome/ deno/ deno-test/ prettier/ eslint/compact eslint/unix; do
    some_wanted "$id" && return 0
  done
  return 1
}

# lint_truth FORMAT CASE DIR KIND -- CMD...: runs CMD in DIR (stdout and stderr) and stores the
# problems of its structured report as FORMAT/CASE/truth.json.
lint_truth() {
  local format="$1" case="$2" dir="$3" kind="$4"
  shift 5
  wanted "$format/$case" || return 0
  (cd "$WORK/$dir" && bash -c "$*") >"$WORK/truth.report" 2>&1 </dev/null || true
  python3 "$ROOT/scripts/lint-truth.py" "$kind" "$WORK/truth.report" "$OUT/$format/$case/truth.json"
}

if lint_cases_wanted; then
  LT="$WORK/lint/tools"
  python3 -m venv "$LT/venv"
  "$LT/venv/bin/pip" install --quiet --disable-pip-version-check -r "$LT/requirements.txt"
  (cd "$LT" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  PY="$LT/venv/bin"
  NB="$LT/node_modules/.bin"

  # gcc and clang through make, as a gate runs them; -k builds every object, -B even fresh ones.
  capture gcc make lint/c gcc "gcc --version" "" -- make -k -B CC=gcc
  lint_truth gcc make lint/c gcc-json -- 'for f in *.c; do gcc -Wall -Wextra -c -o /dev/null -fdiagnostics-format=json $f 2>&1; done | python3 -c "import json,sys; print(json.dumps([d for l in sys.stdin if l.startswith(\"[\") for d in json.loads(l)]))"'
  capture gcc make-color lint/c gcc "gcc --version" "" -- make -k -B CC=gcc "CFLAGS='-Wall -Wextra -fdiagnostics-color=always'"
  lint_truth gcc make-color lint/c gcc-json -- 'for f in *.c; do gcc -Wall -Wextra -c -o /dev/null -fdiagnostics-format=json $f 2>&1; done | python3 -c "import json,sys; print(json.dumps([d for l in sys.stdin if l.startswith(\"[\") for d in json.loads(l)]))"'
  capture gcc clean lint/c-clean gcc "gcc --version" "" -- make -B CC=gcc
  lint_truth gcc clean lint/c-clean gcc-json -- 'gcc -Wall -Wextra -c -o /dev/null -fdiagnostics-format=json ok.c 2>&1; true'
  capture clang make lint/c clang "clang --version" "" -- make -k -B CC=clang
  lint_truth clang make lint/c cc-plain -- 'for f in *.c; do clang -Wall -Wextra -fsyntax-only -fno-caret-diagnostics -fno-color-diagnostics $f; done'
  capture clang make-color lint/c clang "clang --version" "" -- make -k -B CC=clang "CFLAGS='-Wall -Wextra -fcolor-diagnostics'"
  lint_truth clang make-color lint/c cc-plain -- 'for f in *.c; do clang -Wall -Wextra -fsyntax-only -fno-caret-diagnostics -fno-color-diagnostics $f; done'
  capture clang clean lint/c-clean clang "clang --version" "" -- make -B CC=clang
  lint_truth clang clean lint/c-clean cc-plain -- 'clang -Wall -Wextra -fsyntax-only ok.c'

  MYPY_V="$PY/mypy --version"
  capture mypy errors lint/py mypy "$MYPY_V" "" -- "$PY/mypy" --no-incremental --cache-dir=/dev/null .
  lint_truth mypy errors lint/py mypy-json -- "$PY/mypy" --no-incremental --cache-dir=/dev/null -O json .
  capture mypy pretty lint/py mypy "$MYPY_V" "" -- "$PY/mypy" --no-incremental --cache-dir=/dev/null --pretty .
  lint_truth mypy pretty lint/py mypy-json -- "$PY/mypy" --no-incremental --cache-dir=/dev/null -O json .
  capture mypy color lint/py mypy "$MYPY_V" "" -- MYPY_FORCE_COLOR=1 "$PY/mypy" --no-incremental --cache-dir=/dev/null .
  lint_truth mypy color lint/py mypy-json -- "$PY/mypy" --no-incremental --cache-dir=/dev/null -O json .
  capture mypy clean lint/py-clean mypy "$MYPY_V" "" -- "$PY/mypy" --no-incremental --cache-dir=/dev/null .
  lint_truth mypy clean lint/py-clean mypy-json -- "$PY/mypy" --no-incremental --cache-dir=/dev/null -O json .

  RUFF_V="$PY/ruff --version"
  RUFF="$PY/ruff"
  capture ruff concise lint/py ruff "$RUFF_V" "" -- "$RUFF" check --no-cache --output-format=concise .
  lint_truth ruff concise lint/py ruff-json -- "$RUFF" check --no-cache --output-format=json .
  capture ruff full lint/py ruff "$RUFF_V" "" -- "$RUFF" check --no-cache --output-format=full .
  lint_truth ruff full lint/py ruff-json -- "$RUFF" check --no-cache --output-format=json .
  capture ruff full-color lint/py ruff "$RUFF_V" "" -- CLICOLOR_FORCE=1 "$RUFF" check --no-cache --output-format=full .
  lint_truth ruff full-color lint/py ruff-json -- "$RUFF" check --no-cache --output-format=json .
  capture ruff clean lint/py-clean ruff "$RUFF_V" "" -- "$RUFF" check --no-cache .
  lint_truth ruff clean lint/py-clean ruff-json -- "$RUFF" check --no-cache --output-format=json .
  capture ruff format-check lint/py ruff "$RUFF_V" "" -- "$RUFF" format --no-cache --check .
  lint_truth ruff format-check lint/py ruff-json -- "$RUFF" format --no-cache --check --output-format=json .
  capture ruff format-clean lint/py-clean ruff "$RUFF_V" "" -- "$RUFF" format --no-cache --check .
  lint_truth ruff format-clean lint/py-clean ruff-json -- "$RUFF" format --no-cache --check --output-format=json .

  capture pyright errors lint/py pyright "$NB/pyright --version" "" -- "$NB/pyright" .
  lint_truth pyright errors lint/py pyright-json -- "$NB/pyright" --outputjson .
  capture pyright clean lint/py-clean pyright "$NB/pyright --version" "" -- "$NB/pyright" .
  lint_truth pyright clean lint/py-clean pyright-json -- "$NB/pyright" --outputjson .

  SC_V="shellcheck --version | sed -n 2p"
  capture shellcheck tty shell/lint shellcheck "$SC_V" "" -- 'shellcheck *.sh'
  lint_truth shellcheck tty shell/lint shellcheck-json1 -- 'shellcheck -f json1 *.sh'
  capture shellcheck tty-color shell/lint shellcheck "$SC_V" "" -- 'shellcheck --color=always *.sh'
  lint_truth shellcheck tty-color shell/lint shellcheck-json1 -- 'shellcheck -f json1 *.sh'
  capture shellcheck gcc shell/lint shellcheck "$SC_V" "" -- 'shellcheck -f gcc *.sh'
  lint_truth shellcheck gcc shell/lint shellcheck-json1 -- 'shellcheck -f json1 *.sh'

  # go build has no structured report of its compile errors: truth.json for go-build/build is
  # the mistakes planted in fixtures/projects/lint/go, kept by hand (tests/lint.rs says so).
  capture go-build build lint/go go "$GO_V" "" -- go build ./...
  capture go-build vet go/vet go "$GO_V" "" -- go vet ./...
  lint_truth go-build vet go/vet go-vet-json -- 'go vet -json ./...'

  capture eslint compact js/eslint eslint "$JSBIN/eslint --version" "" -- "$JSBIN/eslint" -f compact .
  lint_truth eslint compact js/eslint eslint-json -- "$JSBIN/eslint" -f json .
  # eslint's `unix` formatter is a package of its own since eslint 9.
  capture eslint unix js/eslint eslint "$JSBIN/eslint --version" "" -- "$JSBIN/eslint" -f "$LT/node_modules/eslint-formatter-unix/index.js" .
  lint_truth eslint unix js/eslint eslint-json -- "$JSBIN/eslint" -f json .

  # sed, not head: biome panics when its output is closed early.
  BIOME_V="$NB/biome --version | sed -n 1p"
  capture biome lint lint/js biome "$BIOME_V" "" -- "$NB/biome" lint .
  lint_truth biome lint lint/js biome-json -- "$NB/biome" lint --reporter=json .
  capture biome check lint/js biome "$BIOME_V" "" -- "$NB/biome" check .
  lint_truth biome check lint/js biome-json -- "$NB/biome" check --reporter=json .
  capture biome check-color lint/js biome "$BIOME_V" "" -- "$NB/biome" check --colors=force .
  lint_truth biome check-color lint/js biome-json -- "$NB/biome" check --reporter=json .
  capture biome clean lint/js-clean biome "$BIOME_V" "" -- "$NB/biome" lint .
  lint_truth biome clean lint/js-clean biome-json -- "$NB/biome" lint --reporter=json .

  DENO_V="$NB/deno --version | sed -n 1p"
  capture deno lint lint/js deno "$DENO_V" "" -- NO_COLOR=1 "$NB/deno" lint
  lint_truth deno lint lint/js deno-json -- "$NB/deno" lint --json
  capture deno lint-color lint/js deno "$DENO_V" "" -- "$NB/deno" lint
  lint_truth deno lint-color lint/js deno-json -- "$NB/deno" lint --json
  capture deno lint-clean lint/js-clean deno "$DENO_V" "" -- "$NB/deno" lint
  lint_truth deno lint-clean lint/js-clean deno-json -- "$NB/deno" lint --json
  # deno fmt has no structured report: its truth is prettier's list of the same files.
  capture deno fmt-check lint/js deno "$DENO_V" "" -- "$NB/deno" fmt --check
  lint_truth deno fmt-check lint/js file-list -- "$NB/prettier" --list-different .
  capture deno fmt-clean lint/js-clean deno "$DENO_V" "" -- "$NB/deno" fmt --check
  lint_truth deno fmt-clean lint/js-clean file-list -- true

  # deno test: a passing run, failing assertions (one in a step), a module that throws outside
  # any test, and a run that fails to type-check. RUST_BACKTRACE=0: deno prints a Rust backtrace
  # after its closing error when the variable is set. No structured report of deno's has the
  # failures' messages: truth.json is what a person reads in the output, kept by hand.
  DENO_TEST="RUST_BACKTRACE=0 NO_COLOR=1 $NB/deno test"
  capture deno-test pass lint/deno-test deno "$DENO_V" "" -- "$DENO_TEST" pass_test.ts
  capture deno-test fail lint/deno-test deno "$DENO_V" "" -- "$DENO_TEST" math_test.ts pass_test.ts
  capture deno-test fail-color lint/deno-test deno "$DENO_V" "" -- "RUST_BACKTRACE=0 $NB/deno test" math_test.ts pass_test.ts
  capture deno-test uncaught lint/deno-test deno "$DENO_V" "" -- "$DENO_TEST" load_test.ts pass_test.ts
  capture deno-test type-error lint/deno-test deno "$DENO_V" "" -- "$DENO_TEST" typed

  PRETTIER_V="$NB/prettier --version"
  capture prettier check lint/js prettier "$PRETTIER_V" "" -- "$NB/prettier" --check .
  lint_truth prettier check lint/js file-list -- "$NB/prettier" --list-different .
  capture prettier check-color lint/js prettier "$PRETTIER_V" "" -- FORCE_COLOR=1 "$NB/prettier" --check .
  lint_truth prettier check-color lint/js file-list -- "$NB/prettier" --list-different .
  capture prettier clean lint/js-clean prettier "$PRETTIER_V" "" -- "$NB/prettier" --check .
  lint_truth prettier clean lint/js-clean file-list -- "$NB/prettier" --list-different .
fi

# ---- cargo build's one-line diagnostics and a failed build script ----
# truth.json: the compiler messages of `cargo build --message-format=json` of the same project
# (a failed build script has none: tests/lint.rs holds its place and message).
if some_wanted cargo-build/short || wanted cargo-build/build-script; then
  capture cargo-build short rust/compile-error cargo "$CARGO_V" "" -- cargo build --message-format=short
  lint_truth cargo-build short rust/compile-error cargo-json -- 'cargo clean -q; cargo build -q --message-format=json 2>/dev/null'
  capture cargo-build short-warn rust/warn cargo "$CARGO_V" "" -- 'cargo clean -q; cargo build --message-format=short'
  lint_truth cargo-build short-warn rust/warn cargo-json -- 'cargo clean -q; cargo build -q --message-format=json 2>/dev/null'
  capture cargo-build build-script rust/build-script-panic cargo "$CARGO_V" "" -- RUST_BACKTRACE=0 cargo build
fi
