//! The remote-execution backend of a build without the `remote` feature: every connection is
//! refused with the feature to build in, so a verify.yaml's cluster is reported as not used
//! (and why) and its gates run here, never as if they had run remotely.

use std::sync::Arc;

use greenlight_gate::remote::{Backend, Cluster, Endpoint, Failure, RemoteFuture};

use crate::left_out::REMOTE;

/// Refuses every cluster, naming the `remote` feature.
pub struct LeftOut;

impl Backend for LeftOut {
    fn connect<'a>(&'a self, endpoint: &'a Endpoint) -> RemoteFuture<'a, Arc<dyn Cluster>> {
        let message = REMOTE.refusal(&format!("the cluster at {}", endpoint.url));
        Box::pin(async move {
            Err(Failure {
                message,
                unreachable: true,
            })
        })
    }
}
