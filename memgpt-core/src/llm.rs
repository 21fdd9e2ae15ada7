//! The LLM seam: one chat-completion call with function schemas in, content + function calls +
//! token usage out.
//!
//! Providers (in `memgpt-providers`) implement [`LlmProvider`] for a wire protocol. Errors are
//! typed so the agent loop can react: a [`LlmError::ContextOverflow`] forces a queue flush and one
//! retry, a [`LlmError::Transient`] error was already retried by the provider, and a
//! [`LlmError::Permanent`] error ends the step.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One function call requested by the LLM (also stored in the assistant's
/// [`Message`](crate::message::Message), and re-exported as `message::ToolCall`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider-assigned id that the result must echo.
    pub id: String,
    /// The function name, exactly as the model wrote it (it may not exist).
    pub name: String,
    /// The raw JSON arguments, exactly as the model wrote them (they may not parse).
    pub arguments: String,
}

/// The role of a chat message on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// System instructions.
    System,
    /// The user (and, in MemGPT, system events packaged as JSON envelopes).
    User,
    /// The model.
    Assistant,
    /// A function result.
    Tool,
}

impl Role {
    /// The lowercase wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A provider-neutral chat message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// The text content (may be empty for an assistant message that only calls functions).
    pub content: String,
    /// Function calls (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call answered (tool messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The function name (tool messages) when the protocol wants it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    /// A message with `role` and `content` and nothing else.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
}

/// A function offered to the model: name, description and JSON-schema parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The function name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON schema (type `object`) of its arguments.
    pub parameters: serde_json::Value,
}

/// Whether the model must call a function.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must call some function (MemGPT's default: every turn is a function call).
    #[default]
    Required,
    /// The model must not call functions.
    None,
}

/// One chat-completion request.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The model name; empty means the provider's configured default.
    pub model: String,
    /// The prompt. Each message is shared (an agent's request shares them with its context,
    /// so building one copies nothing); change one with [`Arc::make_mut`].
    pub messages: Vec<Arc<ChatMessage>>,
    /// Functions offered (empty: plain completion, as for the summarizer).
    pub tools: Arc<[ToolSchema]>,
    /// Whether a function call is required (ignored when `tools` is empty).
    pub tool_choice: ToolChoice,
    /// Sampling temperature, when set.
    pub temperature: Option<f32>,
    /// Maximum completion tokens, when set.
    pub max_tokens: Option<u32>,
    /// How many bytes at the start of the first message (the system message) stay the same
    /// from one call to the next until memory is edited: the instructions, then the memory
    /// blocks. With the function schemas before them, that is the prompt's stable prefix:
    /// providers with explicit prompt caching (Anthropic's `cache_control`) put a cache
    /// breakpoint at its end; others cache it on their own when it is byte-identical, as it is.
    /// `None`: nothing is known to be stable.
    pub cache_prefix: Option<usize>,
}

impl ChatRequest {
    /// A request for `messages` (owned or shared) with no functions.
    pub fn new<M: Into<Arc<ChatMessage>>>(
        model: impl Into<String>,
        messages: impl IntoIterator<Item = M>,
    ) -> Self {
        Self {
            model: model.into(),
            messages: messages.into_iter().map(Into::into).collect(),
            tools: Arc::from(Vec::new()),
            tool_choice: ToolChoice::Auto,
            temperature: None,
            max_tokens: None,
            cache_prefix: None,
        }
    }
}

/// Token usage of one call, as reported by the provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt_tokens: u64,
    /// Completion (output) tokens.
    pub completion_tokens: u64,
    /// Of the prompt tokens, those the provider read from its prompt cache (OpenAI's
    /// `cached_tokens`, Anthropic's `cache_read_input_tokens`); 0 when none or not reported.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
}

impl Usage {
    /// Prompt plus completion tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.prompt_tokens += rhs.prompt_tokens;
        self.completion_tokens += rhs.completion_tokens;
        self.cached_prompt_tokens += rhs.cached_prompt_tokens;
    }
}

/// Why the model stopped generating.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It called functions.
    ToolCalls,
    /// It hit the completion token limit.
    Length,
    /// A content filter stopped it.
    ContentFilter,
    /// Something else, as reported.
    Other(String),
}

/// One chat-completion response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// Text content (inner monologue for MemGPT agents); empty when there is none.
    pub content: String,
    /// Function calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage.
    pub usage: Usage,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// The model that answered, as reported.
    pub model: String,
}

/// Why a chat call failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The prompt does not fit the model's context window.
    #[error("context length exceeded: {message}")]
    ContextOverflow {
        /// The provider's message.
        message: String,
    },
    /// A failure that may succeed later (rate limit, overload, timeout, 5xx). Providers retry
    /// these themselves; this is returned once retries are exhausted.
    #[error("transient provider error{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Transient {
        /// The HTTP status, if there was one.
        status: Option<u16>,
        /// What happened.
        message: String,
        /// How long the provider asked us to wait, if it said.
        retry_after: Option<Duration>,
    },
    /// A failure that will not go away by retrying (bad key, unknown model, invalid request).
    #[error("provider error{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Permanent {
        /// The HTTP status, if there was one.
        status: Option<u16>,
        /// What happened.
        message: String,
    },
    /// The provider answered with something that is not a valid response.
    #[error("invalid provider response: {message}")]
    InvalidResponse {
        /// What was wrong with it.
        message: String,
    },
}

impl LlmError {
    /// Whether retrying the same request may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, LlmError::Transient { .. })
    }

    /// Whether the prompt was too long.
    pub fn is_context_overflow(&self) -> bool {
        matches!(self, LlmError::ContextOverflow { .. })
    }
}

/// What kind of provider failure ended a step, without the provider's own words: what a
/// service can tell its users about it (the provider's message, which may name its address
/// or echo the request, is for the operator's log).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderFailure {
    /// The prompt did not fit the model's context window, even after a flush.
    ContextOverflow,
    /// The provider limits the rate of requests (HTTP 429).
    RateLimited,
    /// The provider could not be reached, did not answer in time, or failed (HTTP 5xx), after
    /// retries.
    Unavailable {
        /// Its HTTP status, if it answered.
        status: Option<u16>,
    },
    /// The provider refused the server's credentials (HTTP 401 or 403).
    Unauthorized {
        /// Its HTTP status.
        status: u16,
    },
    /// The provider refused the request (another 4xx: an unknown model, an invalid request).
    Refused {
        /// Its HTTP status, if there was one.
        status: Option<u16>,
    },
    /// The provider's answer was not a valid response.
    #[default]
    InvalidResponse,
}

impl ProviderFailure {
    /// The failure `error` is.
    pub fn of(error: &LlmError) -> Self {
        match error {
            LlmError::ContextOverflow { .. } => ProviderFailure::ContextOverflow,
            LlmError::Transient {
                status: Some(429), ..
            } => ProviderFailure::RateLimited,
            LlmError::Transient { status, .. } => ProviderFailure::Unavailable { status: *status },
            LlmError::Permanent {
                status: Some(status @ (401 | 403)),
                ..
            } => ProviderFailure::Unauthorized { status: *status },
            LlmError::Permanent { status, .. } => ProviderFailure::Refused { status: *status },
            LlmError::InvalidResponse { .. } => ProviderFailure::InvalidResponse,
        }
    }
}

impl std::fmt::Display for ProviderFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderFailure::ContextOverflow => {
                write!(f, "the prompt did not fit the model's context window")
            }
            ProviderFailure::RateLimited => write!(
                f,
                "the model provider is limiting the rate of requests (HTTP 429); try again later"
            ),
            ProviderFailure::Unavailable { status: Some(s) } => write!(
                f,
                "the model provider failed (HTTP {s}) after retries; try again later"
            ),
            ProviderFailure::Unavailable { status: None } => write!(
                f,
                "the model provider could not be reached or did not answer in time, after \
                 retries; try again later"
            ),
            ProviderFailure::Unauthorized { status } => write!(
                f,
                "the model provider refused the credentials it was given (HTTP {status}); the \
                 operator must fix the configuration"
            ),
            ProviderFailure::Refused { status: Some(s) } => {
                write!(f, "the model provider refused the request (HTTP {s})")
            }
            ProviderFailure::Refused { status: None } => {
                write!(f, "the model provider refused the request")
            }
            ProviderFailure::InvalidResponse => {
                write!(f, "the model provider's answer could not be read")
            }
        }
    }
}

/// A chat-completion backend.
///
/// Implementations retry transient failures themselves (with backoff), and map "context length
/// exceeded" responses to [`LlmError::ContextOverflow`] so the agent can flush and retry.
#[async_trait]
pub trait LlmProvider: Send + Sync + fmt::Debug {
    /// The model used when a request leaves [`ChatRequest::model`] empty.
    fn model(&self) -> &str;

    /// Who serves the model, as OpenTelemetry's `gen_ai.provider.name` names it (`openai`,
    /// `anthropic`, ...): the attribute of the step's model-call spans. The default:
    /// `unknown`.
    fn provider_name(&self) -> &str {
        "unknown"
    }

    /// The model's context window in tokens, when the provider knows it.
    fn context_window(&self) -> Option<usize> {
        None
    }

    /// Runs one chat completion.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// This provider's streaming, if it streams (see [`StreamingProvider`]). The default: it
    /// does not. [`complete_streaming`] works with every provider either way.
    fn as_streaming(&self) -> Option<&dyn StreamingProvider> {
        None
    }

    /// This provider's attention reporting, if it can tell (see [`AttentionProvider`]). The
    /// default: it cannot.
    fn as_attention(&self) -> Option<&dyn AttentionProvider> {
        None
    }
}

/// Optional capability of an [`LlmProvider`]: responses streamed as they are generated.
/// A provider that implements it returns `Some(self)` from [`LlmProvider::as_streaming`].
#[async_trait]
pub trait StreamingProvider: LlmProvider {
    /// Runs one chat completion, reporting text and function-call pieces to `sink` as they are
    /// generated, and returns the same complete response as [`LlmProvider::complete`].
    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &StreamSink<'_>,
    ) -> Result<ChatResponse, LlmError>;
}

/// Optional capability of an [`LlmProvider`]: the attention the model paid to each message of
/// a request (a local model can tell; hosted APIs cannot). A provider that implements it
/// returns `Some(self)` from [`LlmProvider::as_attention`]. Attention-weighted eviction
/// ([`AttentionPolicy`](crate::queue::AttentionPolicy)) accumulates these weights.
#[async_trait]
pub trait AttentionProvider: LlmProvider {
    /// Completes `request` and reports one non-negative weight per request message, in order
    /// (`None` when the model could not tell this time).
    async fn complete_with_attention(
        &self,
        request: &ChatRequest,
    ) -> Result<(ChatResponse, Option<Vec<f32>>), LlmError>;
}

/// Runs a chat completion on any provider, reporting its pieces to `sink`: streamed as they
/// are generated when the provider streams ([`LlmProvider::as_streaming`]), otherwise the whole
/// response at once, one piece per part, when it is complete.
pub async fn complete_streaming(
    provider: &dyn LlmProvider,
    request: &ChatRequest,
    sink: &StreamSink<'_>,
) -> Result<ChatResponse, LlmError> {
    match provider.as_streaming() {
        Some(streaming) => streaming.complete_streaming(request, sink).await,
        None => {
            let response = provider.complete(request).await?;
            replay(&response, sink);
            Ok(response)
        }
    }
}

/// Runs a chat completion through the richest capability the provider has and the caller
/// wants: with attention weights when `attention` is asked for and the provider reports them
/// ([`LlmProvider::as_attention`]), streamed to `sink` when there is one
/// ([`complete_streaming`]), otherwise plainly. The weights come back when there are some.
pub(crate) async fn complete_dispatched(
    provider: &dyn LlmProvider,
    request: &ChatRequest,
    attention: bool,
    sink: Option<&StreamSink<'_>>,
) -> Result<(ChatResponse, Option<Vec<f32>>), LlmError> {
    if attention && let Some(attention) = provider.as_attention() {
        return attention.complete_with_attention(request).await;
    }
    let response = match sink {
        Some(sink) => complete_streaming(provider, request, sink).await?,
        None => provider.complete(request).await?,
    };
    Ok((response, None))
}

/// Where a streaming provider reports the pieces of a response as they arrive.
pub type StreamSink<'a> = dyn Fn(StreamDelta<'_>) + Send + Sync + 'a;

/// A piece of a response being generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamDelta<'a> {
    /// More text content (inner monologue for MemGPT agents).
    Text(&'a str),
    /// A function call started: its position in the response, id and name.
    ToolCallStart {
        /// The call's position among the response's calls.
        index: usize,
        /// The provider-assigned call id.
        id: &'a str,
        /// The function name.
        name: &'a str,
    },
    /// More of a function call's JSON arguments.
    ToolArguments {
        /// The call's position among the response's calls.
        index: usize,
        /// The next piece of the arguments text.
        json: &'a str,
    },
}

/// Reports a complete response to `sink` as if it had been streamed in one piece per part.
pub fn replay(response: &ChatResponse, sink: &StreamSink<'_>) {
    if !response.content.is_empty() {
        sink(StreamDelta::Text(&response.content));
    }
    for (index, call) in response.tool_calls.iter().enumerate() {
        sink(StreamDelta::ToolCallStart {
            index,
            id: &call.id,
            name: &call.name,
        });
        sink(StreamDelta::ToolArguments {
            index,
            json: &call.arguments,
        });
    }
}

#[async_trait]
impl<P: LlmProvider + ?Sized> LlmProvider for Arc<P> {
    fn model(&self) -> &str {
        (**self).model()
    }

    fn context_window(&self) -> Option<usize> {
        (**self).context_window()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).complete(request).await
    }

    fn as_streaming(&self) -> Option<&dyn StreamingProvider> {
        (**self).as_streaming()
    }

    fn as_attention(&self) -> Option<&dyn AttentionProvider> {
        (**self).as_attention()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn providers_that_do_not_stream_are_replayed_whole() {
        let provider = crate::testing::ScriptedProvider::new();
        // A request without functions is answered from the scripted summaries.
        provider.push_summary(Ok("Hello there.".to_owned()));
        assert!(provider.as_streaming().is_none());
        let pieces = std::sync::Mutex::new(Vec::new());
        let request = ChatRequest::new("", vec![ChatMessage::user("Hi")]);
        let response = complete_streaming(&provider, &request, &|delta| {
            if let StreamDelta::Text(text) = delta {
                pieces.lock().unwrap().push(text.to_owned());
            }
        })
        .await
        .unwrap();
        assert_eq!(response.content, "Hello there.");
        assert_eq!(pieces.into_inner().unwrap(), vec!["Hello there."]);
    }

    #[test]
    fn errors_say_what_kind_they_are() {
        let e = LlmError::Transient {
            status: Some(429),
            message: "slow down".into(),
            retry_after: None,
        };
        assert!(e.is_transient());
        assert_eq!(
            e.to_string(),
            "transient provider error (HTTP 429): slow down"
        );
        assert!(
            LlmError::ContextOverflow {
                message: "too long".into()
            }
            .is_context_overflow()
        );
    }
}
