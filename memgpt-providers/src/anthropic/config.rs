//! [`AnthropicConfig`]: the endpoint, key and model of the Anthropic provider.

use std::fmt;
use std::time::Duration;

use crate::ConfigError;
use crate::http::{HttpSettings, RetryPolicy};

const NOT_CONFIGURED: ConfigError = ConfigError::NotConfigured {
    provider: "Anthropic",
    help: "set ANTHROPIC_API_KEY (for api.anthropic.com), or ANTHROPIC_BASE_URL for a compatible server, and optionally MEMGPT_MODEL",
};

/// Where and how to reach Anthropic's Messages API (or a server speaking it).
#[derive(Clone, PartialEq)]
pub struct AnthropicConfig {
    /// The API root without the version, e.g. `https://api.anthropic.com` (requests go to
    /// `{base_url}/v1/messages`). A trailing `/` or `/v1` is dropped.
    pub base_url: String,
    /// The key, sent as `x-api-key`.
    pub api_key: Option<String>,
    /// The default model.
    pub model: String,
    /// The model's context window, if known (otherwise looked up by model name).
    pub context_window: Option<usize>,
    /// The completion limit sent when a request sets none (Anthropic requires one).
    pub max_tokens: u32,
    /// The `anthropic-version` header.
    pub api_version: String,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// Extra headers sent with every request (e.g. `anthropic-beta`).
    pub extra_headers: Vec<(String, String)>,
    /// `Some(false)` sends `disable_parallel_tool_use`, so the model calls at most one
    /// function per turn; `None` and `Some(true)` leave Anthropic's default (parallel calls).
    pub parallel_tool_calls: Option<bool>,
    /// Whether requests mark their stable prefix (function schemas, instructions, memory
    /// blocks) with a `cache_control` breakpoint, so later calls read it from Anthropic's
    /// prompt cache (default: yes; see [`ChatRequest::cache_prefix`](memgpt_core::llm::ChatRequest::cache_prefix)).
    pub prompt_caching: bool,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values may be credentials too: only their names are shown.
        let headers: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("context_window", &self.context_window)
            .field("max_tokens", &self.max_tokens)
            .field("api_version", &self.api_version)
            .field("http", &self.http)
            .field("extra_headers", &headers)
            .field("parallel_tool_calls", &self.parallel_tool_calls)
            .field("prompt_caching", &self.prompt_caching)
            .finish()
    }
}

impl AnthropicConfig {
    /// Anthropic's public endpoint.
    pub const ANTHROPIC_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The model used when none is configured.
    pub const DEFAULT_MODEL: &'static str = "claude-sonnet-4-5";
    /// The `anthropic-version` this provider speaks.
    pub const API_VERSION: &'static str = "2023-06-01";
    /// The default completion limit.
    pub const DEFAULT_MAX_TOKENS: u32 = 4096;

    /// A server at `base_url` serving `model`, with no key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: normalize_base_url(&base_url.into()),
            api_key: None,
            model: model.into(),
            context_window: None,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            api_version: Self::API_VERSION.to_owned(),
            http: HttpSettings::default(),
            extra_headers: Vec::new(),
            parallel_tool_calls: None,
            prompt_caching: true,
        }
    }

    /// Anthropic itself, with `api_key`.
    pub fn anthropic(api_key: impl Into<String>, model: impl Into<String>) -> Self {
        Self::new(Self::ANTHROPIC_BASE_URL, model).with_api_key(api_key)
    }

    /// Reads the environment:
    ///
    /// * `ANTHROPIC_API_KEY`: the key;
    /// * `ANTHROPIC_BASE_URL`: the server (default: Anthropic's);
    /// * `MEMGPT_MODEL` or `ANTHROPIC_MODEL`: the model (default
    ///   [`DEFAULT_MODEL`](Self::DEFAULT_MODEL));
    /// * `MEMGPT_CONTEXT_WINDOW`: the context window in tokens.
    ///
    /// Fails with [`ConfigError::NotConfigured`](crate::ConfigError::NotConfigured) when neither a key nor a base URL is set.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`AnthropicConfig::from_env`] over any variable source (for tests and config files).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| get(n).filter(|v| !v.trim().is_empty()))
        };
        let base_url = var(&["ANTHROPIC_BASE_URL"]);
        let api_key = var(&["ANTHROPIC_API_KEY"]);
        if base_url.is_none() && api_key.is_none() {
            return Err(NOT_CONFIGURED);
        }
        let model = var(&["MEMGPT_MODEL", "ANTHROPIC_MODEL"])
            .unwrap_or_else(|| Self::DEFAULT_MODEL.to_owned());
        let mut config = Self::new(
            base_url.unwrap_or_else(|| Self::ANTHROPIC_BASE_URL.to_owned()),
            model,
        );
        if !config.base_url.starts_with("http://") && !config.base_url.starts_with("https://") {
            return Err(ConfigError::Invalid(format!(
                "base URL `{}` must start with http:// or https://",
                config.base_url
            )));
        }
        config.api_key = api_key;
        if let Some(window) = var(&["MEMGPT_CONTEXT_WINDOW"]) {
            config.context_window = Some(window.trim().parse().map_err(|_| {
                ConfigError::Invalid(format!(
                    "MEMGPT_CONTEXT_WINDOW must be a number of tokens, got `{window}`"
                ))
            })?);
        }
        Ok(config)
    }

    /// Sets the key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the model's context window.
    pub fn with_context_window(mut self, tokens: usize) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Sets the completion limit used when a request sets none.
    pub fn with_max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens;
        self
    }

    /// Sets the whole-request timeout (for streaming: until the last byte).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.http.timeout = timeout;
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.http.retry = retry;
        self
    }

    /// Adds a header sent with every request.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_headers.push((name.into(), value.into()));
        self
    }

    /// Whether to mark the stable prefix for Anthropic's prompt cache (default: yes).
    pub fn with_prompt_caching(mut self, enabled: bool) -> Self {
        self.prompt_caching = enabled;
        self
    }

    /// The Messages endpoint.
    pub(super) fn messages_url(&self) -> String {
        format!("{}/v1/messages", self.base_url)
    }
}

/// Drops trailing slashes and a trailing `/v1`, which the endpoint path adds back.
fn normalize_base_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    url.strip_suffix("/v1").unwrap_or(url).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn env_needs_a_key_or_a_url() {
        assert_eq!(
            AnthropicConfig::from_lookup(lookup(&[])),
            Err(NOT_CONFIGURED)
        );
        assert_eq!(
            AnthropicConfig::from_lookup(lookup(&[("OPENAI_API_KEY", "sk-x")])),
            Err(NOT_CONFIGURED),
            "another provider's key is not ours"
        );
        let c = AnthropicConfig::from_lookup(lookup(&[("ANTHROPIC_API_KEY", "sk-ant")])).unwrap();
        assert_eq!(c.base_url, AnthropicConfig::ANTHROPIC_BASE_URL);
        assert_eq!(c.messages_url(), "https://api.anthropic.com/v1/messages");
        assert_eq!(c.model, AnthropicConfig::DEFAULT_MODEL);
        assert_eq!(c.api_key.as_deref(), Some("sk-ant"));
        assert_eq!(c.max_tokens, 4096);

        let c = AnthropicConfig::from_lookup(lookup(&[
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9000/v1/"),
            ("ANTHROPIC_MODEL", "claude-haiku-4-5"),
            ("MEMGPT_CONTEXT_WINDOW", "100000"),
        ]))
        .unwrap();
        assert_eq!(c.messages_url(), "http://127.0.0.1:9000/v1/messages");
        assert_eq!(
            (c.model.as_str(), c.context_window, c.api_key),
            ("claude-haiku-4-5", Some(100_000), None)
        );
        let c = AnthropicConfig::from_lookup(lookup(&[
            ("ANTHROPIC_API_KEY", "k"),
            ("MEMGPT_MODEL", "claude-opus-4-1"),
            ("ANTHROPIC_MODEL", "ignored"),
        ]))
        .unwrap();
        assert_eq!(c.model, "claude-opus-4-1", "MEMGPT_MODEL comes first");
        assert!(
            AnthropicConfig::from_lookup(lookup(&[("ANTHROPIC_BASE_URL", "localhost:1")])).is_err()
        );
        assert!(matches!(
            AnthropicConfig::from_lookup(lookup(&[
                ("ANTHROPIC_API_KEY", "k"),
                ("MEMGPT_CONTEXT_WINDOW", "big")
            ])),
            Err(ConfigError::Invalid(_))
        ));
    }

    #[test]
    fn debug_never_shows_secrets() {
        let c = AnthropicConfig::anthropic("sk-ant-secret", "claude-sonnet-4-5")
            .with_header("x-proxy-token", "hunter2");
        let shown = format!("{c:?}");
        assert!(!shown.contains("sk-ant-secret") && !shown.contains("hunter2"));
        assert!(shown.contains("x-proxy-token") && shown.contains("<redacted>"));
    }
}
