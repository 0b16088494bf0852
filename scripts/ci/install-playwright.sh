#!/usr/bin/env bash
# Installs playwright-core from npm into a local prefix, so the dashboard's browser test can
# drive Debian's Chromium (playwright-core never downloads a browser; the test points it at
# /usr/bin/chromium, from `apt-get install chromium`).
#
# Usage: scripts/ci/install-playwright.sh [PREFIX]   (default: .tools/npm under the repo root)
#
# The package lands in PREFIX/node_modules/playwright-core. The test finds it there, or in the
# node_modules named by GREENLIGHT_NODE_MODULES.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="${1:-$root/.tools/npm}"
mkdir -p "$prefix"

if ! command -v npm >/dev/null 2>&1; then
    echo "install-playwright: npm is not installed; install Node.js 18+ (e.g. apt-get install nodejs npm)" >&2
    exit 1
fi

npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error playwright-core

if [ ! -f "$prefix/node_modules/playwright-core/package.json" ]; then
    echo "install-playwright: playwright-core is missing from $prefix/node_modules after npm install" >&2
    exit 1
fi
echo "install-playwright: playwright-core $(node -p "require('$prefix/node_modules/playwright-core/package.json').version")"
