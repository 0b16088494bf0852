//! Reaching a server: the endpoint, one shared channel (plain HTTP/2 or rustls), the bearer
//! token on every call, and the capability check that decides what the server is used for.
//!
//! `Remote::connect` asks the server's capabilities before anything else, so a wrong URL, a
//! server without SHA-256 or a refused token is reported once, at the start, in plain words.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bazel_remote_apis::build::bazel::remote::execution::v2::{
    self as reapi, action_cache_client::ActionCacheClient, capabilities_client::CapabilitiesClient,
    content_addressable_storage_client::ContentAddressableStorageClient, digest_function,
    execution_client::ExecutionClient,
};
use bazel_remote_apis::google::bytestream::byte_stream_client::ByteStreamClient;
use bazel_remote_apis::google::longrunning::operations_client::OperationsClient;
use tonic::metadata::{Ascii, Binary, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use crate::error::RemoteError;

pub use greenlight_types::remote::Endpoint;

/// How long to wait for the TCP (and TLS) connection before calling the server unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the capabilities call may take: it is the first call and tiny.
const CAPABILITIES_TIMEOUT: Duration = Duration::from_secs(30);
/// How long any other call but a stream may take. The largest is a full batch (4 MiB on
/// BuildGrid), which takes half a minute even at 1 Mbit/s; a server silent for longer is hung,
/// and a caller is better off running the gate locally.
const UNARY_TIMEOUT: Duration = Duration::from_secs(120);
/// HTTP/2 pings keep a long `Execute` stream alive through idle NAT and load balancers and
/// notice a dead server within ping interval + timeout.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest response accepted: a full batch read (4 MiB on BuildGrid) plus its framing
/// exceeds tonic's default 4 MiB limit.
pub(crate) const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// The batch limit assumed when a server states none: gRPC's customary 4 MiB message size.
const DEFAULT_MAX_BATCH: i64 = 4 * 1024 * 1024;

/// A connection to a REAPI server. Cheap to clone: clones share one HTTP/2 channel.
#[derive(Clone)]
pub struct Remote {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    instance: String,
    channel: Channel,
    auth: Auth,
    max_batch: usize,
    can_execute: bool,
}

pub(crate) type Svc = InterceptedService<Channel, Auth>;

impl Remote {
    /// Connects and checks the server's capabilities: SHA-256 must be offered; the batch size
    /// limit and whether execution is enabled are remembered.
    pub async fn connect(endpoint: &Endpoint) -> Result<Remote, RemoteError> {
        let url = endpoint.url.trim().to_string();
        let https = scheme_is_https(&url)?;
        let http_url = normalised_url(&url);
        let mut tonic_endpoint = tonic::transport::Endpoint::from_shared(http_url.clone())
            .map_err(|e| RemoteError::InvalidUrl {
                url: url.clone(),
                reason: error_chain(&e),
            })?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        if https {
            let mut tls = ClientTlsConfig::new();
            tls = match &endpoint.ca_file {
                Some(path) => {
                    let pem = std::fs::read(path).map_err(|source| RemoteError::CaFile {
                        url: url.clone(),
                        path: path.clone(),
                        source,
                    })?;
                    tls.ca_certificate(Certificate::from_pem(pem))
                }
                None => tls.with_native_roots().with_webpki_roots(),
            };
            tonic_endpoint =
                tonic_endpoint
                    .tls_config(tls)
                    .map_err(|e| RemoteError::InvalidUrl {
                        url: url.clone(),
                        reason: format!("TLS setup failed: {}", error_chain(&e)),
                    })?;
        }
        let auth = Auth::new(&url, endpoint.token_file.as_ref())?;
        let channel = tonic_endpoint
            .connect()
            .await
            .map_err(|e| RemoteError::Unreachable {
                url: url.clone(),
                detail: error_chain(&e),
            })?;

        let mut client = CapabilitiesClient::with_interceptor(channel.clone(), auth.clone());
        let mut request = tonic::Request::new(reapi::GetCapabilitiesRequest {
            instance_name: endpoint.instance.clone(),
        });
        request.set_timeout(CAPABILITIES_TIMEOUT);
        let capabilities = client
            .get_capabilities(request)
            .await
            .map_err(|status| {
                RemoteError::from_status(&url, "GetCapabilities", &endpoint.instance, &status)
            })?
            .into_inner();
        let (max_batch, can_execute) = judge_capabilities(&url, &endpoint.instance, &capabilities)?;
        Ok(Remote {
            inner: Arc::new(Inner {
                url,
                instance: endpoint.instance.clone(),
                channel,
                auth,
                max_batch,
                can_execute,
            }),
        })
    }

    /// True when the server offers execution for this instance (with SHA-256).
    pub fn can_execute(&self) -> bool {
        self.inner.can_execute
    }

    /// The instance name every call names.
    pub fn instance(&self) -> &str {
        &self.inner.instance
    }

    /// The endpoint URL, as given.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The server's limit on the total size of one batch call, in bytes.
    pub fn max_batch_total_size(&self) -> usize {
        self.inner.max_batch
    }

    pub(crate) fn cas(&self) -> ContentAddressableStorageClient<Svc> {
        ContentAddressableStorageClient::with_interceptor(
            self.inner.channel.clone(),
            self.inner.auth.clone(),
        )
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE)
    }

    pub(crate) fn bytestream(&self) -> ByteStreamClient<Svc> {
        ByteStreamClient::with_interceptor(self.inner.channel.clone(), self.inner.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    pub(crate) fn action_cache(&self) -> ActionCacheClient<Svc> {
        ActionCacheClient::with_interceptor(self.inner.channel.clone(), self.inner.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    pub(crate) fn execution(&self) -> ExecutionClient<Svc> {
        ExecutionClient::with_interceptor(self.inner.channel.clone(), self.inner.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    pub(crate) fn operations(&self) -> OperationsClient<Svc> {
        OperationsClient::with_interceptor(self.inner.channel.clone(), self.inner.auth.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// A resource name under this instance (`{instance}/{rest}`, or `{rest}` for the default
    /// instance).
    pub(crate) fn resource(&self, rest: &str) -> String {
        if self.inner.instance.is_empty() {
            rest.to_string()
        } else {
            format!("{}/{rest}", self.inner.instance)
        }
    }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.inner.url)
            .field("instance", &self.inner.instance)
            .field("max_batch", &self.inner.max_batch)
            .field("can_execute", &self.inner.can_execute)
            .finish()
    }
}

/// A request for a unary call, bounded by `UNARY_TIMEOUT`.
pub(crate) fn unary<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(UNARY_TIMEOUT);
    request
}

/// Checks SHA-256 is offered and returns (batch limit, execution enabled).
fn judge_capabilities(
    url: &str,
    instance: &str,
    capabilities: &reapi::ServerCapabilities,
) -> Result<(usize, bool), RemoteError> {
    let sha256 = digest_function::Value::Sha256 as i32;
    let Some(cache) = &capabilities.cache_capabilities else {
        return Err(RemoteError::NoCache {
            url: url.to_string(),
            instance: instance.to_string(),
        });
    };
    // Servers older than the `digest_functions` field offered SHA-256 only.
    if !cache.digest_functions.is_empty() && !cache.digest_functions.contains(&sha256) {
        let offered: Vec<String> = cache
            .digest_functions
            .iter()
            .map(|f| match digest_function::Value::try_from(*f) {
                Ok(v) => v.as_str_name().to_string(),
                Err(_) => f.to_string(),
            })
            .collect();
        return Err(RemoteError::NoSha256 {
            url: url.to_string(),
            instance: instance.to_string(),
            offered: offered.join(", "),
        });
    }
    let max_batch = match cache.max_batch_total_size_bytes {
        n if n <= 0 => DEFAULT_MAX_BATCH,
        n => n,
    };
    let can_execute = capabilities
        .execution_capabilities
        .as_ref()
        .is_some_and(|e| {
            e.exec_enabled
                && (e.digest_function == sha256
                    || e.digest_functions.contains(&sha256)
                    || (e.digest_function == 0 && e.digest_functions.is_empty()))
        });
    Ok((
        usize::try_from(max_batch).unwrap_or(usize::MAX),
        can_execute,
    ))
}

fn scheme_is_https(url: &str) -> Result<bool, RemoteError> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("http" | "grpc") => Ok(false),
        Some("https" | "grpcs") => Ok(true),
        Some(other) => Err(RemoteError::InvalidUrl {
            url: url.to_string(),
            reason: format!("unknown scheme `{other}`"),
        }),
        None => Err(RemoteError::InvalidUrl {
            url: url.to_string(),
            reason: "no scheme".to_string(),
        }),
    }
}

/// `grpc://` and `grpcs://` (Bazel's spelling) as the `http://` and `https://` tonic knows.
fn normalised_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("grpc") => format!("http://{rest}"),
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("grpcs") => {
            format!("https://{rest}")
        }
        _ => url.to_string(),
    }
}

/// An error and its sources, joined: tonic's top-level message alone is "transport error".
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// Adds the bearer token and the REAPI request metadata (naming greenlight as the tool) to
/// every call.
#[derive(Clone)]
pub(crate) struct Auth {
    bearer: Option<MetadataValue<Ascii>>,
    request_metadata: MetadataValue<Binary>,
}

impl Auth {
    fn new(url: &str, token_file: Option<&PathBuf>) -> Result<Auth, RemoteError> {
        let bearer = match token_file {
            None => None,
            Some(path) => {
                let fail = |reason: String| RemoteError::TokenFile {
                    url: url.to_string(),
                    path: path.clone(),
                    reason,
                };
                let text = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
                let token = String::from_utf8_lossy(&text).trim().to_string();
                if token.is_empty() {
                    return Err(fail("the file is empty".to_string()));
                }
                let value = MetadataValue::try_from(format!("Bearer {token}")).map_err(|_| {
                    fail("the token holds characters a header cannot carry".to_string())
                })?;
                Some(value)
            }
        };
        let metadata = reapi::RequestMetadata {
            tool_details: Some(reapi::ToolDetails {
                tool_name: "greenlight".to_string(),
                tool_version: env!("CARGO_PKG_VERSION").to_string(),
            }),
            ..Default::default()
        };
        Ok(Auth {
            bearer,
            request_metadata: MetadataValue::from_bytes(&prost::Message::encode_to_vec(&metadata)),
        })
    }
}

impl Interceptor for Auth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let metadata = request.metadata_mut();
        if let Some(bearer) = &self.bearer {
            metadata.insert("authorization", bearer.clone());
        }
        metadata.insert_bin(
            "build.bazel.remote.execution.v2.requestmetadata-bin",
            self.request_metadata.clone(),
        );
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(functions: Vec<i32>, max: i64, exec: bool) -> reapi::ServerCapabilities {
        reapi::ServerCapabilities {
            cache_capabilities: Some(reapi::CacheCapabilities {
                digest_functions: functions,
                max_batch_total_size_bytes: max,
                ..Default::default()
            }),
            execution_capabilities: Some(reapi::ExecutionCapabilities {
                digest_function: 1,
                exec_enabled: exec,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn sha256_offered_is_accepted_with_its_batch_limit() {
        let (max, exec) =
            judge_capabilities("http://x", "", &caps(vec![1], 4_193_280, true)).expect("ok");
        assert_eq!((max, exec), (4_193_280, true));
        let (max, exec) = judge_capabilities("http://x", "", &caps(vec![], 0, false)).expect("ok");
        assert_eq!((max, exec), (4 * 1024 * 1024, false));
    }

    #[test]
    fn no_sha256_names_the_server_and_what_it_offers() {
        let err = judge_capabilities("http://cas:1", "main", &caps(vec![9, 2], 0, true))
            .expect_err("must refuse");
        let text = err.to_string();
        assert!(text.contains("http://cas:1"), "{text}");
        assert!(text.contains("BLAKE3, SHA1"), "{text}");
        assert!(!err.is_unreachable());
    }

    #[test]
    fn urls_are_checked_for_their_scheme() {
        assert!(!scheme_is_https("http://a:1").expect("http"));
        assert!(scheme_is_https("GRPCS://a:1").expect("grpcs"));
        assert_eq!(normalised_url("grpc://a:1"), "http://a:1");
        let err = scheme_is_https("ftp://a").expect_err("ftp");
        assert!(err.to_string().contains("unknown scheme `ftp`"), "{err}");
        assert!(scheme_is_https("a:1").is_err());
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_and_says_so() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let url = format!("http://127.0.0.1:{port}");
        let err = Remote::connect(&Endpoint::new(&url))
            .await
            .expect_err("nothing listens");
        assert!(err.is_unreachable(), "{err}");
        assert!(err.to_string().contains(&url), "{err}");
    }

    #[tokio::test]
    async fn a_missing_ca_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = dir.path().join("ca.pem");
        let endpoint = Endpoint {
            ca_file: Some(ca.clone()),
            ..Endpoint::new("https://127.0.0.1:1")
        };
        let err = Remote::connect(&endpoint).await.expect_err("no CA file");
        assert!(matches!(err, RemoteError::CaFile { .. }), "{err}");
        assert!(err.to_string().contains(&ca.display().to_string()), "{err}");
    }

    /// TLS to a server that speaks plain HTTP/2 fails the handshake: unreachable, and said so.
    #[tokio::test]
    async fn https_to_a_plain_server_is_unreachable() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            // Answer the TLS hello with bytes that are not TLS, then hang up.
            if let Ok((mut socket, _)) = listener.accept().await {
                use tokio::io::AsyncWriteExt;
                let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            }
        });
        let url = format!("https://127.0.0.1:{port}");
        let err = Remote::connect(&Endpoint::new(&url))
            .await
            .expect_err("not TLS");
        assert!(err.is_unreachable(), "{err}");
        assert!(err.to_string().contains(&url), "{err}");
        server.abort();
    }

    #[tokio::test]
    async fn an_empty_token_file_is_refused_before_connecting() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("token");
        std::fs::write(&token, "\n").expect("write");
        let endpoint = Endpoint {
            token_file: Some(token.clone()),
            ..Endpoint::new("http://127.0.0.1:1")
        };
        let err = Remote::connect(&endpoint).await.expect_err("empty token");
        assert!(err.to_string().contains("is empty"), "{err}");
        assert!(
            err.to_string().contains(&token.display().to_string()),
            "{err}"
        );
    }
}
