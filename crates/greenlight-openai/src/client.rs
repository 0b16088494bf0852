//! One chat-completions request over HTTP: connect, send, classify the answer, read the stream
//! chunk by chunk within the idle timeout and the deadline.
//!
//! The rule that keeps it simple: this module decides only what one attempt came to — a stream
//! to read, a failure worth retrying (429, 5xx, a refused or timed-out connection, a stream cut
//! or stalled mid-way) with the server's `Retry-After` when it gave one, or a failure that would
//! come back the same (any other status) — and how long to wait before the next attempt. The
//! adapter owns the attempts, the deadline and what the bytes mean.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

/// How requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per model request, the first included.
    pub max_attempts: u32,
    /// The wait after the first failed attempt; doubled after each further one.
    pub base_delay: Duration,
    /// The longest wait between attempts that greenlight chooses itself.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured; a server asking for more is a failure at once.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            // OpenAI's rate limiter asks for seconds, a local server loading a model for tens of
            // seconds; a minute covers both without hiding a server that is down for good.
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `failed + 1`, after `failed` failures: the server's
    /// `Retry-After` when it gave one, else exponential backoff.
    pub fn delay(&self, failed: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(asked) = retry_after {
            return asked;
        }
        let factor = 2u32.saturating_pow(failed.saturating_sub(1));
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// What one attempt came to, short of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError {
    /// Worth another attempt: the detail, and the wait the server asked for.
    Retry {
        /// What happened, for a person.
        detail: String,
        /// The server's `Retry-After`, when it sent one in seconds.
        retry_after: Option<Duration>,
    },
    /// Would fail the same way again (400, 401, 404, …).
    Fatal(String),
}

/// The HTTP side of the openai family: one client per dispatcher (it pools connections).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
    idle: Duration,
}

/// Builds the `…/chat/completions` URL from a base URL (`http://127.0.0.1:8080/v1`); a URL that
/// already ends there is kept. The error says what is wrong with it.
pub fn completions_url(base: &str) -> Result<String, String> {
    let trimmed = base.trim().trim_end_matches('/');
    let parsed = reqwest::Url::parse(trimmed).map_err(|e| {
        format!("--base-url `{base}` is not a URL ({e}); write e.g. http://127.0.0.1:8080/v1")
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "--base-url `{base}` must start with http:// or https://"
        ));
    }
    if parsed.host_str().is_none() {
        return Err(format!("--base-url `{base}` has no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!(
            "--base-url `{base}` must not carry a query or fragment"
        ));
    }
    Ok(if trimmed.ends_with("/chat/completions") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}/chat/completions")
    })
}

impl Client {
    /// A client for the server at `base_url`, with these connect and idle timeouts.
    pub fn new(base_url: &str, connect: Duration, idle: Duration) -> Result<Self, String> {
        let url = completions_url(base_url)?;
        let http = reqwest::Client::builder()
            .connect_timeout(connect)
            .user_agent(concat!("greenlight/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self { http, url, idle })
    }

    /// The URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one request and returns the response once its status says a stream follows.
    pub async fn open(
        &self,
        body: &Value,
        api_key: Option<&str>,
        key_var: &str,
    ) -> Result<reqwest::Response, AttemptError> {
        let mut request = self
            .http
            .post(&self.url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(key) = api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| AttemptError::Retry {
            detail: format!("cannot reach {}: {}", self.url, error_chain(&e)),
            retry_after: None,
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let body = read_error_body(response).await;
        let detail = format!("{} answered {status}{body}", self.url);
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(AttemptError::Retry {
                detail,
                retry_after,
            });
        }
        Err(AttemptError::Fatal(match status.as_u16() {
            401 | 403 => format!(
                "{detail}; check the API key in ${key_var} (greenlight sends it as a bearer token when the variable is set)"
            ),
            404 => format!("{detail}; check --base-url (it should end in /v1) and --model"),
            _ => detail,
        }))
    }

    /// The next chunk of a response body: `Ok(None)` at its end, an error when the stream broke
    /// or stalled longer than the idle timeout. Returns `Err(None)` when `deadline` passed first.
    pub async fn next_chunk(
        &self,
        response: &mut reqwest::Response,
        deadline: Instant,
    ) -> Result<Option<Vec<u8>>, Option<String>> {
        let idle_end = Instant::now() + self.idle;
        let until = idle_end.min(deadline);
        match tokio::time::timeout_at(until, response.chunk()).await {
            Ok(Ok(chunk)) => Ok(chunk.map(|b| b.to_vec())),
            Ok(Err(e)) => Err(Some(format!(
                "the stream from {} broke: {}",
                self.url,
                error_chain(&e)
            ))),
            Err(_) if deadline <= idle_end => Err(None),
            Err(_) => Err(Some(format!(
                "the stream from {} sent nothing for {} s",
                self.url,
                self.idle.as_secs_f64()
            ))),
        }
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not honoured: the backoff applies).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// `: <the start of the body>` for an error status, or nothing.
async fn read_error_body(response: reqwest::Response) -> String {
    let bytes = match tokio::time::timeout(Duration::from_secs(5), response.bytes()).await {
        Ok(Ok(bytes)) => bytes,
        _ => return String::new(),
    };
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(2000)]);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {}", text.chars().take(500).collect::<String>())
    }
}

/// An error with its causes (reqwest's own message is often just "error sending request").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_become_the_completions_url() {
        assert_eq!(
            completions_url("http://127.0.0.1:8080/v1").as_deref(),
            Ok("http://127.0.0.1:8080/v1/chat/completions")
        );
        assert_eq!(
            completions_url("http://localhost:11434/v1/").as_deref(),
            Ok("http://localhost:11434/v1/chat/completions")
        );
        assert_eq!(
            completions_url("https://h/v1/chat/completions").as_deref(),
            Ok("https://h/v1/chat/completions")
        );
        assert!(completions_url("localhost:8080").is_err());
        assert!(completions_url("ftp://h/v1").is_err());
        assert!(completions_url("not a url").is_err());
        assert!(completions_url("http://h/v1?x=1").is_err());
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_retry_after_wins() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(1, None), Duration::from_millis(500));
        assert_eq!(p.delay(2, None), Duration::from_secs(1));
        assert_eq!(p.delay(3, None), Duration::from_secs(2));
        assert_eq!(p.delay(10, None), Duration::from_secs(8));
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn retry_after_reads_seconds_only() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "2".parse().expect("header"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(reqwest::header::RETRY_AFTER, "0.5".parse().expect("header"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(500)));
        h.insert(
            reqwest::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("header"),
        );
        assert_eq!(retry_after(&h), None);
    }
}
