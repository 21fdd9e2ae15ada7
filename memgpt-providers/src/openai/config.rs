use std::fmt;
use std::time::Duration;

use crate::http::{HttpSettings, RetryPolicy};

/// Why a configuration could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Neither an API key nor a base URL is set in the environment.
    #[error(
        "no OpenAI-compatible endpoint is configured: set OPENAI_API_KEY (for api.openai.com), or \
         MEMGPT_BASE_URL for another server (e.g. http://localhost:11434/v1 for Ollama), and MEMGPT_MODEL"
    )]
    NotConfigured,
    /// A value is malformed.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Where and how to reach an OpenAI-compatible server.
#[derive(Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The API root, e.g. `https://api.openai.com/v1` (requests go to `{base_url}/chat/completions`).
    pub base_url: String,
    /// The bearer token, if the server wants one.
    pub api_key: Option<String>,
    /// The default model.
    pub model: String,
    /// The model's context window, if known (otherwise looked up by model name).
    pub context_window: Option<usize>,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// Extra headers sent with every request (e.g. OpenRouter's `HTTP-Referer`).
    pub extra_headers: Vec<(String, String)>,
    /// Sent as `parallel_tool_calls` when set.
    pub parallel_tool_calls: Option<bool>,
    /// Whether the server understands `tool_choice` (a few older local servers reject it).
    pub supports_tool_choice: bool,
    /// Send the completion limit as `max_completion_tokens` (OpenAI's current name, required by
    /// its reasoning models) instead of `max_tokens` (what most other servers read). `None`:
    /// decided by the base URL (`max_completion_tokens` for api.openai.com only).
    pub max_completion_tokens_field: Option<bool>,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("context_window", &self.context_window)
            .field("http", &self.http)
            .field("parallel_tool_calls", &self.parallel_tool_calls)
            .field("supports_tool_choice", &self.supports_tool_choice)
            .finish_non_exhaustive()
    }
}

impl OpenAiConfig {
    /// The public OpenAI endpoint.
    pub const OPENAI_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A server at `base_url` serving `model`, with no key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            api_key: None,
            model: model.into(),
            context_window: None,
            http: HttpSettings::default(),
            extra_headers: Vec::new(),
            parallel_tool_calls: None,
            supports_tool_choice: true,
            max_completion_tokens_field: None,
        }
    }

    /// Whether the completion limit is sent as `max_completion_tokens`.
    pub fn uses_max_completion_tokens(&self) -> bool {
        self.max_completion_tokens_field
            .unwrap_or_else(|| self.base_url.starts_with(Self::OPENAI_BASE_URL))
    }

    /// OpenAI itself.
    pub fn openai(api_key: impl Into<String>, model: impl Into<String>) -> Self {
        Self::new(Self::OPENAI_BASE_URL, model).with_api_key(api_key)
    }

    /// A local Ollama server.
    pub fn ollama(model: impl Into<String>) -> Self {
        Self::new("http://localhost:11434/v1", model)
    }

    /// Reads the environment:
    ///
    /// * `MEMGPT_BASE_URL` or `OPENAI_BASE_URL`: the server (default: OpenAI's);
    /// * `MEMGPT_API_KEY` or `OPENAI_API_KEY`: the key;
    /// * `MEMGPT_MODEL` or `OPENAI_MODEL`: the model (default `gpt-4o-mini`);
    /// * `MEMGPT_CONTEXT_WINDOW`: the context window in tokens.
    ///
    /// Fails with [`ConfigError::NotConfigured`] when neither a key nor a base URL is set.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`OpenAiConfig::from_env`] over any variable source (for tests and config files).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| get(n).filter(|v| !v.trim().is_empty()))
        };
        let base_url = var(&["MEMGPT_BASE_URL", "OPENAI_BASE_URL"]);
        let api_key = var(&["MEMGPT_API_KEY", "OPENAI_API_KEY"]);
        if base_url.is_none() && api_key.is_none() {
            return Err(ConfigError::NotConfigured);
        }
        let model =
            var(&["MEMGPT_MODEL", "OPENAI_MODEL"]).unwrap_or_else(|| "gpt-4o-mini".to_owned());
        let mut config = Self::new(
            base_url.unwrap_or_else(|| Self::OPENAI_BASE_URL.to_owned()),
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

    /// Sets the whole-request timeout.
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

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base_url, path)
    }
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
            OpenAiConfig::from_lookup(lookup(&[])),
            Err(ConfigError::NotConfigured)
        );
        assert_eq!(
            OpenAiConfig::from_lookup(lookup(&[("OPENAI_API_KEY", " ")])),
            Err(ConfigError::NotConfigured)
        );
        let c = OpenAiConfig::from_lookup(lookup(&[("OPENAI_API_KEY", "sk-x")])).unwrap();
        assert_eq!(c.base_url, OpenAiConfig::OPENAI_BASE_URL);
        assert_eq!(c.model, "gpt-4o-mini");
        let c = OpenAiConfig::from_lookup(lookup(&[
            ("MEMGPT_BASE_URL", "http://localhost:11434/v1/"),
            ("MEMGPT_MODEL", "llama3.1"),
            ("MEMGPT_CONTEXT_WINDOW", "32768"),
        ]))
        .unwrap();
        assert_eq!(c.base_url, "http://localhost:11434/v1");
        assert_eq!(
            c.url("chat/completions"),
            "http://localhost:11434/v1/chat/completions"
        );
        assert_eq!(
            (c.model.as_str(), c.context_window, c.api_key),
            ("llama3.1", Some(32768), None)
        );
        assert!(OpenAiConfig::from_lookup(lookup(&[("MEMGPT_BASE_URL", "localhost:1")])).is_err());
        assert!(
            OpenAiConfig::from_lookup(lookup(&[
                ("OPENAI_API_KEY", "k"),
                ("MEMGPT_CONTEXT_WINDOW", "big")
            ]))
            .is_err()
        );
    }

    #[test]
    fn the_completion_limit_field_follows_the_server() {
        assert!(OpenAiConfig::openai("k", "o3-mini").uses_max_completion_tokens());
        assert!(!OpenAiConfig::ollama("llama3.1").uses_max_completion_tokens());
        let mut vllm = OpenAiConfig::new("http://localhost:8000/v1", "m");
        vllm.max_completion_tokens_field = Some(true);
        assert!(vllm.uses_max_completion_tokens());
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = OpenAiConfig::openai("sk-secret", "gpt-4o");
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
