//! The Remote Workers API (`google.devtools.remoteworkers.v1test2`) as generated from the
//! vendored protos: the `Bots` client, `BotSession`, `Lease`, `Worker`.
#![allow(missing_docs, clippy::all)]
include!(concat!(
    env!("OUT_DIR"),
    "/google.devtools.remoteworkers.v1test2.rs"
));
