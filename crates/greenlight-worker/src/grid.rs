//! The grid as the session sees it: a Bots client on a channel of its own, and which failed
//! calls are worth repeating.

use std::time::Duration;

use tonic::Code;
use tonic::transport::{Channel, ClientTlsConfig};

use crate::WorkerError;
use crate::proto::bots_client::BotsClient;

/// A Bots client on its own channel (plain HTTP/2, or rustls for `https`), connected on first
/// use. Must be called inside a tokio runtime.
pub(crate) fn bots_client(url: &str) -> Result<BotsClient<Channel>, WorkerError> {
    let invalid = |reason: String| WorkerError::InvalidUrl {
        url: url.to_owned(),
        reason,
    };
    let trimmed = url.trim();
    let (https, rest) = if let Some(rest) = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("grpcs://"))
    {
        (true, rest)
    } else if let Some(rest) = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("grpc://"))
    {
        (false, rest)
    } else {
        return Err(invalid("the scheme must be http or https".to_owned()));
    };
    let normal = format!("{}://{rest}", if https { "https" } else { "http" });
    let mut endpoint = tonic::transport::Endpoint::from_shared(normal)
        .map_err(|e| invalid(e.to_string()))?
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true);
    if https {
        endpoint = endpoint
            .tls_config(
                ClientTlsConfig::new()
                    .with_native_roots()
                    .with_webpki_roots(),
            )
            .map_err(|e| invalid(e.to_string()))?;
    }
    Ok(BotsClient::new(endpoint.connect_lazy()))
}

/// Whether a failed call is worth repeating on the same session.
pub(crate) enum Failure {
    /// The grid or the network hiccupped: try again.
    Transient,
    /// The grid no longer knows the session: make a new one.
    SessionLost,
    /// Trying again cannot help.
    Fatal,
}

pub(crate) fn judge(status: &tonic::Status) -> Failure {
    match status.code() {
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::Internal
        | Code::Unknown
        | Code::Cancelled => Failure::Transient,
        Code::Unauthenticated | Code::PermissionDenied | Code::Unimplemented => Failure::Fatal,
        _ => Failure::SessionLost,
    }
}

pub(crate) fn shown(status: &tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    // The lazy channel spawns its connection task, so it needs a runtime.
    #[tokio::test]
    async fn only_http_and_https_grids_are_accepted() {
        for good in [
            "http://127.0.0.1:1",
            "https://grid:443",
            "grpc://h:1",
            " grpcs://h:1 ",
        ] {
            assert!(bots_client(good).is_ok(), "{good}");
        }
        let e = bots_client("ftp://h")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("`ftp://h`"), "{e}");
    }

    #[test]
    fn hiccups_are_retried_a_forgotten_session_is_remade_and_refusals_stop() {
        let judged = |code| judge(&tonic::Status::new(code, "x"));
        assert!(matches!(judged(Code::Unavailable), Failure::Transient));
        assert!(matches!(judged(Code::DeadlineExceeded), Failure::Transient));
        assert!(matches!(
            judged(Code::InvalidArgument),
            Failure::SessionLost
        ));
        assert!(matches!(judged(Code::NotFound), Failure::SessionLost));
        assert!(matches!(judged(Code::PermissionDenied), Failure::Fatal));
    }
}
