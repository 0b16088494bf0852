//! Compiles the vendored Remote Workers API protos (`proto/`) with protox, a protobuf compiler
//! in pure Rust, so building needs no `protoc`. The REAPI and google types they use come from
//! `bazel-remote-apis`, the crate greenlight's REAPI client is built on, so a `google.rpc.Status`
//! or a `google.protobuf.Any` is one Rust type on both sides.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/google/devtools/remoteworkers/v1test2/bots.proto",
        "proto/google/devtools/remoteworkers/v1test2/command.proto",
        "proto/google/devtools/remoteworkers/v1test2/worker.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
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
