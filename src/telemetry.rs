//! OpenTelemetry export over OTLP (feature `otel`): the agents' `tracing` spans, in
//! OpenTelemetry's GenAI semantic conventions, sent to a collector.
//!
//! Every step is an `invoke_agent {name}` span, with a `chat {model}` span per model call
//! (`gen_ai.request.model`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
//! `gen_ai.usage.cache_read.input_tokens`, `gen_ai.response.finish_reasons`) and an
//! `execute_tool {function}` span per function call, and `memgpt.*` attributes of what the step
//! did to memory: the functions called, memory pressure, flushes. [`OtlpExport`] builds the
//! `tracing` layer that exports them (OTLP over HTTP, protobuf) and the guard that flushes what
//! is left when the program ends. `memgpt` reads the endpoint from the `otlp_endpoint` setting
//! (`MEMGPT_OTLP_ENDPOINT`, or OpenTelemetry's own `OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! # #[tokio::main] async fn main() -> Result<(), memgpt::telemetry::TelemetryError> {
//! let (layer, guard) = memgpt::telemetry::OtlpExport::new("http://localhost:4318")
//!     .service_name("my-agents")
//!     .layer()?;
//! tracing_subscriber::registry().with(layer).init();
//! // ... run agents ...
//! guard.shutdown()?; // sends what is still buffered
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;

/// Why telemetry export could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("invalid OTLP endpoint `{0}`: expected an http:// or https:// URL")]
    Endpoint(String),
    /// The exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(String),
    /// Spans could not be flushed at shutdown.
    #[error("cannot flush the OTLP exporter: {0}")]
    Shutdown(String),
}

/// Where and how spans are exported: an OTLP/HTTP endpoint (the collector's base URL, such as
/// `http://localhost:4318`; spans go to its `/v1/traces`), the service name, extra headers.
#[derive(Clone, Debug)]
pub struct OtlpExport {
    endpoint: String,
    service_name: String,
    headers: Vec<(String, String)>,
    timeout: Duration,
}

impl OtlpExport {
    /// Export to the collector at `endpoint` (its base URL, or the full `/v1/traces` URL).
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            service_name: "memgpt".into(),
            headers: Vec::new(),
            timeout: Duration::from_secs(10),
        }
    }

    /// The `service.name` of the exported resource (default `memgpt`).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = name.into();
        self
    }

    /// A header sent with every export (an API key a hosted collector asks for).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The URL spans are posted to: the endpoint's `/v1/traces`, unless it names a path.
    pub fn traces_url(&self) -> Result<String, TelemetryError> {
        let endpoint = self.endpoint.trim_end_matches('/');
        let Some((_, rest)) = endpoint.split_once("://") else {
            return Err(TelemetryError::Endpoint(self.endpoint.clone()));
        };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) || rest.is_empty()
        {
            return Err(TelemetryError::Endpoint(self.endpoint.clone()));
        }
        Ok(if rest.contains('/') {
            endpoint.to_owned()
        } else {
            format!("{endpoint}/v1/traces")
        })
    }

    /// Starts exporting: the `tracing` layer that turns spans into OpenTelemetry spans and
    /// sends them in batches from a background thread, and the guard that flushes and stops
    /// the export (call [`OtlpGuard::shutdown`] before the program ends; dropping it does the
    /// same). Needs a tokio runtime: the exports run on the one current when this is called.
    pub fn layer<S>(self) -> Result<(OtlpLayer<S>, OtlpGuard), TelemetryError>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let url = self.traces_url()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            TelemetryError::Exporter("OTLP export needs a tokio runtime".to_owned())
        })?;
        let settings = memgpt_providers::http::HttpSettings {
            timeout: self.timeout,
            ..Default::default()
        };
        let client = memgpt_providers::http::client(&settings)
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(TokioHttpClient { client, runtime })
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(self.timeout)
            .with_headers(self.headers.into_iter().collect())
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_attributes([KeyValue::new("service.name", self.service_name)])
                    .build(),
            )
            .build();
        let tracer = provider.tracer("memgpt");
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_tracked_inactivity(false);
        Ok((layer, OtlpGuard { provider }))
    }
}

/// The `tracing` layer [`OtlpExport::layer`] returns.
pub type OtlpLayer<S> = tracing_opentelemetry::OpenTelemetryLayer<S, Tracer>;

/// Keeps the export running; flushes what is buffered and stops it on
/// [`OtlpGuard::shutdown`] or drop.
pub struct OtlpGuard {
    provider: SdkTracerProvider,
}

impl OtlpGuard {
    /// Sends the spans buffered so far now.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        self.provider
            .force_flush()
            .map_err(|e| TelemetryError::Shutdown(e.to_string()))
    }

    /// Sends what is buffered and stops exporting.
    pub fn shutdown(self) -> Result<(), TelemetryError> {
        self.provider
            .shutdown()
            .map_err(|e| TelemetryError::Shutdown(e.to_string()))
    }
}

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        // After an explicit shutdown this reports "already shut down", which is fine.
        let _ = self.provider.shutdown();
    }
}

impl fmt::Debug for OtlpGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpGuard").finish_non_exhaustive()
    }
}

/// The providers' HTTP client for the exporter. The batch processor exports from a thread of
/// its own, outside any runtime: each request runs as a task on the runtime the export was
/// started on.
#[derive(Debug)]
struct TokioHttpClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for TokioHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let url = parts.uri.to_string();
        let request = self
            .client
            .request(parts.method, url)
            .headers(parts.headers)
            .body(body);
        let sent = self.runtime.spawn(async move {
            let response = request.send().await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = sent.await??;
        let mut response = Response::builder().status(status);
        if let Some(h) = response.headers_mut() {
            *h = headers;
        }
        Ok(response.body(body)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_go_to_the_endpoints_traces_path() {
        let url = |e: &str| OtlpExport::new(e).traces_url();
        assert_eq!(
            url("http://localhost:4318").unwrap(),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            url("http://localhost:4318/").unwrap(),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            url("https://otel.example/custom/traces").unwrap(),
            "https://otel.example/custom/traces"
        );
        assert!(url("localhost:4318").is_err());
        assert!(url("ftp://x").is_err());
        assert!(url("http://").is_err());
    }
}
