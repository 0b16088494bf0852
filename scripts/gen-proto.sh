#!/usr/bin/env bash
# Rewrites the committed generated protobuf code from the vendored protos (protox, no protoc):
# crates/greenlight-worker/src/proto/ from crates/greenlight-worker/proto/. Run it after
# changing a proto; greenlight-protogen's `committed` test fails until the result is committed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo run --quiet --manifest-path "$ROOT/Cargo.toml" -p greenlight-protogen
