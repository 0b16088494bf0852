#!/usr/bin/env bash
# Installs BuildGrid (PyPI `buildgrid`, the REAPI server the remote-execution tests run against)
# into a venv; scripts/ci/remote-services.sh starts it from there.
#
# Usage: scripts/ci/install-buildgrid.sh [VENV]   (default: .tools/venv-buildgrid under the repo root)
#
# Two variants, chosen by the Python found:
#   0.9.1  on Python 3.13 or newer (BuildGrid 0.8.17 onward requires it): $PYTHON when set, else
#          python3.14 / python3.13 on PATH, else pyenv's ~/.pyenv/versions/3.1[3-9]*
#   0.4.4  on Debian's python3 (3.11; 0.4.4 is the last release that runs there), with
#          psycopg2-binary, because 0.4.4's PostgreSQL dialect is psycopg2's
# VENV/greenlight-variant names the one installed (0.9.1 or 0.4.4); remote-services.sh picks the
# matching config (scripts/ci/buildgrid.yml or buildgrid-0.4.yml) by it.
#
# Every package is pinned (each variant's whole dependency set, as `pip freeze` listed it), so a
# new release upstream changes nothing until the pins move here. A venv that already holds the
# pins of the variant this machine would get, and whose python still runs, is left alone: a
# second run takes well under a second.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${1:-$root/.tools/venv-buildgrid}"

pins_091="buildgrid==0.9.1
alembic==1.20.1
annotated-types==0.8.0
attrs==26.1.0
boto3==1.44.8
botocore==1.44.8
cachetools==8.0.2
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
click==8.5.1
cryptography==50.0.2
dnspython==2.9.2
grpcio==1.85.3
grpcio-health-checking==1.85.1
grpcio-reflection==1.85.1
idna==3.20
janus==2.0.0
Jinja2==3.1.6
jmespath==1.1.0
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
lark==1.3.1
Mako==1.4.3
MarkupSafe==3.0.4
mmh3==5.3.1
protobuf==7.36.2
psycopg==3.3.9
psycopg-binary==3.3.9
pycparser==3.12
pycurl==7.49.0
pydantic==2.14.4
pydantic_core==2.50.5
PyJWT==2.15.1
python-dateutil==2.9.0.post0
PyYAML==6.0.4
referencing==0.37.0
requests==2.34.2
rpds-py==2026.9.1
s3transfer==0.19.3
sentry-sdk==2.75.0
six==1.17.0
SQLAlchemy==2.1.9
typing-inspection==0.4.5
typing_extensions==4.16.0
urllib3==2.8.0"

pins_044="buildgrid==0.4.4
psycopg2-binary==2.9.13
aiohappyeyeballs==2.7.1
aiohttp==3.14.5
aiosignal==1.4.0
alembic==1.20.1
annotated-types==0.8.0
async-lru==2.4.0
attrs==26.1.0
boto3==1.44.8
botocore==1.44.8
buildgrid-metering-client==0.0.4
cachetools==8.0.2
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
click==8.5.1
cryptography==50.0.2
dnspython==2.9.2
frozenlist==1.8.0
grpcio==1.85.3
grpcio-health-checking==1.85.1
grpcio-reflection==1.85.1
idna==3.20
janus==2.0.0
Jinja2==3.1.6
jmespath==1.1.0
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
lark-parser==0.12.0
Mako==1.4.3
MarkupSafe==3.0.4
mmh3==5.3.1
multidict==7.2.1
propcache==0.5.4
protobuf==7.36.2
pycparser==3.12
pycurl==7.49.0
pydantic==2.14.4
pydantic_core==2.50.5
PyJWT==2.15.1
python-dateutil==2.9.0.post0
PyYAML==6.0.4
referencing==0.37.0
requests==2.34.2
rpds-py==2026.9.1
s3transfer==0.19.3
sentry-sdk==2.75.0
six==1.17.0
SQLAlchemy==2.1.9
tenacity==9.2.1
typing-inspection==0.4.5
typing_extensions==4.16.0
urllib3==2.8.0
yarl==1.25.1"

# at_least_313 PYTHON: PYTHON runs (a pyenv shim for a version not selected does not) and is
# CPython 3.13 or newer.
at_least_313() {
    "$1" -c 'import sys; sys.exit(sys.version_info < (3, 13))' >/dev/null 2>&1
}

find_python_313() {
    if [[ -n "${PYTHON:-}" ]]; then
        at_least_313 "$PYTHON" && echo "$PYTHON"
        return 0
    fi
    local candidate
    for candidate in python3.14 python3.13; do
        if command -v "$candidate" >/dev/null 2>&1 && at_least_313 "$candidate"; then
            command -v "$candidate"
            return 0
        fi
    done
    # pyenv's builds, newest first, whether or not pyenv selects them for this directory.
    while IFS= read -r candidate; do
        if at_least_313 "$candidate"; then
            echo "$candidate"
            return 0
        fi
    done < <(printf '%s\n' "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[3-9]*/bin/python3 | sort -rV)
}

python="$(find_python_313)"
if [[ -n "$python" ]]; then
    variant=0.9.1
    pins="$pins_091"
else
    variant=0.4.4
    pins="$pins_044"
    # Debian's python3 first: pyenv's shim on PATH may select some other version.
    python="${PYTHON:-$(command -v /usr/bin/python3 || command -v python3 || true)}"
    if [[ -z "$python" ]]; then
        echo "install-buildgrid: no python3 found; install Python 3.11+ (apt-get install python3 python3-venv) or set PYTHON" >&2
        exit 1
    fi
    if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
        echo "install-buildgrid: BuildGrid needs Python 3.11 or newer (3.13+ for BuildGrid 0.9.1); $python is $("$python" --version 2>&1)" >&2
        exit 1
    fi
fi

stamp="$venv/greenlight-pins.txt"
if [[ -x "$venv/bin/bgd" && -f "$stamp" && "$(cat "$stamp")" == "$pins" &&
    "$(cat "$venv/greenlight-variant" 2>/dev/null)" == "$variant" ]] &&
    "$venv/bin/python" -c 'import buildgrid' >/dev/null 2>&1; then
    echo "install-buildgrid: $venv already holds BuildGrid $variant"
    exit 0
fi

echo "install-buildgrid: installing BuildGrid $variant with $python ($("$python" --version 2>&1)) into $venv"
rm -rf "$venv"
if ! "$python" -m venv "$venv"; then
    echo "install-buildgrid: '$python -m venv' failed; install the venv module (apt-get install python3-venv)" >&2
    exit 1
fi
requirements="$(mktemp)"
trap 'rm -f "$requirements"' EXIT
printf '%s\n' "$pins" >"$requirements"
# --no-deps with the whole set pinned: pip installs exactly these, and `pip check` below says
# when a pin no longer satisfies what another package asks for.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$requirements"
"$venv/bin/python" -m pip check --disable-pip-version-check >/dev/null || {
    "$venv/bin/python" -m pip check --disable-pip-version-check >&2
    echo "install-buildgrid: the pinned packages do not fit together (above); move the pins together" >&2
    exit 1
}
"$venv/bin/bgd" --help >/dev/null || {
    echo "install-buildgrid: $venv/bin/bgd does not run after the install" >&2
    exit 1
}
# The stamp last: an install cut short leaves none, so the next run starts over.
printf '%s' "$variant" >"$venv/greenlight-variant"
printf '%s' "$pins" >"$stamp"
echo "install-buildgrid: BuildGrid $variant in $venv"
