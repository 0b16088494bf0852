//! Every captured fixture against its expected digest (an insta snapshot beside it).

mod common;

use greenlight_digest::{Classification, Digest};

/// The part of the digest a snapshot pins down (tail, bytes and lines follow from the output).
fn projection(d: &Digest) -> serde_json::Value {
    serde_json::json!({
        "classification": d.classification,
        "format": d.format,
        "formats": d.formats,
        "exit_code": d.exit_code,
        "summary": d.summary,
        "failures": d.failures,
        "diagnostics": d.diagnostics,
        "reasons": d.reasons,
        "compact": d.compact,
    })
}

#[test]
fn every_fixture_matches_its_snapshot() {
    for fixture in common::all() {
        let d = fixture.digest();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(&fixture.dir);
        settings.set_prepend_module_to_snapshot(false);
        settings.set_input_file(fixture.dir.join("output.txt"));
        settings.set_omit_expression(true);
        // serde_json may preserve insertion order (a feature another crate turns on for the
        // whole build); sorted keys keep the snapshot the same either way.
        settings.set_sort_maps(true);
        settings.bind(|| insta::assert_json_snapshot!("digest", projection(&d)));
    }
}

/// The format directory a fixture sits in is the format the digest must name.
#[test]
fn every_fixture_is_read_as_its_own_format() {
    for fixture in common::all() {
        let d = fixture.digest();
        let dir = fixture.id.split('/').next().unwrap_or_default();
        assert_eq!(
            d.format.map(|f| f.name()),
            Some(dir),
            "{}: {:?}",
            fixture.id,
            d.reasons
        );
    }
}

/// A recognised digest names at least as many failures as its summary counts, and a run that
/// failed is never recognised without a failure or an error diagnostic to show.
#[test]
fn recognised_digests_explain_every_counted_failure() {
    for fixture in common::all() {
        let d = fixture.digest();
        if d.classification != Classification::Recognised {
            continue;
        }
        let counted = d.summary.as_ref().map_or(0, |s| s.failed.unwrap_or(0));
        assert!(d.failures.len() as u64 >= counted, "{}", fixture.id);
        if fixture.exit_code != 0 {
            assert!(
                !d.failures.is_empty() || !d.diagnostics.is_empty(),
                "{}",
                fixture.id
            );
            assert!(d.compact.is_some(), "{}: no compact form", fixture.id);
        }
    }
}

/// Every file under `dir`, as paths relative to it.
fn files_under(dir: &std::path::Path, prefix: &str, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.path().is_dir() {
            files_under(&e.path(), &format!("{name}/"), out);
        } else {
            out.push(name);
        }
    }
}

/// A recognised digest is evidence an agent acts on: every failure it lists points into the
/// project that was tested (a file of it, never the runtime, a library or the runner), or
/// nowhere, and says what went wrong in words, not with a bare location.
#[test]
fn recognised_failures_point_into_the_project_and_say_what_broke() {
    let projects = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for fixture in common::all() {
        let d = fixture.digest();
        if d.classification != Classification::Recognised {
            continue;
        }
        let project = fixture.meta["project"].as_str().unwrap_or_default();
        let dir = projects.join(project);
        // The capture script works in a directory named `greenlight-fixtures` (under /tmp by
        // default, elsewhere when `scripts/test` re-captures): the project starts after it.
        let captured_at = format!(
            "greenlight-fixtures/{}/",
            project.trim_start_matches("fixtures/projects/")
        );
        let mut files = Vec::new();
        files_under(&dir, "", &mut files);
        for f in &d.failures {
            let message = f.message.as_deref().unwrap_or_default().trim();
            assert!(!message.is_empty(), "{}: {f:?} has no message", fixture.id);
            assert!(
                !message.starts_with("File \"") && !message.starts_with("at "),
                "{}: {f:?}: the message is a location",
                fixture.id
            );
            let Some(file) = &f.file else { continue };
            let rel = file
                .find(&captured_at)
                .map_or(file.as_str(), |at| &file[at + captured_at.len()..]);
            assert!(
                !rel.starts_with('/') && !rel.starts_with(".."),
                "{}: {f:?} is located outside the project",
                fixture.id
            );
            assert!(
                files
                    .iter()
                    .any(|p| p == rel || p.ends_with(&format!("/{rel}"))),
                "{}: {f:?} names no file of {project}",
                fixture.id
            );
        }
    }
}
