#!/usr/bin/env bash
# Runs COMMAND with PATH set to NEW_PATH and without the variables that point the suite at the
# outside tools and services scripts/test provides (the agent CLIs, the Python MCP SDK's venv,
# BuildGrid, PostgreSQL, a Python or Node environment): what a newcomer's shell has. Used by the
# tests phase's Rust-only pass and by the fresh-clone check.
#
# Usage: scripts/ci/without-tools.sh NEW_PATH COMMAND…
set -euo pipefail
path="${1:?usage: scripts/ci/without-tools.sh NEW_PATH COMMAND…}"
shift
exec env -u GREENLIGHT_AGENT_CLI_BIN -u GREENLIGHT_PYTHON_MCP -u GREENLIGHT_BUILDGRID_VENV \
    -u GREENLIGHT_TEST_REAPI -u GREENLIGHT_TEST_PG -u VIRTUAL_ENV -u PYENV_VERSION -u NODE_PATH \
    PATH="$path" "$@"
