//! Rewrites every committed set of generated protobuf code from its protos
//! (`scripts/gen-proto.sh` runs this).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for target in greenlight_protogen::targets() {
        std::fs::create_dir_all(&target.committed)?;
        greenlight_protogen::generate(&target, &target.committed)?;
    }
    Ok(())
}
