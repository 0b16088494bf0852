//! The committed generated protobuf code is exactly what its protos generate.

use std::collections::BTreeMap;
use std::path::Path;

/// Every file of `dir` by name, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            (name, bytes)
        })
        .collect()
}

#[test]
fn committed_proto_code_is_what_the_protos_generate() {
    for target in greenlight_protogen::targets() {
        let fresh = tempfile::tempdir().expect("a temp dir");
        greenlight_protogen::generate(&target, fresh.path()).expect("the vendored protos compile");
        let generated = files(fresh.path());
        let committed = files(&target.committed);
        let dir = target.committed.display();
        assert!(
            !generated.is_empty(),
            "{} generated no code",
            target.proto_root.display()
        );
        assert_eq!(
            committed.keys().collect::<Vec<_>>(),
            generated.keys().collect::<Vec<_>>(),
            "{dir} holds other files than its protos generate; run scripts/gen-proto.sh and commit the result"
        );
        for (name, bytes) in &generated {
            assert!(
                committed[name] == *bytes,
                "{dir}/{name} differs from what its protos generate; run scripts/gen-proto.sh and commit the result"
            );
        }
    }
}
