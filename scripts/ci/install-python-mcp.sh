#!/usr/bin/env bash
# Installs the official Python MCP SDK (PyPI `mcp`) and `jsonschema` into a venv, so the MCP
# acceptance tests can drive `greenlight mcp` with a client written by another ecosystem
# (crates/greenlight/tests/cli/mcp/client.py).
#
# Usage: scripts/ci/install-python-mcp.sh [PREFIX]   (default: .tools/venv-mcp under the repo root)
#
# The venv's python is PREFIX/bin/python; the tests find it there, or at GREENLIGHT_PYTHON_MCP.
# Every package is pinned (the SDK's whole dependency set, as `pip freeze` listed it in the venv
# these tests were written against, on CPython 3.11), so a new SDK release changes nothing until
# the pins are moved here. A venv that already holds exactly these pins is left alone: a second
# run takes well under a second.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="${1:-$root/.tools/venv-mcp}"
python="${PYTHON:-python3}"

# The two packages the tests import, then what they pulled in. mcp needs Python 3.10 or newer.
pins="mcp==2.3.0
jsonschema==4.26.0
annotated-types==0.8.0
anyio==4.16.0
attrs==26.1.0
cffi==2.1.1
click==8.5.1
cryptography==50.0.2
h11==0.16.0
httpcore2==2.16.2
httpx2==2.16.2
idna==3.20
jsonschema-specifications==2025.9.1
mcp-types==2.3.0
opentelemetry-api==1.45.2
pycparser==3.12
pydantic==2.14.4
pydantic_core==2.50.5
PyJWT==2.15.1
python-multipart==0.0.34
referencing==0.37.0
rpds-py==2026.9.1
sse-starlette==3.7.0
starlette==1.10.0
truststore==0.10.5
typing-inspection==0.4.5
typing_extensions==4.16.0
uvicorn==0.54.0"

stamp="$prefix/greenlight-pins.txt"
if [[ -x "$prefix/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$pins" ]] &&
    "$prefix/bin/python" -c 'import mcp, jsonschema' >/dev/null 2>&1; then
    echo "install-python-mcp: $prefix already holds mcp 2.3.0 and jsonschema 4.26.0"
    exit 0
fi

if ! command -v "$python" >/dev/null 2>&1; then
    echo "install-python-mcp: $python is not installed; install Python 3.10+ (apt-get install python3 python3-venv) or set PYTHON" >&2
    exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "install-python-mcp: the mcp package needs Python 3.10 or newer; $python is $("$python" --version 2>&1)" >&2
    exit 1
fi

rm -rf "$prefix"
if ! "$python" -m venv "$prefix"; then
    echo "install-python-mcp: '$python -m venv' failed; install the venv module (apt-get install python3-venv)" >&2
    exit 1
fi
requirements="$(mktemp)"
trap 'rm -f "$requirements"' EXIT
printf '%s\n' "$pins" >"$requirements"
# --no-deps with the whole set pinned: pip installs exactly these, and `pip check` below says
# when a pin no longer satisfies what another package asks for.
"$prefix/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$requirements"
"$prefix/bin/python" -m pip check --disable-pip-version-check >/dev/null || {
    "$prefix/bin/python" -m pip check --disable-pip-version-check >&2
    echo "install-python-mcp: the pinned packages do not fit together (above); move the pins together" >&2
    exit 1
}
"$prefix/bin/python" -c 'import mcp, jsonschema' || {
    echo "install-python-mcp: mcp or jsonschema does not import from $prefix after the install" >&2
    exit 1
}
printf '%s' "$pins" >"$stamp"
echo "install-python-mcp: mcp 2.3.0 and jsonschema 4.26.0 in $prefix"
