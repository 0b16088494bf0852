//! The run's side of the remote-execution seam: [`RemoteSettings`], what a front end puts in
//! [`RunOptions::remote`](crate::RunOptions::remote). The seam itself (the traits a backend
//! implements and the data that crosses them) is the vocabulary's
//! ([`greenlight_types::remote`], re-exported here), so the backend never depends on the runner.
//!
//! Every rule stays on the runner's side (what is looked up, what is published, when the
//! cluster is turned off for the run); a backend only speaks the protocol.

use std::fmt;
use std::sync::Arc;

pub use greenlight_types::remote::*;

/// How a run reaches the cluster a verify.yaml names (`options.remote`).
#[derive(Clone)]
pub struct RemoteSettings {
    /// What speaks to the cluster.
    pub backend: Arc<dyn Backend>,
    /// `GREENLIGHT_REMOTE_ENDPOINT` as the front end read it: another endpoint for every
    /// verify.yaml (or `off`, which turns remote off), `None` when it is not set.
    pub endpoint_override: Option<String>,
}

impl fmt::Debug for RemoteSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteSettings")
            .field("endpoint_override", &self.endpoint_override)
            .finish_non_exhaustive()
    }
}
