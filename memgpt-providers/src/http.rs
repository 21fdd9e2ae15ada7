//! The HTTP client shared by providers: one TLS stack (rustls with the *ring* crypto provider),
//! timeouts, and retries with exponential backoff and jitter that honour `Retry-After`.

use std::sync::Once;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use reqwest::{Client, RequestBuilder, StatusCode};
use tracing::{debug, warn};

/// Encodes a chat request's wire `body` as JSON, once per call: every attempt sends the same
/// bytes (cloning [`Bytes`] shares them). The buffer is sized from `request` up front, so the
/// encoding of a long prompt does not copy itself as it grows.
pub(crate) fn encode_body(
    body: &impl serde::Serialize,
    request: &memgpt_core::llm::ChatRequest,
) -> Result<Bytes, memgpt_core::llm::LlmError> {
    let mut buffer = Vec::with_capacity(encoded_size_hint(request));
    serde_json::to_writer(&mut buffer, body).map_err(unencodable)?;
    Ok(Bytes::from(buffer))
}

/// The error of a request that could not be encoded as JSON (retrying cannot help).
pub(crate) fn unencodable(e: serde_json::Error) -> memgpt_core::llm::LlmError {
    memgpt_core::llm::LlmError::Permanent {
        status: None,
        message: format!("could not encode the request: {e}"),
    }
}

/// About how many bytes `request` takes as JSON: its texts, an eighth more for escapes, and
/// room for the fields around them and the function schemas.
fn encoded_size_hint(request: &memgpt_core::llm::ChatRequest) -> usize {
    let texts: usize = request
        .messages
        .iter()
        .map(|m| {
            let calls: usize = m.tool_calls.iter().map(|c| c.arguments.len() + 64).sum();
            m.content.len() + calls + 64
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + 1024)
        .sum();
    texts + texts / 8 + tools + 256
}

/// How a provider retries transient failures (HTTP 408/409/425/429/5xx, timeouts, connection
/// errors).
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// The first backoff; it doubles with each retry.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
    /// The longest wait a server's `Retry-After` may impose; longer requests are cut to this.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (0-based): the server's `Retry-After` if it gave
    /// one (capped), else exponential backoff with "equal jitter" (between half and all of the
    /// backoff, so retries spread out but never hammer).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_retry_after);
        }
        let exp = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(attempt.min(20)));
        let backoff = exp.min(self.max_backoff);
        let half = backoff / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// Connection settings every HTTP provider shares.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpSettings {
    /// Whole-request timeout (a slow local model may need minutes).
    pub timeout: Duration,
    /// Connection timeout.
    pub connect_timeout: Duration,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// The most bytes read from one response body (or one response stream); a larger body is
    /// an [`HttpFailure::TooLarge`], not an allocation the server chooses.
    pub max_response_bytes: usize,
}

/// The default [`HttpSettings::max_response_bytes`]: 16 MiB, far above any chat completion or
/// embedding batch a provider sends (an 8,192-token reply is well under 100 KB).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 << 20;

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// Installs *ring* as the process's rustls crypto provider, unless the application installed
/// one already. The whole workspace uses *ring* (as sqlx does), so only one crypto library is
/// compiled and linked.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race with another installer is fine: some provider is installed.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// Builds an HTTP client with the settings' timeouts.
pub fn client(settings: &HttpSettings) -> Result<Client, reqwest::Error> {
    install_crypto_provider();
    Client::builder()
        .timeout(settings.timeout)
        .connect_timeout(settings.connect_timeout)
        .user_agent(concat!("memgpt-rs/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// A response that completed (any status).
#[derive(Debug)]
pub struct HttpResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: String,
}

/// Why a request failed for good.
#[derive(Debug)]
pub enum HttpFailure {
    /// The server answered with a non-success status that is not retryable, or retries ran out
    /// on a retryable one.
    Status(HttpResponse),
    /// The request never got a response (connection, timeout, body), after retries.
    Transport(reqwest::Error),
    /// The response body was longer than [`HttpSettings::max_response_bytes`] (not retried:
    /// the same server would most likely send it again).
    TooLarge {
        /// The limit that was passed.
        limit: usize,
    },
}

impl HttpFailure {
    /// The message of a [`HttpFailure::TooLarge`].
    pub fn too_large_message(limit: usize) -> String {
        format!(
            "the response is larger than the {limit}-byte limit (HttpSettings::max_response_bytes)"
        )
    }
}

/// Whether a status is worth retrying.
pub fn is_retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 409 | 425 | 429 | 529) || status.is_server_error()
}

/// The wait a response asks for: `retry-after-ms` (OpenAI), else `Retry-After` in seconds or
/// as an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
    {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// Sends the request `build` makes, retrying transient failures per `policy`. Returns the
/// first successful response, or why it failed. `give_up` lets the caller stop retrying a
/// retryable status whose body says retrying is pointless (e.g. an exhausted quota).
///
/// Bodies longer than `settings.max_response_bytes` are not read past the limit.
pub async fn send_with_retry(
    settings: &HttpSettings,
    build: impl Fn() -> RequestBuilder,
    give_up: impl Fn(&HttpResponse) -> bool,
) -> Result<HttpResponse, HttpFailure> {
    match retry_loop(settings, build, give_up, false).await? {
        Attempt::Read(response) => Ok(response),
        // Not produced when `stream_success` is false; read it all the same.
        Attempt::Unread(response) => read(response, settings.max_response_bytes).await,
    }
}

/// Like [`send_with_retry`], but returns a successful response with its body unread, so the
/// caller can consume it as a stream ([`reqwest::Response::chunk`]).
///
/// Only what happens before a success status arrives is retried: connection errors, timeouts
/// and retryable statuses (whose bodies are read, to classify them and to feed `give_up`).
/// Once the successful response is returned nothing is retried: a failure while reading its
/// body is the caller's to report, since part of it may already have been used.
pub async fn send_with_retry_streaming(
    settings: &HttpSettings,
    build: impl Fn() -> RequestBuilder,
    give_up: impl Fn(&HttpResponse) -> bool,
) -> Result<reqwest::Response, HttpFailure> {
    match retry_loop(settings, build, give_up, true).await? {
        Attempt::Unread(response) => Ok(response),
        // Not produced when `stream_success` is true.
        Attempt::Read(response) => Err(HttpFailure::Status(response)),
    }
}

/// The outcome of one attempt that got a response.
enum Attempt {
    /// A response read in full.
    Read(HttpResponse),
    /// A successful response whose body is left to the caller.
    Unread(reqwest::Response),
}

async fn read(response: reqwest::Response, limit: usize) -> Result<HttpResponse, HttpFailure> {
    let status = response.status();
    let headers = response.headers().clone();
    let body = read_text(response, limit).await?;
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// Reads a whole body as text (invalid UTF-8 replaced), refusing to read more than `limit`
/// bytes: a declared `Content-Length` over it fails at once, an undeclared one as soon as the
/// limit is passed.
pub async fn read_text(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<String, HttpFailure> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(HttpFailure::TooLarge { limit });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(HttpFailure::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(HttpFailure::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(match String::from_utf8(body) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// The retry loop of [`send_with_retry`] and [`send_with_retry_streaming`]: a successful
/// response is returned unread when `stream_success` is set, every other response is read.
async fn retry_loop(
    settings: &HttpSettings,
    build: impl Fn() -> RequestBuilder,
    give_up: impl Fn(&HttpResponse) -> bool,
    stream_success: bool,
) -> Result<Attempt, HttpFailure> {
    let policy = &settings.retry;
    let mut attempt = 0;
    loop {
        let outcome = match build().send().await {
            Ok(response) if stream_success && response.status().is_success() => {
                return Ok(Attempt::Unread(response));
            }
            Ok(response) => read(response, settings.max_response_bytes).await,
            Err(e) => Err(HttpFailure::Transport(e)),
        };
        let (retry, wait) = match &outcome {
            Ok(response) if response.status.is_success() => {
                break outcome.map(Attempt::Read);
            }
            Ok(response) => (
                is_retryable(response.status) && !give_up(response),
                retry_after(&response.headers),
            ),
            Err(HttpFailure::Transport(_)) => (true, None),
            Err(_) => (false, None),
        };
        if !retry || attempt >= policy.max_retries {
            return match outcome {
                Ok(response) => Err(HttpFailure::Status(response)),
                Err(failure) => Err(failure),
            };
        }
        let delay = policy.delay(attempt, wait);
        match &outcome {
            Ok(response) => warn!(
                status = response.status.as_u16(),
                attempt,
                ?delay,
                "transient provider error, retrying"
            ),
            Err(HttpFailure::Transport(e)) => {
                warn!(error = %e, attempt, ?delay, "request failed, retrying")
            }
            Err(_) => {}
        }
        tokio::time::sleep(delay).await;
        attempt += 1;
        debug!(attempt, "retrying request");
    }
}

/// A one-line description of a transport error with its causes ("could not connect: ...: ...").
#[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
/// A failure while reading a streamed body: the request was sent and the stream broke, so
/// the caller may retry the whole request (it is not retried here: parts were reported).
pub(crate) fn stream_read_error(e: reqwest::Error) -> memgpt_core::llm::LlmError {
    memgpt_core::llm::LlmError::Transient {
        status: None,
        message: describe_transport_error(&e),
        retry_after: None,
    }
}

pub(crate) fn describe_transport_error(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "request timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "reading the response failed"
    } else {
        "request failed"
    };
    let mut message = format!("{what}: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// A response body cut to a length fit for an error message.
#[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
pub(crate) fn truncate_body(body: &str) -> String {
    const MAX: usize = 500;
    match body.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &body[..cut]),
        None if body.trim().is_empty() => "(empty response body)".to_owned(),
        None => body.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let p = RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(5),
        };
        for attempt in 0..8 {
            let full =
                Duration::from_millis(100 * 2u64.pow(attempt)).min(Duration::from_millis(1000));
            let d = p.delay(attempt, None);
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?}");
        }
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(90))),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut d = HeaderMap::new();
        d.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(
            retry_after(&d),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 425, 429, 500, 502, 503, 504, 529] {
            assert!(is_retryable(StatusCode::from_u16(s).unwrap()), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!is_retryable(StatusCode::from_u16(s).unwrap()), "{s}");
        }
    }
}
