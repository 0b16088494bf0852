//! What judges a merged tree: the landing gates, defined by the target's verify.yaml (or the
//! run's snapshot) and run by greenlight-gate's runner in the scratch worktree.
//!
//! The rule: the definitions are never read from the merged tree. An agent that edits
//! verify.yaml in its branch changes what it lands, not what judges it. (A v2 gate's problem
//! matcher files, which shape the evidence and never a verdict, are read beside the file's
//! label, in the scratch worktree.)

use std::path::Path;

use camino::Utf8PathBuf;
use greenlight_gate::config::{self, Home, Loaded};
use greenlight_gate::{GateReport, InterruptWatch, RunOptions, RunResult};

use super::{GateSource, LandError, Landing, RedGate, git};

/// The gate definitions of a landing on `tip`, labelled as if in `scratch`; `None` when the
/// landing has no gates.
pub(super) fn gate_config(
    landing: &Landing<'_>,
    tip: &str,
    scratch: &Path,
) -> Result<Option<Loaded>, LandError> {
    if landing.gates.is_empty() {
        return Ok(None);
    }
    match &landing.judged_by {
        GateSource::Snapshot(snapshot) => Ok(Some(snapshot.load()?)),
        GateSource::TargetTip => {
            for home in [Home::Greenlight, Home::CommandMate] {
                let relative = home.relative();
                let Some(relative) = relative.to_str() else {
                    continue;
                };
                let object = format!("{tip}:{relative}");
                if !exists(landing.repo, &object) {
                    continue;
                }
                let label = Utf8PathBuf::from_path_buf(scratch.join(relative)).map_err(|path| {
                    LandError::Scratch {
                        path,
                        why: "the repository's path is not UTF-8".to_owned(),
                    }
                })?;
                let text = blob_text(landing.repo, &object, &label)?;
                return Ok(Some(config::parse(&label, &text)?));
            }
            Err(LandError::NoVerifyYaml {
                tip: tip.to_owned(),
                gates: landing.gates.join(", "),
            })
        }
    }
}

/// Whether `object` (`<commit>:<path>`) names a blob (`cat-file -e` prints nothing either way).
fn exists(repo: &Path, object: &str) -> bool {
    greenlight_proc::git::output(
        greenlight_proc::git::command(repo).args(["cat-file", "-e", object]),
    )
    .is_ok()
}

/// The text of a committed verify.yaml, held to the bound and encoding the file reader holds a
/// file on disk to.
fn blob_text(repo: &Path, object: &str, label: &camino::Utf8Path) -> Result<String, LandError> {
    let size = git::run(repo, &["cat-file", "-s", object])?;
    let too_big = size
        .parse::<u64>()
        .map_or(true, |n| n > greenlight_gate::file::MAX_CONFIG_BYTES);
    let bytes = if too_big {
        None
    } else {
        greenlight_proc::git::output(
            greenlight_proc::git::command(repo).args(["cat-file", "blob", object]),
        )
        .ok()
    };
    match bytes.map(String::from_utf8) {
        Some(Ok(text)) => Ok(text),
        // Refused by the same reader, with the same words, as the file would be on disk.
        _ => {
            let why = if too_big {
                format!(
                    "{size} bytes, over the {} byte bound",
                    greenlight_gate::file::MAX_CONFIG_BYTES
                )
            } else {
                "not UTF-8".to_owned()
            };
            Err(LandError::Scratch {
                path: label.as_std_path().to_path_buf(),
                why: format!("the target's committed verify.yaml ({object}) cannot be read: {why}"),
            })
        }
    }
}

/// Runs the landing gates on the merged tree in `scratch`, work evidence skipped (the merged
/// tree is committed; what counts is that its gates pass).
pub(super) async fn run_gates(
    loaded: &Loaded,
    landing: &Landing<'_>,
    scratch: &Path,
    tip: &str,
    gate_options: &RunOptions,
    interrupt: &mut InterruptWatch,
) -> Result<Judged, LandError> {
    let options = RunOptions {
        cwd: scratch.to_path_buf(),
        base_ref: Some(tip.to_owned()),
        only: Some(landing.gates.to_vec()),
        skip_work_evidence: true,
        ..gate_options.clone()
    };
    let report = greenlight_gate::run(loaded, &options, &mut |_| {}, interrupt).await?;
    if let Some(signal) = report.interrupted {
        return Err(LandError::Interrupted(signal));
    }
    Ok(Judged {
        green: report.result == Some(RunResult::Passed),
        gates: report.gates,
    })
}

/// What the landing gates said.
pub(super) struct Judged {
    /// The runner's RESULT was `passed` (never inferred from the gates' list alone).
    pub(super) green: bool,
    /// Every gate reported, in config order.
    pub(super) gates: Vec<GateReport>,
}

/// The gates that did not pass, with their evidence.
pub(super) fn red_gates(gates: &[GateReport]) -> Vec<RedGate> {
    gates
        .iter()
        .filter(|g| g.passed != Some(true))
        .map(|g| {
            let last = g.attempts.last();
            let evidence = last
                .map(|a| match &a.digest {
                    Some(digest) => digest.text(),
                    None => a.tail.clone(),
                })
                .unwrap_or_default();
            RedGate {
                id: g.id.clone(),
                verdict: g.verdict,
                exit_code: last.and_then(|a| a.exit_code),
                evidence,
            }
        })
        .collect()
}
