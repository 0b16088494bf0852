//! Before the first turn of a run: can the agent start at all, and does its model answer?
//!
//! An agent CLI that is not installed fails every dispatch in milliseconds; without this check
//! the loop would spend its whole turn budget on it. The probe asks the model once when the goal
//! starts and records the id that answered; a resume probes that id again and refuses (pauses
//! with `probe-failed`) when it no longer answers.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use greenlight_agent::Reason;
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_store::Goal;

use crate::engine::{Engine, Finish};
use crate::error::Error;

/// Where `bin` starts from: itself when it names a path (a relative one from `cwd`, where the
/// agent runs), else the first executable of that name in `search_path` (a `PATH` value, as
/// the binary read it). The error says what is missing.
pub fn resolve_bin(bin: &Path, cwd: &Path, search_path: &OsStr) -> Result<PathBuf, String> {
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if bin.components().count() > 1 || bin.is_absolute() {
        let path = cwd.join(bin);
        return if executable(&path) {
            Ok(path)
        } else if path.exists() {
            Err(format!("`{}` is not an executable file", bin.display()))
        } else {
            Err(format!("`{}` does not exist", bin.display()))
        };
    }
    std::env::split_paths(search_path)
        .map(|dir| dir.join(bin))
        .find(|candidate| executable(candidate))
        .ok_or_else(|| format!("`{}` is not installed (not found on PATH)", bin.display()))
}

impl Engine<'_> {
    /// Pauses the goal (and returns how) when the agent cannot start or its model does not
    /// answer; `None` when the loop may go on.
    pub(crate) async fn check_agent(
        &mut self,
        goal: &Goal,
        interrupt: &mut InterruptWatch,
    ) -> Result<Option<Finish>, Error> {
        if let Some(bin) = &self.settings.agent_bin
            && let Err(why) = resolve_bin(bin, &goal.worktree, &self.settings.agent_search_path)
        {
            let detail = format!(
                "the agent cannot start: {why}; install it or choose another agent, then `greenlight goal resume`"
            );
            return Ok(Some(self.pause(Reason::ProbeFailed, detail, None)?));
        }
        if !self.settings.probe {
            return Ok(None);
        }
        let recorded = goal.model_probed.clone();
        let candidate = recorded
            .clone()
            .unwrap_or_else(|| self.settings.model.clone());
        let candidates = [candidate.clone()];
        let outcome = tokio::select! {
            outcome = self.settings.agent.probe(&candidates) => outcome,
            _ = interrupt.changed() => {
                let signal = (*interrupt.borrow()).unwrap_or(Interrupt::Int);
                return Ok(Some(self.interrupted(signal, None)?));
            }
        };
        match (outcome.id, recorded) {
            (Some(_), Some(_)) => Ok(None),
            (Some(id), None) => {
                let goal_id = self.goal;
                self.store.write(|tx| tx.record_probe(goal_id, &id))?;
                Ok(None)
            }
            (None, recorded) => {
                let when = if recorded.is_some() {
                    "answered when the goal started but does not answer now"
                } else {
                    "does not answer"
                };
                let detail = format!(
                    "the model `{candidate}` {when} ({}); check the agent CLI's login and the model id, then `greenlight goal resume`",
                    outcome.detail
                );
                Ok(Some(self.pause(Reason::ProbeFailed, detail, None)?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_agent_path_is_found_from_the_worktree_and_a_name_on_path() {
        let dir = tempfile::tempdir().expect("tmp");
        let agent = dir.path().join("agent.sh");
        std::fs::write(&agent, "#!/bin/sh\n").expect("write");
        // `sh` is in one of these on every system the suite runs on.
        let path = std::ffi::OsString::from("/usr/local/bin:/usr/bin:/bin");
        let err =
            resolve_bin(Path::new("./agent.sh"), dir.path(), &path).expect_err("not executable");
        assert!(err.contains("not an executable file"), "{err}");
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(
            resolve_bin(Path::new("./agent.sh"), dir.path(), &path).ok(),
            Some(dir.path().join("./agent.sh"))
        );
        assert!(resolve_bin(Path::new("sh"), dir.path(), &path).is_ok());
        let err =
            resolve_bin(Path::new("no-such-agent-cli"), dir.path(), &path).expect_err("missing");
        assert!(err.contains("not installed"), "{err}");
        // The search path is the one given, not this process's: an empty one finds nothing.
        let err = resolve_bin(Path::new("sh"), dir.path(), OsStr::new("")).expect_err("no PATH");
        assert!(err.contains("not installed"), "{err}");
    }
}
