#!/usr/bin/env bash
# Whole-process throughput and peak memory of `greenlight digest` against `wc -l` on the same
# generated outputs (libtest and pytest -v, failures buried among passes), in one run.
#
# Targets: digest throughput at least 10 % of wc -l's; peak RSS under 32 MiB. Exits 1 when a
# target is missed, 2 when the binary or a tool is missing or a run fails.
# Usage: scripts/bench-digest.sh [SIZE_MB]   (default 200). Needs python3 and /usr/bin/time.
# Each tool runs REPEAT times (default 3) on the warm file and its fastest wall time counts, so
# one hiccup of a noisy machine does not decide the ratio. Set GREENLIGHT_BIN to measure a
# binary built elsewhere instead of building one. The generated files live in a temporary
# directory that is removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE_MB="${1:-200}"
REPEAT="${REPEAT:-3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

for tool in python3 /usr/bin/time wc; do
  command -v "$tool" >/dev/null || { echo "bench-digest: $tool is missing; install it" >&2; exit 2; }
done

if [[ -n "${GREENLIGHT_BIN:-}" ]]; then
  BIN="$GREENLIGHT_BIN"
else
  cargo build --quiet --release -p greenlight --manifest-path "$ROOT/Cargo.toml"
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/greenlight"
fi
if [[ ! -x "$BIN" ]]; then
  echo "bench-digest: no greenlight binary at $BIN; build it (cargo build --release -p greenlight) or set GREENLIGHT_BIN" >&2
  exit 2
fi

python3 - "$TMP" "$SIZE_MB" <<'EOF'
import sys
tmp, size = sys.argv[1], int(sys.argv[2]) * 1_000_000

def write(path, header, line, fail_every, failure_block, footer):
    with open(path, "w") as f:
        f.write(header)
        written, i, failed = 0, 0, []
        while written < size:
            if i % fail_every == fail_every - 1:
                failed.append(i)
                s = line(i, False)
            else:
                s = line(i, True)
            f.write(s)
            written += len(s)
            i += 1
        f.write(failure_block(failed))
        f.write(footer(i, failed))

write(
    f"{tmp}/libtest.txt",
    "\nrunning 5000000 tests\n",
    lambda i, ok: f"test module_{i // 1000}::case_{i} ... {'ok' if ok else 'FAILED'}\n",
    1_000_000,
    lambda failed: "\nfailures:\n\n" + "".join(
        f"---- module_{i // 1000}::case_{i} stdout ----\n\nthread 'module_{i // 1000}::case_{i}' panicked at src/lib.rs:{i % 900 + 1}:5:\nassertion failed\n\n"
        for i in failed
    ) + "\nfailures:\n" + "".join(f"    module_{i // 1000}::case_{i}\n" for i in failed),
    lambda n, failed: f"\ntest result: FAILED. {n - len(failed)} passed; {len(failed)} failed; 0 ignored; 0 measured; 0 filtered out; finished in 9.00s\n\n",
)

write(
    f"{tmp}/pytest.txt",
    "============================= test session starts ==============================\nplatform linux -- Python 3, pytest-9\nrootdir: /project\ncollected many items\n\n",
    lambda i, ok: f"tests/test_mod_{i // 1000}.py::test_case[{i}] {'PASSED' if ok else 'FAILED'}{' ' * 20}[ 50%]\n",
    1_000_000,
    lambda failed: "\n=================================== FAILURES ===================================\n" + "".join(
        f"_______________ test_case[{i}] _______________\n\n    def test_case():\n>       assert {i} == {i + 1}\nE       assert {i} == {i + 1}\n\ntests/test_mod_{i // 1000}.py:7: AssertionError\n"
        for i in failed
    ) + "=========================== short test summary info ============================\n" + "".join(
        f"FAILED tests/test_mod_{i // 1000}.py::test_case[{i}] - assert {i} == {i + 1}\n" for i in failed
    ),
    lambda n, failed: f"==== {len(failed)} failed, {n - len(failed)} passed in 99.00s ====\n",
)
EOF

# Runs "$@" REPEAT times; prints the fastest wall seconds and the largest peak RSS in KiB.
measure() {
  local best="" rss=0 t0 t1 s m
  for _ in $(seq "$REPEAT"); do
    t0=$EPOCHREALTIME
    if ! /usr/bin/time -f "%M" -o "$TMP/time" "$@" >"$TMP/out" 2>"$TMP/err"; then
      echo "bench-digest: $* failed:" >&2
      cat "$TMP/err" >&2
      exit 2
    fi
    t1=$EPOCHREALTIME
    s=$(python3 -c 'import sys; print(float(sys.argv[2]) - float(sys.argv[1]))' "$t0" "$t1")
    m=$(tail -n 1 "$TMP/time")
    if [[ -z "$best" ]] || python3 -c 'import sys; sys.exit(float(sys.argv[1]) >= float(sys.argv[2]))' "$s" "$best"; then
      best=$s
    fi
    if ((m > rss)); then rss=$m; fi
  done
  echo "$best $rss"
}

echo "greenlight digest vs wc -l on ${SIZE_MB} MB outputs, fastest of $REPEAT runs each ($BIN)"
printf '%-8s %11s %9s %9s %9s %13s  %s\n' format bytes wc_l_s digest_s ratio peak_rss_MiB digest
status=0
for name in libtest pytest; do
  file="$TMP/$name.txt"
  bytes=$(stat -c %s "$file")
  cat "$file" >/dev/null # warm the page cache for both tools alike
  read -r wc_s _ < <(measure wc -l "$file")
  read -r gl_s gl_rss < <(measure "$BIN" digest --json --exit-code 1 "$file")
  class=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["classification"], d["format"], len(d["failures"]), "failures")' "$TMP/out")
  python3 - "$name" "$bytes" "$wc_s" "$gl_s" "$gl_rss" "$class" >"$TMP/row" <<'EOF' || status=1
import sys
name, size, wc, gl, rss, cls = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
ratio = wc / gl * 100
ok = ratio >= 10 and rss < 32 * 1024
print(f"{name:8} {size:>11} {wc:>9.3f} {gl:>9.3f} {ratio:>7.1f} % {rss / 1024:>13.1f}  {cls}{'' if ok else '  <- target missed'}")
sys.exit(0 if ok else 1)
EOF
  cat "$TMP/row"
done
if ((status == 0)); then
  echo "targets met: throughput >= 10 % of wc -l's and peak RSS < 32 MiB, both outputs"
else
  echo "target missed: throughput must be >= 10 % of wc -l's and peak RSS < 32 MiB" >&2
fi
exit "$status"
