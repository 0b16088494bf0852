//! Can the agent start at all, and does its model answer? Asked of an agent before a goal is
//! given it ([`check_new_agent`]: `goal run`, `goal resume --agent`), and before the first turn
//! of every run.
//!
//! An agent CLI that is not installed fails every dispatch in milliseconds; without this check
//! the loop would spend its whole turn budget on it. The probe asks the model once when the goal
//! gets its agent and records the id that answered; a resume probes that id again and refuses
//! (pauses with `probe-failed`) when it no longer answers.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use greenlight_agent::{Family, Reason};
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_store::{AgentSpec, Goal};

use crate::drive::{Families, agent_bin, dispatcher_for};
use crate::engine::{Engine, Finish};
use crate::error::Error;

/// The flags that choose another agent, for every message saying this one cannot be used.
pub const OTHER_AGENTS: &str = "`--agent codex --model ID`, `--agent openai --base-url URL --model ID`, or `--agent 'command:PROGRAM {prompt_file}'`";

/// Whether a family's model is probed: claude, codex and openai (an allowlist says an id is
/// spellable, only a probe says it answers). The command family runs programs that are not
/// chat models.
pub fn probes(family: Family) -> bool {
    matches!(family, Family::Claude | Family::Codex | Family::OpenAi)
}

/// Why an agent was not given a goal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// What is wrong with the agent; the caller adds what to do.
    Unfit(String),
    /// A signal came while the model was being probed: nothing is wrong with the agent, the
    /// user asked to stop.
    Interrupted {
        /// The signal that came.
        signal: Interrupt,
        /// The model that was being probed.
        model: String,
    },
}

/// Checks an agent before a goal is given it, so a missing CLI or a model that does not answer
/// is refused before anything is stored: its executable is found (from `worktree`, or on
/// `search_path`), then its model is probed. Returns the model id that answered (`None` for a
/// family that is not probed), to be recorded with the goal.
pub async fn check_new_agent(
    spec: &AgentSpec,
    worktree: &Path,
    search_path: &OsStr,
    families: &dyn Families,
    interrupt: &mut InterruptWatch,
) -> Result<Option<String>, Refusal> {
    let family = spec.family;
    if let Some(bin) = agent_bin(spec) {
        resolve_bin(&bin, worktree, search_path)
            .map_err(|why| Refusal::Unfit(format!("the {family} agent cannot start: {why}")))?;
    }
    if !probes(family) {
        return Ok(None);
    }
    let (dispatcher, _) = dispatcher_for(spec, None, families).map_err(Refusal::Unfit)?;
    let model = spec.model.clone().unwrap_or_else(|| "default".into());
    let candidates = [model.clone()];
    let outcome = tokio::select! {
        outcome = dispatcher.probe(&candidates) => outcome,
        _ = interrupt.changed() => {
            let signal = (*interrupt.borrow()).unwrap_or(Interrupt::Int);
            return Err(Refusal::Interrupted { signal, model });
        }
    };
    match outcome.id {
        Some(id) => Ok(Some(id)),
        None => Err(Refusal::Unfit(format!(
            "the {family} agent's model `{model}` does not answer ({}); check the agent CLI's login and the model id",
            outcome.detail
        ))),
    }
}

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
                "the agent cannot start: {why}; install it, then `greenlight goal resume`, or give the goal another agent: `greenlight goal resume` with {OTHER_AGENTS}"
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
                    "the model `{candidate}` {when} ({}); check the agent CLI's login and the model id, then `greenlight goal resume` (`--model ID` with `--agent` gives it another model or agent)",
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
