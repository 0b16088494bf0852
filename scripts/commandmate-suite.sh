#!/usr/bin/env bash
# Runs CommandMate's own verify-runner suite (tests/fixtures/cmate-verify/run-tests.sh of
# Kewton/commandmate-skills) against greenlight: the suite picks its runner from VERIFY_RUN and
# runs it with `bash`, so VERIFY_RUN is a two-line script that execs `greenlight verify "$@"`.
# No network: the suite is not vendored, so pass a checkout of commandmate-skills.
#
#   scripts/commandmate-suite.sh PATH-TO-commandmate-skills [GREENLIGHT-BINARY]
#
# The binary defaults to target/debug/greenlight (build it with `cargo build -p greenlight`).
# Prints the suite's TAP lines and its closing `# tests: N passed, M failed`, then the failed
# assertions again, split in two: behaviour (exit codes, GATE/RESULT lines, files, processes)
# and wording (a message looked for in CommandMate's exact words, which greenlight words its own
# way, naming the same value). Exits 1 when any behaviour assertion failed, 0 otherwise.
set -u

suite_root=${1:?usage: scripts/commandmate-suite.sh PATH-TO-commandmate-skills [GREENLIGHT-BINARY]}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${2:-$here/target/debug/greenlight}
suite="$suite_root/tests/fixtures/cmate-verify/run-tests.sh"
[ -f "$suite" ] || { echo "commandmate-suite: no $suite; pass a commandmate-skills checkout" >&2; exit 2; }
[ -x "$bin" ] || { echo "commandmate-suite: no greenlight binary at $bin; run cargo build -p greenlight" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

work=$(mktemp -d "${TMPDIR:-/tmp}/greenlight-cm-suite.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
printf '#!/usr/bin/env bash\nexec %q verify "$@"\n' "$bin" > "$work/verify-run.sh"

# The suite's runs are CommandMate's, not this user's: record none of them.
GREENLIGHT_NO_RECORD=1 VERIFY_RUN="$work/verify-run.sh" bash "$suite" > "$work/out.txt" 2>&1
suite_code=$?
cat "$work/out.txt"

# An assertion that looks for CommandMate's own wording of a message (on stderr, or in out.N
# past the GATE/RESULT lines) rather than at an exit code, a GATE/RESULT line or a file.
grep '^not ok - ' "$work/out.txt" > "$work/failed.txt"
wording='\(not found in [^ ]*/(err\.[0-9]+|out\.[0-9]+): [^GR]'
behaviour=$(grep -Ev -- "$wording" "$work/failed.txt")
words=$(grep -E -- "$wording" "$work/failed.txt")
count() { if [ -z "$1" ]; then echo 0; else printf '%s\n' "$1" | wc -l | tr -d ' '; fi; }
echo
echo "# suite exit: $suite_code"
echo "# behaviour failures: $(count "$behaviour")"
[ -z "$behaviour" ] || printf '%s\n' "$behaviour" | sed 's/^/#   /'
echo "# wording failures (CommandMate's exact stderr text): $(count "$words")"
[ -z "$words" ] || printf '%s\n' "$words" | sed 's/^/#   /'
[ -z "$behaviour" ]
