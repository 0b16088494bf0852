//! The process environment as a front end read it, once, at its start: a snapshot every
//! library looks variables up in instead of asking the process again.
//!
//! One read point means one answer: the cache key, a remote action and the child that inherits
//! the environment all see the same values, and a test can hand a library any environment
//! without touching the process's own.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::sync::Arc;

/// A snapshot of environment variables; cheap to clone (clones share one map).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessEnv {
    vars: Arc<BTreeMap<OsString, OsString>>,
}

impl ProcessEnv {
    /// The snapshot of these variables (`std::env::vars_os()` in a front end; a list in a
    /// test). A name given twice keeps its last value, as a process environment would.
    pub fn from_vars(vars: impl IntoIterator<Item = (OsString, OsString)>) -> ProcessEnv {
        ProcessEnv {
            vars: Arc::new(vars.into_iter().collect()),
        }
    }

    /// The value of `name`, when it is set (an empty value is set).
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// Every variable, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// [`ProcessEnv::get`] as an owned value: the shape of the lookup closures libraries take
    /// (`|name| env.var(name)`).
    pub fn var(&self, name: &str) -> Option<OsString> {
        self.get(name).map(OsStr::to_os_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_answers_what_it_was_given_and_nothing_else() {
        let env = ProcessEnv::from_vars([
            ("A".into(), "1".into()),
            ("EMPTY".into(), "".into()),
            ("A".into(), "2".into()),
        ]);
        assert_eq!(env.get("A"), Some(OsStr::new("2")));
        assert_eq!(env.var("EMPTY"), Some(OsString::new()));
        assert_eq!(env.get("PATH"), None);
    }
}
