#!/usr/bin/env bash
# Installs the real agent CLIs greenlight drives (`claude` and `codex`) from npm into a local
# prefix, so the flag-drift test can read their `--help` output.
#
# Usage: scripts/ci/install-agent-clis.sh [PREFIX]   (default: .tools/npm under the repo root)
#
# The executables land in PREFIX/node_modules/.bin. Point the test at them with
#   GREENLIGHT_AGENT_CLI_BIN=PREFIX/node_modules/.bin
# or leave it unset: the test also looks in .tools/npm/node_modules/.bin under the repo root.
# Versions float on purpose: the test exists to turn the build red when either CLI drops a flag.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="${1:-$root/.tools/npm}"
mkdir -p "$prefix"

if ! command -v npm >/dev/null 2>&1; then
    echo "install-agent-clis: npm is not installed; install Node.js 18+ (e.g. apt-get install nodejs npm)" >&2
    exit 1
fi

npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
    @anthropic-ai/claude-code @openai/codex

for tool in claude codex; do
    if [ ! -x "$prefix/node_modules/.bin/$tool" ]; then
        echo "install-agent-clis: $tool is missing from $prefix/node_modules/.bin after npm install" >&2
        exit 1
    fi
done
echo "install-agent-clis: claude $("$prefix/node_modules/.bin/claude" --version 2>/dev/null || echo '?')"
echo "install-agent-clis: codex $("$prefix/node_modules/.bin/codex" --version 2>/dev/null || echo '?')"
echo "install-agent-clis: export GREENLIGHT_AGENT_CLI_BIN=$prefix/node_modules/.bin"
