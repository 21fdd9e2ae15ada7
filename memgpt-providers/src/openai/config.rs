//! [`OpenAiConfig`]: the endpoint, key, model and tool-calling mode of an OpenAI-compatible
//! server.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::ConfigError;
use crate::http::{HttpSettings, RetryPolicy};

const NOT_CONFIGURED: ConfigError = ConfigError::NotConfigured {
    provider: "OpenAI (or a compatible server)",
    help: "set OPENAI_API_KEY (for api.openai.com), or MEMGPT_BASE_URL for another server (e.g. http://localhost:11434/v1 for Ollama), and MEMGPT_MODEL",
};

/// How function calls travel between the agent and the server.
///
/// MemGPT needs one well-formed function call per turn. OpenAI's native tool calling delivers
/// that; many local servers and models do not (broken JSON, calls written as text, a forgotten
/// `request_heartbeat`). The other modes get the call as the reply's text instead, using
/// [`structured`](crate::structured):
///
/// | mode | request | reply |
/// |---|---|---|
/// | [`Native`](ToolCalling::Native) | `tools` + `tool_choice` | `tool_calls` |
/// | [`JsonSchema`](ToolCalling::JsonSchema) | `response_format: json_schema` with the [union schema](crate::structured::union_schema) | one JSON object, valid by construction |
/// | [`GuidedJson`](ToolCalling::GuidedJson) | vLLM's `guided_json` with the union schema | the same |
/// | [`Grammar`](ToolCalling::Grammar) | llama.cpp's `grammar` with the [GBNF grammar](crate::structured::tool_call_grammar) | the same |
/// | [`Text`](ToolCalling::Text) | nothing but a system-prompt addendum | free text, read by [`parse_lenient`](crate::structured::parse_lenient) |
///
/// In every mode but `Native`, the system prompt gets the [addendum](crate::structured::protocol_prompt)
/// describing the functions and the reply shape (the server sees no `tools`), the model's
/// earlier calls are shown as that JSON in assistant messages, and function results become user
/// messages starting `[function result for NAME]` (consecutive user messages are merged, for
/// chat templates that insist on alternating roles), so servers without tool support accept
/// the history.
///
/// A reply that still cannot be read as a call (possible in `Text` mode, or when a server
/// ignores the schema or cuts the reply off) becomes a call to
/// [`INVALID_REPLY_FUNCTION`](crate::structured::INVALID_REPLY_FUNCTION) carrying
/// [feedback](crate::structured::feedback) for the model. The agent treats it as a failed
/// call: it records it and runs the model again with a heartbeat, and the model reads the
/// feedback (`[function call error] Your reply was not a valid function call: ...`) in place of
/// the function result. An [`LlmError::InvalidResponse`](memgpt_core::llm::LlmError) would end
/// the step instead, and a reply without calls would end the turn silently: both stall the
/// agent on a model that just needs to be told what went wrong.
///
/// The non-native modes always ask for a call when functions are offered
/// ([`ToolChoice::Auto`](memgpt_core::llm::ToolChoice) is treated as `Required`, as MemGPT
/// agents call a function every turn); requests without functions or with
/// [`ToolChoice::None`](memgpt_core::llm::ToolChoice) (the summarizer's) are plain completions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolCalling {
    /// OpenAI's `tools` and `tool_choice`, and `tool_calls` in the reply.
    #[default]
    Native,
    /// `response_format: {"type": "json_schema", ...}` with the union schema of the functions:
    /// OpenAI-style structured output, which llama.cpp's server, vLLM, Ollama (0.5+) and LM
    /// Studio enforce by constrained decoding.
    JsonSchema,
    /// vLLM's `guided_json` request field with the union schema (older vLLM versions).
    GuidedJson,
    /// llama.cpp's `grammar` request field with the GBNF grammar of the calls (llama.cpp servers
    /// older than `json_schema` support, or to control whitespace).
    Grammar,
    /// No constraint: the system prompt describes the JSON reply and a tolerant parser reads it.
    Text,
}

impl ToolCalling {
    /// The name `MEMGPT_TOOL_CALLING` takes: `native`, `json_schema`, `guided_json`, `grammar`
    /// or `text`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCalling::Native => "native",
            ToolCalling::JsonSchema => "json_schema",
            ToolCalling::GuidedJson => "guided_json",
            ToolCalling::Grammar => "grammar",
            ToolCalling::Text => "text",
        }
    }
}

impl fmt::Display for ToolCalling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolCalling {
    type Err = ConfigError;

    /// Parses [`ToolCalling::as_str`] (case-insensitive, `-` for `_` accepted).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "native" | "tools" => Ok(ToolCalling::Native),
            "json_schema" | "jsonschema" => Ok(ToolCalling::JsonSchema),
            "guided_json" => Ok(ToolCalling::GuidedJson),
            "grammar" | "gbnf" => Ok(ToolCalling::Grammar),
            "text" | "prompt" => Ok(ToolCalling::Text),
            _ => Err(ConfigError::Invalid(format!(
                "MEMGPT_TOOL_CALLING must be native, json_schema, guided_json, grammar or text, got `{s}`"
            ))),
        }
    }
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
    /// How function calls are requested and read (see [`ToolCalling`]).
    pub tool_calling: ToolCalling,
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
            .field("tool_calling", &self.tool_calling)
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
            tool_calling: ToolCalling::Native,
        }
    }

    /// Whether the completion limit is sent as `max_completion_tokens`.
    pub fn uses_max_completion_tokens(&self) -> bool {
        self.max_completion_tokens_field
            .unwrap_or_else(|| self.base_url.starts_with(Self::OPENAI_BASE_URL))
    }

    /// OpenAI itself, with native tool calling.
    pub fn openai(api_key: impl Into<String>, model: impl Into<String>) -> Self {
        Self::new(Self::OPENAI_BASE_URL, model).with_api_key(api_key)
    }

    /// A local Ollama server (`http://localhost:11434/v1`), with
    /// [`ToolCalling::JsonSchema`].
    ///
    /// Ollama's native tools work only for models whose template declares them, ignore
    /// `tool_choice`, and turn a malformed call into plain text (which ends the agent's turn);
    /// a JSON schema (Ollama 0.5+) is enforced by llama.cpp's constrained decoder for every
    /// model. Set [`OpenAiConfig::tool_calling`] to [`ToolCalling::Native`] for older Ollama.
    pub fn ollama(model: impl Into<String>) -> Self {
        Self::new("http://localhost:11434/v1", model).with_tool_calling(ToolCalling::JsonSchema)
    }

    /// A local llama.cpp server (`llama-server`, `http://localhost:8080/v1`), with
    /// [`ToolCalling::JsonSchema`] (which it turns into a grammar). Native tools need
    /// `--jinja` and a model whose template supports them; [`ToolCalling::Grammar`] suits
    /// servers too old for `json_schema`.
    pub fn llama_cpp_server(model: impl Into<String>) -> Self {
        Self::new("http://localhost:8080/v1", model).with_tool_calling(ToolCalling::JsonSchema)
    }

    /// A local vLLM server (`http://localhost:8000/v1`), with [`ToolCalling::JsonSchema`]
    /// (guided decoding; native tools need a tool parser chosen at server start). Use
    /// [`ToolCalling::GuidedJson`] for versions that predate `response_format`.
    pub fn vllm(model: impl Into<String>) -> Self {
        Self::new("http://localhost:8000/v1", model).with_tool_calling(ToolCalling::JsonSchema)
    }

    /// A local LM Studio server (`http://localhost:1234/v1`), with
    /// [`ToolCalling::JsonSchema`] (enforced for every model; native tools depend on the
    /// model).
    pub fn lm_studio(model: impl Into<String>) -> Self {
        Self::new("http://localhost:1234/v1", model).with_tool_calling(ToolCalling::JsonSchema)
    }

    /// Reads the environment:
    ///
    /// * `MEMGPT_BASE_URL` or `OPENAI_BASE_URL`: the server (default: OpenAI's);
    /// * `MEMGPT_API_KEY` or `OPENAI_API_KEY`: the key;
    /// * `MEMGPT_MODEL` or `OPENAI_MODEL`: the model (default `gpt-4o-mini`);
    /// * `MEMGPT_CONTEXT_WINDOW`: the context window in tokens;
    /// * `MEMGPT_TOOL_CALLING`: `native` (default), `json_schema`, `guided_json`, `grammar` or
    ///   `text` (see [`ToolCalling`]).
    ///
    /// Fails with [`ConfigError::NotConfigured`](crate::ConfigError::NotConfigured) when neither a key nor a base URL is set.
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
            return Err(NOT_CONFIGURED);
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
        if let Some(mode) = var(&["MEMGPT_TOOL_CALLING"]) {
            config.tool_calling = mode.parse()?;
        }
        Ok(config)
    }

    /// Sets how function calls are requested and read.
    pub fn with_tool_calling(mut self, mode: ToolCalling) -> Self {
        self.tool_calling = mode;
        self
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
        assert_eq!(OpenAiConfig::from_lookup(lookup(&[])), Err(NOT_CONFIGURED));
        assert_eq!(
            OpenAiConfig::from_lookup(lookup(&[("OPENAI_API_KEY", " ")])),
            Err(NOT_CONFIGURED)
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
    fn tool_calling_comes_from_the_server_kind_or_the_environment() {
        assert_eq!(
            OpenAiConfig::openai("k", "m").tool_calling,
            ToolCalling::Native
        );
        for local in [
            OpenAiConfig::ollama("m"),
            OpenAiConfig::llama_cpp_server("m"),
            OpenAiConfig::vllm("m"),
            OpenAiConfig::lm_studio("m"),
        ] {
            assert_eq!(
                local.tool_calling,
                ToolCalling::JsonSchema,
                "{}",
                local.base_url
            );
        }
        assert_eq!(
            OpenAiConfig::lm_studio("m").base_url,
            "http://localhost:1234/v1"
        );
        let base = [("MEMGPT_BASE_URL", "http://localhost:8080/v1")];
        let c = OpenAiConfig::from_lookup(lookup(&base)).unwrap();
        assert_eq!(c.tool_calling, ToolCalling::Native);
        for (text, mode) in [
            ("native", ToolCalling::Native),
            ("json_schema", ToolCalling::JsonSchema),
            ("JSON-SCHEMA", ToolCalling::JsonSchema),
            ("guided_json", ToolCalling::GuidedJson),
            ("grammar", ToolCalling::Grammar),
            (" text ", ToolCalling::Text),
        ] {
            let c = OpenAiConfig::from_lookup(lookup(&[base[0], ("MEMGPT_TOOL_CALLING", text)]))
                .unwrap();
            assert_eq!(c.tool_calling, mode, "{text}");
            assert_eq!(mode.as_str().parse::<ToolCalling>(), Ok(mode));
        }
        let err = OpenAiConfig::from_lookup(lookup(&[base[0], ("MEMGPT_TOOL_CALLING", "xml")]))
            .unwrap_err();
        assert!(
            err.to_string().contains("MEMGPT_TOOL_CALLING must be"),
            "{err}"
        );
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = OpenAiConfig::openai("sk-secret", "gpt-4o");
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
