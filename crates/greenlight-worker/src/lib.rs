//! A Remote Workers API bot: `greenlight worker` takes leases from a REAPI grid (BuildGrid) and
//! runs each action the way greenlight runs a gate — its own process group, a deadline, one
//! interleaved output pipe, nothing left behind.
//!
//! - [`session`]: the bot session with the grid (create, update loop, lease bookkeeping,
//!   shutdown).
//! - [`lease`]: one lease from payload to `ActionResult`, over [`inputs`] (the input tree
//!   fetched from the CAS and written into a fresh directory) and [`run`] (the command through
//!   `greenlight-proc`).
//! - [`caches`]: persistent per-toolchain cache directories shared by the leases.
//! - [`sweep`]: what dead earlier workers of the same cache directory left (processes, lease
//!   directories).
//!
//! The library prints nothing: what happens is reported as [`Event`]s for the binary to show.

mod caches;
mod inputs;
mod lease;
pub mod proto;
mod run;
mod session;
mod sweep;

use std::path::PathBuf;

pub use session::serve;

/// What a worker offers and where it keeps its state.
#[derive(Debug, Clone)]
pub struct Config {
    /// The grid's URL (`http://host:port` or `https://host:port`).
    pub grid: String,
    /// The REAPI instance name; empty for the grid's default instance.
    pub instance: String,
    /// How many leases may run at once.
    pub capacity: usize,
    /// Platform properties offered to the scheduler, in the order given (a key may repeat:
    /// each value is offered). [`default_properties`] adds `OSFamily` and `ISA` when absent.
    pub properties: Vec<(String, String)>,
    /// The bot id the grid knows this worker by; unique within the grid.
    pub name: String,
    /// Where the per-toolchain caches and the lease directories live. Workers sharing it also
    /// end each other's orphans when one of them dies.
    pub cache_dir: PathBuf,
}

/// A `--property` value that is not `key=value`.
#[derive(Debug, thiserror::Error)]
pub enum PropertyError {
    /// No `=` in it.
    #[error("`{found}` is not key=value; write a platform property as e.g. `pool=linux-large`")]
    NoEquals {
        /// The value as given.
        found: String,
    },
    /// Nothing before the `=`.
    #[error("`{found}` has an empty key; write a platform property as e.g. `pool=linux-large`")]
    EmptyKey {
        /// The value as given.
        found: String,
    },
    /// Whitespace or a control character in the key, which no scheduler matches on.
    #[error("`{found}`: the key may not contain whitespace or control characters")]
    BadKey {
        /// The value as given.
        found: String,
    },
}

/// Reads one `key=value` platform property (the value may be empty and may hold `=`).
pub fn parse_property(text: &str) -> Result<(String, String), PropertyError> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(PropertyError::NoEquals {
            found: text.to_owned(),
        });
    };
    if key.is_empty() {
        return Err(PropertyError::EmptyKey {
            found: text.to_owned(),
        });
    }
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(PropertyError::BadKey {
            found: text.to_owned(),
        });
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// `properties` with this machine's `OSFamily` and `ISA` (REAPI's platform lexicon) added
/// when the caller did not name those keys, so a job that asks for them finds this worker.
pub fn default_properties(mut properties: Vec<(String, String)>) -> Vec<(String, String)> {
    let has = |properties: &[(String, String)], key: &str| properties.iter().any(|(k, _)| k == key);
    if !has(&properties, "OSFamily") {
        properties.push(("OSFamily".to_owned(), std::env::consts::OS.to_owned()));
    }
    if !has(&properties, "ISA") {
        let isa = match std::env::consts::ARCH {
            "x86_64" => "x86-64",
            "x86" => "x86-32",
            "aarch64" => "arm-a64",
            "arm" => "arm-a32",
            other => other,
        };
        properties.push(("ISA".to_owned(), isa.to_owned()));
    }
    properties
}

/// The bot id a worker uses without `--name`: `<host name>-<pid>`, unique on the machine, and
/// a person can find the machine and the process from it.
pub fn default_name() -> String {
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    format!("{host}-{}", std::process::id())
}

/// What happened, for the binary to show. Lease ids are the grid's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The grid accepted the bot session.
    Connected {
        /// The session name the grid chose.
        session: String,
    },
    /// A lease started running.
    LeaseStarted {
        /// The lease id.
        lease: String,
        /// The action's digest (`hash/size`).
        action: String,
    },
    /// A lease ended and its result is on its way to the grid.
    LeaseFinished {
        /// The lease id.
        lease: String,
        /// How it ended, in words (`exit 0`, `timed out`, `failed: …`).
        outcome: String,
    },
    /// The grid withdrew a running lease (cancelled or reassigned); its processes were ended.
    LeaseWithdrawn {
        /// The lease id.
        lease: String,
    },
    /// Processes or lease directories of a dead earlier worker were removed.
    Swept {
        /// Pid and command line of each process ended.
        processes: Vec<String>,
        /// How many lease directories were removed.
        directories: usize,
    },
    /// A call to the grid failed; the worker tries again after `retry_in`.
    GridTrouble {
        /// What failed, in the transport's or the grid's words.
        detail: String,
        /// When the next try happens.
        retry_in: std::time::Duration,
    },
    /// The grid forgot the session (it expired or was closed); a new one is being made.
    SessionLost {
        /// The grid's words.
        detail: String,
    },
    /// A stop was asked for: no more leases; running ones are being ended and handed back.
    Stopping {
        /// How many leases were running.
        running: usize,
    },
}

/// Why a worker could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The grid could not be reached, or its content store cannot be used.
    #[error("{0}")]
    Remote(#[from] greenlight_remote::RemoteError),
    /// The grid URL cannot be used for the bots service.
    #[error("grid `{url}`: {reason}; use http://host:port or https://host:port")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The grid does not speak the Remote Workers API.
    #[error(
        "the grid at {url} does not offer the Remote Workers API (Bots service): {detail}; point --grid at a BuildGrid server"
    )]
    NoBotsService {
        /// The grid URL.
        url: String,
        /// The grid's words.
        detail: String,
    },
    /// The grid refused to make a bot session.
    #[error("the grid at {url} refused a bot session for instance `{instance}`: {detail}")]
    SessionRefused {
        /// The grid URL.
        url: String,
        /// The instance asked for.
        instance: String,
        /// The grid's code and words.
        detail: String,
    },
    /// The cache directory cannot be made or used.
    #[error("cache directory {}: {source}; pick a writable directory with --cache-dir", path.display())]
    CacheDir {
        /// The directory.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_property_is_split_at_the_first_equals_and_its_value_may_be_empty() {
        assert_eq!(
            parse_property("pool=a=b").ok(),
            Some(("pool".into(), "a=b".into()))
        );
        assert_eq!(parse_property("k=").ok(), Some(("k".into(), String::new())));
    }

    #[test]
    fn a_bad_property_is_refused_naming_the_value() {
        for bad in ["pool", "=x", "po ol=x"] {
            let e = parse_property(bad).expect_err(bad);
            assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn os_family_and_isa_are_added_unless_named() {
        let props = default_properties(vec![("pool".into(), "p".into())]);
        let keys: Vec<&str> = props.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["pool", "OSFamily", "ISA"]);
        let props = default_properties(vec![("OSFamily".into(), "custom".into())]);
        assert_eq!(props.iter().filter(|(k, _)| k == "OSFamily").count(), 1);
        assert_eq!(props[0].1, "custom");
    }
}
