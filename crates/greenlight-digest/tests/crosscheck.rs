//! Counts and failures of every fixture against the tool's own structured report of the same
//! project (JUnit XML, `go test -json`, `jest --json`, `eslint -f json`), captured beside it.

mod common;

use greenlight_digest::{Digest, Severity};

fn unescape(s: &str) -> String {
    s.replace("&gt;", ">")
        .replace("&lt;", "<")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(unescape(&tag[start..end]))
}

/// Names of the failing test cases in a JUnit XML report (a `<failure>` or `<error>` child, or
/// node's `failure="…"` attribute).
fn junit_failures(xml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find("<testcase") {
        rest = &rest[i..];
        let tag_end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..tag_end];
        let body_end = if tag.ends_with('/') {
            tag_end
        } else {
            rest.find("</testcase>").unwrap_or(rest.len())
        };
        let body = &rest[tag_end..body_end];
        let failed =
            tag.contains(" failure=\"") || body.contains("<failure") || body.contains("<error");
        if failed && let Some(name) = attr(tag, "name") {
            out.push(name);
        }
        rest = &rest[tag_end.max(1)..];
    }
    out
}

fn assert_names(id: &str, d: &Digest, expected: &[String]) {
    // A file that fails to load is a failure of the digest's (with its place and error) that
    // some reports leave out (bun's and jest's list only tests that ran); never fewer.
    let load_errors = d.summary.as_ref().and_then(|s| s.errors).unwrap_or(0) as usize;
    assert!(
        d.failures.len() >= expected.len() && d.failures.len() <= expected.len() + load_errors,
        "{id}: digest {:?} vs report {expected:?}",
        d.failures
    );
    for name in expected {
        assert!(
            d.failures.iter().any(|f| f.name.contains(name.as_str())),
            "{id}: report failure `{name}` missing from digest {:?}",
            d.failures.iter().map(|f| &f.name).collect::<Vec<_>>()
        );
    }
}

#[test]
fn junit_reports_agree_with_the_digest() {
    let mut checked = 0;
    for f in common::all() {
        let Some(report) = f.report() else { continue };
        if f.meta["report"] != "report.xml" {
            continue;
        }
        let d = f.digest();
        let failing = junit_failures(&report);
        let counted = d.summary.as_ref().map_or(0, |s| s.failing());
        let load_errors = d.summary.as_ref().and_then(|s| s.errors).unwrap_or(0);
        assert!(
            counted >= failing.len() as u64 && counted <= failing.len() as u64 + 2 * load_errors,
            "{}: summary {:?} vs report {failing:?}",
            f.id,
            d.summary
        );
        assert_names(&f.id, &d, &failing);
        checked += 1;
    }
    assert!(checked >= 10, "JUnit cross-checks run: {checked}");
}

#[test]
fn go_test_json_agrees_with_the_digest() {
    let mut checked = 0;
    for f in common::all()
        .into_iter()
        .filter(|f| f.id.starts_with("go-test/"))
    {
        let Some(report) = f.report() else { continue };
        let events: Vec<serde_json::Value> = report
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let mut failed: Vec<String> = events
            .iter()
            .filter(|e| e["Action"] == "fail")
            .filter_map(|e| e["Test"].as_str().map(str::to_owned))
            .collect();
        // A test that started and never ended (a timeout panic ended the binary; go 1.19 emits
        // no fail event for it) failed.
        for e in events.iter().filter(|e| e["Action"] == "run") {
            let Some(name) = e["Test"].as_str() else {
                continue;
            };
            let ended = events.iter().any(|x| {
                x["Test"] == name && matches!(x["Action"].as_str(), Some("pass" | "fail" | "skip"))
            });
            if !ended && !failed.iter().any(|n| n == name) {
                failed.push(name.to_owned());
            }
        }
        // A parent fails because its subtest did; the digest names the subtest.
        let leaves: Vec<String> = failed
            .iter()
            .filter(|n| !failed.iter().any(|m| m.starts_with(&format!("{n}/"))))
            .cloned()
            .collect();
        let failed_packages = events
            .iter()
            .filter(|e| e["Action"] == "fail" && e["Test"].is_null())
            .count();
        let d = f.digest();
        assert_names(&f.id, &d, &leaves);
        let s = d.summary.clone().unwrap_or_default();
        assert_eq!(s.failed, Some(leaves.len() as u64), "{}", f.id);
        if f.id.contains("-v") || f.id.contains("large") {
            let passed = events
                .iter()
                .filter(|e| e["Action"] == "pass" && !e["Test"].is_null())
                .count();
            assert_eq!(s.passed, Some(passed as u64), "{}", f.id);
        }
        // go 1.19 reports a build failure on stderr only, never as a JSON event.
        if failed_packages > 0 {
            assert_ne!(f.exit_code, 0, "{}", f.id);
        }
        checked += 1;
    }
    assert!(checked >= 5, "go cross-checks run: {checked}");
}

#[test]
fn jest_json_agrees_with_the_digest() {
    let mut checked = 0;
    for f in common::all()
        .into_iter()
        .filter(|f| f.id.starts_with("jest/"))
    {
        let Some(report) = f.report() else { continue };
        let r: serde_json::Value =
            serde_json::from_str(&report).expect("jest --json output is JSON");
        let d = f.digest();
        let s = d.summary.clone().unwrap_or_default();
        assert_eq!(s.failed, r["numFailedTests"].as_u64(), "{}", f.id);
        assert_eq!(s.passed, r["numPassedTests"].as_u64(), "{}", f.id);
        let mut names = Vec::new();
        for file in r["testResults"].as_array().into_iter().flatten() {
            for a in file["assertionResults"].as_array().into_iter().flatten() {
                if a["status"] == "failed" {
                    let mut parts: Vec<String> = a["ancestorTitles"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t.as_str().map(str::to_owned))
                        .collect();
                    parts.push(a["title"].as_str().unwrap_or_default().to_owned());
                    names.push(parts.join(" › "));
                }
            }
        }
        assert_names(&f.id, &d, &names);
        checked += 1;
    }
    assert!(checked >= 3, "jest cross-checks run: {checked}");
}

#[test]
fn eslint_json_agrees_with_the_digest() {
    let mut checked = 0;
    for f in common::all()
        .into_iter()
        .filter(|f| f.id.starts_with("eslint/"))
    {
        let Some(report) = f.report() else { continue };
        let r: serde_json::Value =
            serde_json::from_str(&report).expect("eslint -f json output is JSON");
        let d = f.digest();
        let files = r.as_array().cloned().unwrap_or_default();
        let errors: u64 = files.iter().filter_map(|x| x["errorCount"].as_u64()).sum();
        let warnings: u64 = files
            .iter()
            .filter_map(|x| x["warningCount"].as_u64())
            .sum();
        let s = d.summary.clone().unwrap_or_default();
        assert_eq!(
            (s.errors, s.warnings),
            (Some(errors), Some(warnings)),
            "{}",
            f.id
        );
        for file in &files {
            for m in file["messages"].as_array().into_iter().flatten() {
                let found = d.diagnostics.iter().any(|x| {
                    x.file.as_deref() == file["filePath"].as_str().map(|p| f.relative(p))
                        && x.line.map(u64::from) == m["line"].as_u64()
                        && x.column.map(u64::from) == m["column"].as_u64()
                        && x.code.as_deref() == m["ruleId"].as_str()
                        && (x.severity == Severity::Error) == (m["severity"] == 2)
                });
                assert!(found, "{}: {m} missing from the digest", f.id);
            }
        }
        checked += 1;
    }
    assert!(checked >= 2, "eslint cross-checks run: {checked}");
}

#[test]
fn mocha_json_agrees_with_the_digest() {
    let mut checked = 0;
    for f in common::all()
        .into_iter()
        .filter(|f| f.id.starts_with("mocha/"))
    {
        let Some(report) = f.report() else { continue };
        let r: serde_json::Value =
            serde_json::from_str(&report).expect("mocha --reporter json output is JSON");
        let d = f.digest();
        let s = d.summary.clone().unwrap_or_default();
        assert_eq!(s.failed, r["stats"]["failures"].as_u64(), "{}", f.id);
        assert_eq!(s.passed, r["stats"]["passes"].as_u64(), "{}", f.id);
        let names: Vec<String> = r["failures"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x["fullTitle"].as_str().map(str::to_owned))
            .collect();
        assert_names(&f.id, &d, &names);
        checked += 1;
    }
    assert!(checked >= 3, "mocha cross-checks run: {checked}");
}

/// tape prints TAP itself: its `not ok` points (not skipped, not todo) are the report.
#[test]
fn tape_tap_points_agree_with_the_digest() {
    let mut checked = 0;
    for f in common::all()
        .into_iter()
        .filter(|f| f.id.starts_with("tap/tape"))
    {
        let text = String::from_utf8_lossy(&f.output);
        let failing: Vec<String> = text
            .lines()
            .filter(|l| {
                l.starts_with("not ok ") && !l.contains(" # SKIP") && !l.contains(" # TODO")
            })
            .map(|l| {
                let rest = l["not ok ".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
                rest.trim_start_matches(" - ").trim().to_owned()
            })
            .collect();
        let d = f.digest();
        assert_names(&f.id, &d, &failing);
        checked += 1;
    }
    assert!(checked >= 2, "tape cross-checks run: {checked}");
}
