#!/usr/bin/env bash
# Whole-process throughput and peak memory of `greenlight digest` against `wc -l` on the same
# generated 200 MB outputs (libtest and pytest -v, failures buried among passes), in one run.
#
# Targets: digest throughput at least 10 % of wc -l's; peak RSS under 32 MiB.
# Usage: scripts/bench-digest.sh [SIZE_MB]   (default 200). Needs python3 and /usr/bin/time.
# The generated files live in a temporary directory that is removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE_MB="${1:-200}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

cargo build --quiet --release -p greenlight --manifest-path "$ROOT/Cargo.toml"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/greenlight"

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

measure() { # prints "seconds max_rss_kib"
  /usr/bin/time -f "%e %M" -o "$TMP/time" "$@" >"$TMP/out" 2>/dev/null || true
  cat "$TMP/time"
}

echo "format   bytes       wc_l_s  digest_s  throughput_vs_wc  digest_peak_rss_mib  classification"
for name in libtest pytest; do
  file="$TMP/$name.txt"
  bytes=$(stat -c %s "$file")
  cat "$file" >/dev/null # warm the page cache for both tools alike
  read -r wc_s _ < <(measure wc -l "$file")
  read -r gl_s gl_rss < <(measure "$BIN" digest --json --exit-code 1 "$file")
  class=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["classification"], d["format"], len(d["failures"]))' "$TMP/out")
  python3 - "$name" "$bytes" "$wc_s" "$gl_s" "$gl_rss" "$class" <<'EOF'
import sys
name, size, wc, gl, rss, cls = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
wc, gl = max(wc, 0.01), max(gl, 0.01)
print(f"{name:8} {size:<11} {wc:<7.2f} {gl:<9.2f} {wc / gl * 100:>6.1f} %          {rss / 1024:>6.1f}               {cls}")
EOF
done
