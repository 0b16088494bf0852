#!/usr/bin/env bash
# Runs what a newcomer runs, in a fresh clone of the committed HEAD, with a minimal PATH:
#
#   1. cargo run -p greenlight --no-default-features -- demo      (README, first command: the
#                                                 binary without remote execution and openai)
#   2. scripts/test                               (README, second command), which installs or
#                                                 checks the outside tools itself; its tests phase
#                                                 runs plain `cargo test --workspace` with the Rust
#                                                 toolchain alone on PATH first, so a test that
#                                                 needs an outside tool and is not marked
#                                                 #[ignore = "needs …: run scripts/test"] fails
#
# Under CI the checkout running scripts/test is itself that fresh clone on a fresh image: cloning
# it again would only repeat its build and its suite (CI once measured 2,136 s against 1,115 s
# with the repeat). There, step 1 runs in the checkout with the minimal PATH, and step 2 is the
# run that called this.
#
# PATH: cargo's bin directory plus /usr/sbin:/usr/bin:/sbin:/bin (dpkg needs the sbin ones).
# Everything else a developer's PATH holds (/usr/local/bin, version managers, .tools/) is gone.
# /usr/bin cannot be narrowed further for step 2: that is where apt-get puts what scripts/test
# installs, so on a machine that already has python3 or go in /usr/bin, step 2 finds them there;
# on a fresh CI image /usr/bin holds only the base system and step 2 installs them.
#
# The clone installs the agent CLIs (npm), the Python MCP SDK's venv and BuildGrid's venv itself,
# into its own .tools, with the minimal PATH's python3 (BuildGrid's with pyenv's 3.13 when there
# is one), and starts its own PostgreSQL and BuildGrid for its tests; cargo-nextest, when it
# must be installed, comes from the main checkout's .tools/cargo (GREENLIGHT_CARGO_TOOLS).
# The clone's cargo target dir is $CARGO_TARGET_DIR/fresh-clone (default target/fresh-clone),
# apart from the main target dir so the main build's binaries are never overwritten by the
# clone's. The first time, it is seeded with a copy of the main target dir's debug and release
# builds, as a CI cache would be: the clone's path differs, so its workspace crates build again,
# but the dependencies do not (a cold build of everything doubles the check's time and proves
# nothing about PATH). It is kept between runs. Uncommitted changes are not in the clone: commit
# first.
#
# Usage: scripts/fresh-clone-check.sh            (scripts/test runs it as its last phase)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo_bin="$(dirname "$(command -v cargo)")"
minimal="$cargo_bin:/usr/sbin:/usr/bin:/sbin:/bin"
# cargo-nextest, when scripts/test has to install it, goes once into the main checkout's
# .tools and is reused by the clone's run (built from source, when its wheel cannot be had, it
# takes minutes).
cargo_tools="${GREENLIGHT_CARGO_TOOLS:-$ROOT/.tools/cargo}"

# The environment a newcomer's shell has: this machine's, minus what locates tools or builds.
# Usage: newcomer DIR PATH COMMAND…
newcomer() {
    local dir="$1" path="$2"
    shift 2
    (
        cd "$dir"
        env -u RUSTFLAGS -u CARGO_BUILD_TARGET_DIR GREENLIGHT_FRESH_CLONE_CHECK=1 \
            GREENLIGHT_CARGO_TOOLS="$cargo_tools" scripts/ci/without-tools.sh "$path" "$@"
    )
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# demo DIR: step 1, in DIR.
demo() {
    echo "fresh-clone-check: 1/2 cargo run -p greenlight --no-default-features -- demo"
    newcomer "$1" "$minimal" cargo run --quiet -p greenlight --no-default-features -- demo >"$work/demo.log" 2>&1 || {
        tail -n 40 "$work/demo.log" >&2
        echo "fresh-clone-check: the demo failed in a fresh clone" >&2
        exit 1
    }
    tail -n 3 "$work/demo.log"
}

if [[ -n "${CI:-}" ]]; then
    demo "$ROOT"
    echo "fresh-clone-check: 2/2 scripts/test: this CI run (its checkout is the fresh clone)"
    echo "fresh-clone-check: the README's first command passes in CI's fresh clone"
    exit 0
fi

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/fresh-clone"
main_target="${CARGO_TARGET_DIR:-$ROOT/target}"
if [[ ! -d "$TARGET" ]]; then
    mkdir -p "$TARGET"
    for profile in debug release; do
        if [[ -d "$main_target/$profile" ]]; then
            echo "fresh-clone-check: seeding $TARGET/$profile from $main_target/$profile"
            cp -a --reflink=auto "$main_target/$profile" "$TARGET/"
        fi
    done
fi
export CARGO_TARGET_DIR="$TARGET"

git clone --quiet --no-hardlinks "$ROOT" "$work/greenlight"
echo "fresh-clone-check: cloned $(git -C "$work/greenlight" rev-parse --short HEAD) into $work/greenlight"
if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]]; then
    echo "fresh-clone-check: note: uncommitted changes in $ROOT are not part of this check"
fi

demo "$work/greenlight"
echo "fresh-clone-check: 2/2 scripts/test"
newcomer "$work/greenlight" "$minimal" scripts/test
echo "fresh-clone-check: both README commands pass in a fresh clone"
