//! The remote-execution backend this binary hands every gate run (verify, the Stop hook, MCP,
//! the goal loop): the REAPI client behind the gate runner's seam, or, in a build without the
//! `remote` feature, the backend that refuses every cluster and names the feature.

use std::sync::Arc;

use greenlight_gate::{REMOTE_ENDPOINT_VAR, RemoteSettings};

/// The backend, with `GREENLIGHT_REMOTE_ENDPOINT` as this process found it.
pub fn settings() -> RemoteSettings {
    RemoteSettings {
        #[cfg(feature = "remote")]
        backend: Arc::new(greenlight_remote::ReapiBackend),
        #[cfg(not(feature = "remote"))]
        backend: Arc::new(crate::remote_left_out::LeftOut),
        endpoint_override: crate::environment::get()
            .vars
            .get(REMOTE_ENDPOINT_VAR)
            .map(|value| value.to_string_lossy().into_owned()),
    }
}
