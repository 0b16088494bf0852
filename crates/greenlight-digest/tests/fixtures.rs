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
