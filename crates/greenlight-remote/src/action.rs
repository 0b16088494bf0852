//! From what a caller wants run to the `Command` and `Action` messages whose digest is the
//! cache key: argv, the declared environment and the platform, each in the one order the
//! protocol fixes, so equal requests have equal digests on every machine.

use std::collections::BTreeMap;
use std::time::Duration;

use bazel_remote_apis::build::bazel::remote::execution::v2 as reapi;
use bazel_remote_apis::google::protobuf;

use crate::blobs::BlobSet;
use crate::digest::{Digest, DigestProto, digest_of};

pub use greenlight_types::remote::ActionSpec;

/// The platform property that carries a spec's `keys` outputs (a toolchain's version, a
/// lockfile's hash): part of the action's digest, never used to pick a worker.
pub const KEYS_PROPERTY: &str = "greenlight.keys";

/// The `Command` and `Action` of a spec, encoded, with the action's digest (the cache key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedAction {
    /// The digest of the `Action` message: the key in the action cache.
    pub digest: Digest,
    /// The input root it runs on.
    pub input_root: Digest,
    /// The digest of the `Command` message.
    pub command: Digest,
    /// The encoded `Command` and `Action`, to upload before executing or publishing.
    pub blobs: BlobSet,
    /// The spec's `do_not_cache`.
    pub do_not_cache: bool,
}

/// Encodes a spec for an input root. Environment variables are sorted by name; platform
/// properties by name (then value), with the spec's `keys` as one more ([`KEYS_PROPERTY`]: the
/// first 32 hex digits of the SHA-256 of the outputs joined by newlines); both
/// `Command.platform` and `Action.platform` carry them. No output paths: a gate's verdict is
/// its exit code and output streams.
pub fn prepare(spec: &ActionSpec, input_root: &Digest) -> PreparedAction {
    let platform = platform_of(&properties_of(spec));
    // REAPI 2.2 moved the platform to the Action; servers before it read it from the Command,
    // so both carry it.
    #[allow(deprecated)]
    let command = reapi::Command {
        arguments: spec.argv.clone(),
        environment_variables: spec
            .env
            .iter()
            .map(|(name, value)| reapi::command::EnvironmentVariable {
                name: name.clone(),
                value: value.clone(),
            })
            .collect(),
        platform: platform.clone(),
        working_directory: spec.working_directory.clone(),
        ..reapi::Command::default()
    };
    let mut blobs = BlobSet::new();
    let command_digest = blobs.insert_message(&command);
    let action = reapi::Action {
        command_digest: Some(command_digest.to_proto()),
        input_root_digest: Some(input_root.to_proto()),
        timeout: spec.timeout.map(duration_proto),
        do_not_cache: spec.do_not_cache,
        salt: Vec::new(),
        platform,
    };
    let digest = blobs.insert_message(&action);
    PreparedAction {
        digest,
        input_root: input_root.clone(),
        command: command_digest,
        blobs,
        do_not_cache: spec.do_not_cache,
    }
}

/// The spec's platform properties, with its `keys` outputs folded into one more.
fn properties_of(spec: &ActionSpec) -> BTreeMap<String, String> {
    let mut platform = spec.platform.clone();
    if !spec.keys.is_empty() {
        let hash = digest_of(spec.keys.join("\n").as_bytes()).hash;
        platform.insert(KEYS_PROPERTY.to_owned(), hash[..32].to_owned());
    }
    platform
}

/// The properties sorted by name then value (a `BTreeMap` already is); no message at all when
/// there are none, so an empty platform has one encoding.
fn platform_of(properties: &BTreeMap<String, String>) -> Option<reapi::Platform> {
    if properties.is_empty() {
        return None;
    }
    let mut properties: Vec<reapi::platform::Property> = properties
        .iter()
        .map(|(name, value)| reapi::platform::Property {
            name: name.clone(),
            value: value.clone(),
        })
        .collect();
    properties.sort_by(|a, b| (&a.name, &a.value).cmp(&(&b.name, &b.value)));
    Some(reapi::Platform { properties })
}

pub(crate) fn duration_proto(d: Duration) -> protobuf::Duration {
    protobuf::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn spec() -> ActionSpec {
        ActionSpec {
            argv: vec!["/bin/sh".into(), "-c".into(), "cargo test".into()],
            env: BTreeMap::from([
                ("RUSTFLAGS".to_string(), "-D warnings".to_string()),
                ("CI".to_string(), "1".to_string()),
            ]),
            platform: BTreeMap::from([
                ("toolchain".to_string(), "rust-1.95".to_string()),
                ("OSFamily".to_string(), "linux".to_string()),
            ]),
            keys: Vec::new(),
            working_directory: String::new(),
            timeout: Some(Duration::from_secs(600)),
            do_not_cache: false,
        }
    }

    fn root() -> Digest {
        crate::digest_of(b"pretend root")
    }

    #[test]
    fn env_insertion_order_does_not_change_the_digest() {
        let mut reversed = spec();
        reversed.env = BTreeMap::new();
        for (k, v) in spec().env.into_iter().rev() {
            reversed.env.insert(k, v);
        }
        assert_eq!(
            prepare(&spec(), &root()).digest,
            prepare(&reversed, &root()).digest
        );
    }

    #[test]
    fn env_platform_argv_timeout_and_root_each_change_the_digest() {
        let base = prepare(&spec(), &root()).digest;
        let mut variants = Vec::new();
        let mut s = spec();
        s.env.insert("GATE_MODE".into(), "strict".into());
        variants.push(("env added", s));
        let mut s = spec();
        s.env.insert("CI".into(), "0".into());
        variants.push(("env value", s));
        let mut s = spec();
        s.platform.insert("toolchain".into(), "rust-1.96".into());
        variants.push(("platform value", s));
        let mut s = spec();
        s.platform.insert("pool".into(), "a".into());
        variants.push(("platform added", s));
        let mut s = spec();
        s.argv[2] = "cargo test --all".into();
        variants.push(("argv", s));
        let mut s = spec();
        s.timeout = Some(Duration::from_secs(601));
        variants.push(("timeout", s));
        let mut s = spec();
        s.working_directory = "sub".into();
        variants.push(("working directory", s));
        for (what, s) in variants {
            assert_ne!(prepare(&s, &root()).digest, base, "{what}");
        }
        assert_ne!(
            prepare(&spec(), &crate::digest_of(b"other")).digest,
            base,
            "input root"
        );
    }

    /// The `keys` outputs reach the key as exactly one platform property, the one the gate
    /// runner's actions carried before the seam moved: equal to spelling the property out.
    #[test]
    fn keys_are_one_platform_property_in_the_digest() {
        let mut keyed = spec();
        keyed.keys = vec!["rustc 1.95.0".into(), "lock abc".into()];
        let mut spelled = spec();
        spelled.platform.insert(
            KEYS_PROPERTY.into(),
            digest_of(b"rustc 1.95.0\nlock abc").hash[..32].to_owned(),
        );
        let base = prepare(&spec(), &root()).digest;
        assert_ne!(prepare(&keyed, &root()).digest, base);
        assert_eq!(
            prepare(&keyed, &root()).digest,
            prepare(&spelled, &root()).digest
        );
    }

    #[test]
    fn command_and_action_are_sorted_and_point_at_each_other() {
        let prepared = prepare(&spec(), &root());
        assert_eq!(prepared.blobs.len(), 2);
        let blob = |d: &Digest| match prepared.blobs.get(d) {
            Some(crate::Blob::Bytes(b)) => b.clone(),
            other => panic!("{d}: {other:?}"),
        };
        let action = reapi::Action::decode(blob(&prepared.digest).as_slice()).expect("action");
        assert_eq!(action.command_digest, Some(prepared.command.to_proto()));
        assert_eq!(action.input_root_digest, Some(root().to_proto()));
        assert_eq!(action.timeout.map(|t| t.seconds), Some(600));
        let command = reapi::Command::decode(blob(&prepared.command).as_slice()).expect("command");
        let env: Vec<&str> = command
            .environment_variables
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(env, ["CI", "RUSTFLAGS"]);
        let names = |p: &Option<reapi::Platform>| -> Vec<String> {
            p.iter()
                .flat_map(|p| {
                    p.properties
                        .iter()
                        .map(|x| format!("{}={}", x.name, x.value))
                })
                .collect()
        };
        #[allow(deprecated)]
        let command_platform = names(&command.platform);
        assert_eq!(command_platform, ["OSFamily=linux", "toolchain=rust-1.95"]);
        assert_eq!(names(&action.platform), command_platform);
        assert!(command.output_paths.is_empty());
    }
}
