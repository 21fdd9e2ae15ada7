//! An OpenAI-compatible facade: `POST /v1/chat/completions` with `model` naming an agent (its
//! id or its name), so any OpenAI client library can talk to a memgpt agent, streaming
//! included, and `GET /v1/models` listing the caller's agents.
//!
//! The agent keeps its own memory: of the request's messages only the newest user message is
//! taken (the client's copy of the history is ignored), and the answer is what the agent said
//! with `send_message` during the step.

use std::convert::Infallible;
use std::sync::Arc;

use aide::axum::ApiRouter;
use aide::axum::routing::{get, post_with};
use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use memgpt_core::agent::{Event, StepProgress};
use memgpt_core::message::Message;
use memgpt_core::{Agent, StepRecord};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::messages::StepStream;
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult};
use crate::hub::LiveAgent;
use crate::idempotency::{Answer, Claim, Outcome, RequestKey, RetryHeaders, Ticket};
use crate::state::AppState;

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/v1/chat/completions",
            post_with(completions, |op| {
                op.response_with::<200, Json<Completion>, _>(|mut r| {
                    r.inner().content.insert(
                        "text/event-stream".to_owned(),
                        aide::openapi::MediaType {
                            schema: Some(aide::openapi::SchemaObject {
                                json_schema: super::messages::sse_schema(&[]),
                                external_docs: None,
                                example: None,
                            }),
                            ..Default::default()
                        },
                    );
                    r.description(
                        "The completion, or with `stream: true` Server-Sent Events of \
                         `chat.completion.chunk`s (an `error` object if the model fails) \
                         ending with `[DONE]`",
                    )
                })
            }),
        )
        .api_route("/v1/models", get(models))
        .api_route("/v1/models/{model}", get(model))
}

/// A chat completion request as OpenAI clients send it (fields memgpt does not use, such as
/// `temperature`, are accepted and ignored).
#[derive(Debug, Deserialize, JsonSchema)]
struct CompletionRequest {
    /// The agent: its id, or its name among the caller's agents.
    model: String,
    /// The conversation as the client has it; only the newest `user` message with text is
    /// used (so there must be one).
    #[schemars(extend("contains" = {
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {"const": "user"},
            "content": {"type": "string", "pattern": crate::routes::document::NOT_BLANK}
        }
    }))]
    messages: Vec<ChatMessage>,
    /// Stream the answer as `chat.completion.chunk` events.
    #[serde(default)]
    stream: bool,
    /// The user's name, passed on with the message.
    user: Option<String>,
    /// Streaming options: `include_usage` adds a last chunk with the step's token usage.
    stream_options: Option<StreamOptions>,
}

/// `stream_options` of a streamed completion.
#[derive(Debug, Default, Deserialize, JsonSchema)]
struct StreamOptions {
    /// Send a last chunk, with no choices, holding the step's token usage.
    #[serde(default)]
    include_usage: bool,
}

/// A message of the request.
#[derive(Debug, Deserialize, JsonSchema)]
struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    role: String,
    /// A string, or a list of content parts (`{"type": "text", "text": ...}`).
    #[serde(default)]
    content: Value,
    /// The speaker's name.
    name: Option<String>,
}

impl ChatMessage {
    /// The message's text (text parts joined).
    fn text(&self) -> String {
        match &self.content {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
}

/// A completed chat completion.
#[derive(Debug, Serialize, JsonSchema)]
struct Completion {
    /// `chatcmpl-...`.
    id: String,
    /// `chat.completion`.
    object: &'static str,
    /// Unix seconds.
    created: i64,
    /// The agent as named in the request.
    model: String,
    /// One choice: what the agent said.
    choices: Vec<Choice>,
    /// Tokens of the step's LLM calls.
    usage: CompletionUsage,
}

/// The answer.
#[derive(Debug, Serialize, JsonSchema)]
struct Choice {
    /// 0.
    index: u32,
    /// `{"role": "assistant", "content": ...}`.
    message: Value,
    /// `stop`, or `length` when the step hit its chain limit.
    finish_reason: String,
}

/// Token usage.
#[derive(Debug, Serialize, JsonSchema)]
struct CompletionUsage {
    /// Prompt tokens.
    prompt_tokens: u64,
    /// Completion tokens.
    completion_tokens: u64,
    /// Both.
    total_tokens: u64,
}

impl CompletionUsage {
    /// The tokens of a step's LLM calls.
    fn of(record: &StepRecord) -> Self {
        Self {
            prompt_tokens: record.usage.prompt_tokens,
            completion_tokens: record.usage.completion_tokens,
            total_tokens: record.usage.total(),
        }
    }
}

/// What to step with: the newest user message with text.
fn event(request: &CompletionRequest) -> ApiResult<Event> {
    let (message, text) = request
        .messages
        .iter()
        .rev()
        .filter(|m| m.role == "user")
        .map(|m| (m, m.text()))
        .find(|(_, text)| !text.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("the request has no `user` message with text"))?;
    Ok(match message.name.as_ref().or(request.user.as_ref()) {
        Some(name) => Event::user_named(name.clone(), text),
        None => Event::user(text),
    })
}

fn finish_reason(record: &StepRecord) -> &'static str {
    match record.stop_reason {
        memgpt_core::StopReason::ChainLimit { .. } => "length",
        _ => "stop",
    }
}

/// A chat completion from a memgpt agent: one step.
///
/// Retries are one request (see [`idempotency`](crate::idempotency)): the official SDKs' own
/// retries, and requests with the same `Idempotency-Key`, get the first attempt's completion,
/// or resume its step if the model failed; the user's message is stored once.
async fn completions(
    State(state): State<AppState>,
    caller: Caller,
    RetryHeaders(headers): RetryHeaders,
    Body(request): Body<CompletionRequest>,
) -> ApiResult<Answer<Response>> {
    let event = event(&request)?;
    let id = caller.agent_named(&state, &request.model).await?;
    let key = RequestKey::of(&headers, "chat/completions", id, &(&event, request.stream))?;
    let usage = request.stream_options.is_some_and(|o| o.include_usage);
    let (ticket, event) = match state.idempotency.claim(caller.tenant, key).await? {
        Claim::Replay(outcome) => {
            let chunks = Chunks {
                id: outcome.id.clone(),
                created: outcome.created,
                model: request.model,
                usage,
            };
            let body = if request.stream {
                replayed_stream(&chunks, &outcome.record).into_response()
            } else {
                Json(completion(&chunks, &outcome.record)).into_response()
            };
            return Ok(Answer {
                body,
                replayed: true,
            });
        }
        Claim::Run(ticket) => (ticket, event),
        Claim::Resume(ticket) => (ticket, Event::resume()),
    };
    let agent = state.hub.lock(id).await?;
    let chunks = Chunks {
        id: format!("chatcmpl-{}", uuid::Uuid::now_v7().simple()),
        created: chrono::Utc::now().timestamp(),
        model: request.model,
        usage,
    };
    if request.stream {
        return Ok(Answer {
            body: stream_completion(state, agent, event, chunks, ticket).into_response(),
            replayed: false,
        });
    }
    let mut agent = agent;
    let finished = chunks.clone();
    let step = tokio::spawn(async move {
        let record = Arc::new(
            state
                .step(&mut agent, event)
                .await
                .map_err(ApiError::from)?,
        );
        ticket.finish(finished.outcome(record.clone(), agent.version()));
        Ok::<_, ApiError>(record)
    });
    let record = match step.await {
        Ok(result) => result?,
        Err(e) => return Err(ApiError::internal("the step", e)),
    };
    if let Some(failure) = crate::error::llm_failure(&record) {
        return Err(failure);
    }
    Ok(Answer {
        body: Json(completion(&chunks, &record)).into_response(),
        replayed: false,
    })
}

/// The completion of a step.
fn completion(chunks: &Chunks, record: &StepRecord) -> Completion {
    Completion {
        id: chunks.id.clone(),
        object: "chat.completion",
        created: chunks.created,
        model: chunks.model.clone(),
        choices: vec![Choice {
            index: 0,
            message: json!({"role": "assistant", "content": record.reply()}),
            finish_reason: finish_reason(record).to_owned(),
        }],
        usage: CompletionUsage::of(record),
    }
}

/// An earlier attempt's streamed completion, again: the role, the reply, the finish reason
/// (and the usage, when asked), then `[DONE]`.
fn replayed_stream(chunks: &Chunks, record: &StepRecord) -> StepStream {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let send = |chunk: Value| {
        let _ = tx.send(chunk.to_string());
    };
    send(chunks.choice(json!({"role": "assistant", "content": ""}), None));
    let reply = record.reply();
    if !reply.is_empty() {
        send(chunks.choice(json!({"content": reply}), None));
    }
    send(chunks.choice(json!({}), Some(finish_reason(record))));
    if chunks.usage {
        send(chunks.usage(record));
    }
    let _ = tx.send("[DONE]".to_owned());
    StepStream::new(Sse::new(data_events(rx)).into_response())
}

/// What `send_message` said in `message`, if it is an assistant turn that called it.
fn said(message: &Message) -> Vec<String> {
    message
        .tool_calls
        .iter()
        .filter(|c| c.name == "send_message")
        .filter_map(|c| {
            let arguments: Value = serde_json::from_str(&c.arguments).ok()?;
            arguments.get("message")?.as_str().map(str::to_owned)
        })
        .collect()
}

/// What every chunk of one streamed completion shares.
#[derive(Clone)]
struct Chunks {
    id: String,
    created: i64,
    model: String,
    /// `stream_options.include_usage`: chunks carry `"usage": null`, and a last one the usage.
    usage: bool,
}

impl Chunks {
    /// A committed step of this completion, as its retries are answered.
    fn outcome(&self, record: Arc<StepRecord>, version: u64) -> Outcome {
        Outcome {
            record,
            version,
            id: self.id.clone(),
            created: self.created,
        }
    }

    /// A `chat.completion.chunk` of `choices`.
    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// A chunk with one choice.
    fn choice(&self, delta: Value, finish: Option<&str>) -> Value {
        let mut chunk = self.chunk(json!([{"index": 0, "delta": delta, "finish_reason": finish}]));
        if self.usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    /// The last chunk of `stream_options.include_usage`: no choices, the usage.
    fn usage(&self, record: &StepRecord) -> Value {
        let mut chunk = self.chunk(json!([]));
        chunk["usage"] = json!(CompletionUsage::of(record));
        chunk
    }
}

/// An error in a stream, in OpenAI's shape (their SDKs raise it): `{"error": {"message",
/// "type", "code"}}`.
fn error_chunk(error: &ApiError) -> Value {
    json!({"error": {
        "message": error.message,
        "type": if error.code.status().is_server_error() { "server_error" } else { "invalid_request_error" },
        "param": null,
        "code": error.code,
    }})
}

/// The step streamed as OpenAI `chat.completion.chunk`s: the role first, each reply of the
/// agent as content when it is said, the finish reason (and the usage, when asked), then
/// `[DONE]`. A failed step (the model could not be reached) ends with an error event instead
/// of a finish reason, so the client sees it.
fn stream_completion(
    state: AppState,
    mut agent: LiveAgent,
    event: Event,
    chunks: Chunks,
    ticket: Ticket,
) -> StepStream {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let _ = tx.send(
        chunks
            .choice(json!({"role": "assistant", "content": ""}), None)
            .to_string(),
    );
    let replies = Arc::new(std::sync::Mutex::new(0usize));
    let observer = {
        let (tx, chunks, replies) = (tx.clone(), chunks.clone(), replies.clone());
        move |progress: StepProgress<'_>| {
            if let StepProgress::Message(m) = progress {
                for text in said(m) {
                    let mut count = replies.lock().unwrap_or_else(|p| p.into_inner());
                    let content = if *count == 0 {
                        text
                    } else {
                        format!("\n{text}")
                    };
                    *count += 1;
                    let _ = tx.send(chunks.choice(json!({"content": content}), None).to_string());
                }
            }
        }
    };
    agent.set_observer(Some(Arc::new(observer)));
    tokio::spawn(async move {
        let outcome = state.step(&mut agent, event).await;
        let agent: &mut Agent = &mut agent;
        agent.set_observer(None);
        let mut last = Vec::new();
        match outcome {
            Ok(record) => {
                let record = Arc::new(record);
                ticket.finish(chunks.outcome(record.clone(), agent.version()));
                match crate::error::llm_failure(&record) {
                    Some(failure) => last.push(error_chunk(&failure)),
                    None => {
                        last.push(chunks.choice(json!({}), Some(finish_reason(&record))));
                        if chunks.usage {
                            last.push(chunks.usage(&record));
                        }
                    }
                }
            }
            Err(e) => last.push(error_chunk(&ApiError::from(e))),
        }
        for chunk in last {
            let _ = tx.send(chunk.to_string());
        }
        let _ = tx.send("[DONE]".to_owned());
    });
    StepStream::new(Sse::new(data_events(rx)).into_response())
}

fn data_events(
    rx: mpsc::UnboundedReceiver<String>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    stream::unfold(rx, |mut rx| async move {
        let data = rx.recv().await?;
        Some((Ok(SseEvent::default().data(data)), rx))
    })
}

/// The caller's agents as OpenAI models.
#[derive(Debug, Serialize, JsonSchema)]
struct Models {
    /// `list`.
    object: &'static str,
    /// One model per agent.
    data: Vec<ModelView>,
}

/// An agent as an OpenAI model.
#[derive(Debug, Serialize, JsonSchema)]
struct ModelView {
    /// The agent's name (what `model` takes).
    id: String,
    /// `model`.
    object: &'static str,
    /// When the agent was created (Unix seconds).
    created: i64,
    /// `memgpt`.
    owned_by: &'static str,
    /// The agent's id (also accepted as `model`).
    agent_id: String,
}

impl From<&memgpt_core::store::AgentState> for ModelView {
    fn from(agent: &memgpt_core::store::AgentState) -> Self {
        Self {
            id: agent.name.clone(),
            object: "model",
            created: agent.created_at.timestamp(),
            owned_by: "memgpt",
            agent_id: agent.id.to_string(),
        }
    }
}

/// Lists the caller's agents as models (by name), for clients that ask first.
async fn models(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<Models>> {
    let mut data = Vec::new();
    for id in state.tenants.agents_of(caller.tenant).await? {
        if let Some(agent) = state.hub.storage().agents.load_agent(id).await? {
            data.push(ModelView::from(&agent));
        }
    }
    Ok(Json(Models {
        object: "list",
        data,
    }))
}

/// `/v1/models/{model}`.
#[derive(Debug, Deserialize, JsonSchema)]
struct ModelPath {
    /// The agent's name or id.
    model: String,
}

/// One of the caller's agents as a model, by name or id.
async fn model(
    State(state): State<AppState>,
    caller: Caller,
    axum::extract::Path(path): axum::extract::Path<ModelPath>,
) -> ApiResult<Json<ModelView>> {
    let id = caller.agent_named(&state, &path.model).await?;
    let agent = state
        .hub
        .storage()
        .agents
        .load_agent(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format_args!("model (agent) `{}`", path.model)))?;
    Ok(Json(ModelView::from(&agent)))
}
