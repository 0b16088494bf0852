#!/usr/bin/env bash
# Fills DIR with links to everything in /usr/bin and /bin except the tools scripts/test installs
# (python3, node, npm, go, hyperfine, pytest, cargo-nextest): with cargo's bin directory in front,
# it is the PATH of a machine that has the Rust toolchain and the base system alone. The suite's
# plain `cargo test --workspace` runs under it, so a test that needs an outside tool and is not
# marked #[ignore = "needs …: run scripts/test"] fails there, as it would for a newcomer.
#
# Usage: scripts/ci/rust-only-path.sh DIR
set -euo pipefail
dir="${1:?usage: scripts/ci/rust-only-path.sh DIR}"
mkdir -p "$dir"
for base in /usr/bin /bin; do
    for tool in "$base"/*; do
        name="${tool##*/}"
        case "$name" in
            python* | pip* | pydoc* | pytest* | py.test* | node | nodejs | npm | npx | corepack | \
                go | gofmt | hyperfine | cargo-nextest) continue ;;
        esac
        [[ -e "$dir/$name" ]] || ln -s "$tool" "$dir/$name"
    done
done
