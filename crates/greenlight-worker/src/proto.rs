//! The Remote Workers API (`google.devtools.remoteworkers.v1test2`) as generated from the
//! vendored protos: the `Bots` client, `BotSession`, `Lease`, `Worker`. The generated code is
//! committed: `scripts/gen-proto.sh` rewrites it and `greenlight-protogen`'s `committed` test
//! checks it, so building the worker compiles no protos.
#![allow(missing_docs, clippy::all)]
include!("proto/google.devtools.remoteworkers.v1test2.rs");
