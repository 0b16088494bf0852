//! What the process environment tells a run, derived once from the snapshot its front end read:
//! the lock root, the default state database, the kill grace, whether recording is off, and
//! the variables themselves for the gates' cache keys and remote actions.
//!
//! Nothing here reads the process: a front end hands [`RunEnv::from_vars`] the snapshot it took
//! at its start, so every use case of one process sees the same values, whatever it changed
//! meanwhile (a directory, a config).

use std::path::{Path, PathBuf};
use std::time::Duration;

use greenlight_proc::ProcessEnv;

use crate::record::NO_RECORD_VAR;

/// The run settings one environment gives; cheap to clone.
#[derive(Clone, Debug)]
pub struct RunEnv {
    /// The variables, as read.
    pub vars: ProcessEnv,
    /// Where mutex locks live: `CM_VERIFY_LOCK_ROOT`, else `$HOME/.commandmate/locks`.
    pub lock_root: PathBuf,
    /// The state database when no `--state` is given; `None` when no variable names a place
    /// (no `GREENLIGHT_STATE`, `XDG_STATE_HOME` or `HOME`).
    pub default_state: Option<PathBuf>,
    /// SIGTERM → SIGKILL grace for the gates' process groups (`GREENLIGHT_KILL_GRACE_MS`).
    pub kill_grace: Duration,
    /// `GREENLIGHT_NO_RECORD=1`: record nothing, whatever the front end asked.
    pub no_record: bool,
}

impl RunEnv {
    /// The settings of the environment `vars`.
    pub fn from_vars(vars: ProcessEnv) -> RunEnv {
        let lookup = |name: &str| vars.var(name);
        RunEnv {
            lock_root: greenlight_gate::lock::lock_root_from(lookup),
            default_state: greenlight_store::default_state_path_from(lookup).ok(),
            kill_grace: greenlight_proc::kill_grace_from(lookup),
            no_record: vars.get(NO_RECORD_VAR).is_some_and(|v| v == "1"),
            vars,
        }
    }

    /// The state database: `given` (`--state`) when there is one, else this environment's
    /// default; an error that says how to name one when neither is.
    pub fn state_path(&self, given: Option<&Path>) -> Result<PathBuf, greenlight_store::Error> {
        given
            .map(Path::to_path_buf)
            .or_else(|| self.default_state.clone())
            .ok_or(greenlight_store::Error::NoStatePath)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> RunEnv {
        RunEnv::from_vars(ProcessEnv::from_vars(
            vars.iter().map(|(k, v)| ((*k).into(), (*v).into())),
        ))
    }

    #[test]
    fn every_setting_comes_from_the_snapshot() {
        let run = env(&[
            ("CM_VERIFY_LOCK_ROOT", "/locks"),
            ("GREENLIGHT_STATE", "/state.db"),
            ("GREENLIGHT_KILL_GRACE_MS", "250"),
            ("GREENLIGHT_NO_RECORD", "1"),
        ]);
        assert_eq!(run.lock_root, Path::new("/locks"));
        assert_eq!(run.state_path(None).expect("state"), Path::new("/state.db"));
        assert_eq!(
            run.state_path(Some(Path::new("given.db"))).expect("state"),
            Path::new("given.db")
        );
        assert_eq!(run.kill_grace, Duration::from_millis(250));
        assert!(run.no_record);
    }

    #[test]
    fn an_empty_environment_has_the_defaults_and_no_state_database() {
        let run = env(&[]);
        assert_eq!(run.lock_root, Path::new("/tmp/.commandmate/locks"));
        assert!(matches!(
            run.state_path(None),
            Err(greenlight_store::Error::NoStatePath)
        ));
        assert_eq!(run.kill_grace, greenlight_proc::KILL_GRACE);
        assert!(!run.no_record);
        assert!(!env(&[("GREENLIGHT_NO_RECORD", "0")]).no_record);
    }
}
