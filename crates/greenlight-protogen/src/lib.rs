//! The generated protobuf code greenlight commits, and how it is generated: the vendored
//! Remote Workers API protos (`crates/greenlight-worker/proto/`) compiled with protox, a
//! protobuf compiler in pure Rust, into `crates/greenlight-worker/src/proto/`.
//!
//! The code is committed so that building greenlight compiles neither protox nor prost-build
//! (and needs no `protoc`). `scripts/gen-proto.sh` rewrites it; the `committed` test fails
//! when it differs from what the protos generate. This crate is a separate one so that it
//! still runs when a proto change leaves the committed code unable to compile.

use std::path::{Path, PathBuf};

/// One set of generated code: which protos, from which include root, into which directory.
pub struct Target {
    /// The include root the protos and their imports are found under.
    pub proto_root: PathBuf,
    /// The protos to generate code for, relative to `proto_root`.
    pub files: &'static [&'static str],
    /// Where the generated code is committed (one file per proto package).
    pub committed: PathBuf,
}

/// The workspace's root (this crate lives in `crates/greenlight-protogen`).
fn workspace() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .to_path_buf()
}

/// Every set of generated code the workspace commits.
pub fn targets() -> Vec<Target> {
    let worker = workspace().join("crates/greenlight-worker");
    vec![Target {
        proto_root: worker.join("proto"),
        files: &[
            "google/devtools/remoteworkers/v1test2/bots.proto",
            "google/devtools/remoteworkers/v1test2/command.proto",
            "google/devtools/remoteworkers/v1test2/worker.proto",
        ],
        committed: worker.join("src/proto"),
    }]
}

/// Writes the generated code of `target`'s protos into `out`, one file per proto package.
///
/// The REAPI and google types the Remote Workers API uses come from `bazel-remote-apis`, the
/// crate greenlight's REAPI client is built on, so a `google.rpc.Status` or a
/// `google.protobuf.Any` is one Rust type on both sides. Only the client is generated.
pub fn generate(target: &Target, out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let files = target.files.iter().map(|file| target.proto_root.join(file));
    let descriptors = protox::compile(files, [&target.proto_root])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .out_dir(out)
        .extern_path(".google.api", "::bazel_remote_apis::google::api")
        .extern_path(".google.rpc", "::bazel_remote_apis::google::rpc")
        .extern_path(
            ".google.protobuf.Any",
            "::bazel_remote_apis::google::protobuf::Any",
        )
        .extern_path(
            ".google.protobuf.Timestamp",
            "::bazel_remote_apis::google::protobuf::Timestamp",
        )
        .extern_path(
            ".google.protobuf.Duration",
            "::bazel_remote_apis::google::protobuf::Duration",
        )
        .extern_path(".google.protobuf.FieldMask", "::prost_types::FieldMask")
        .compile_fds(descriptors)?;
    Ok(())
}
