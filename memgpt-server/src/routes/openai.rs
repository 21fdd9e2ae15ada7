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
use aide::axum::routing::{get, post};
use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use memgpt_core::agent::{Event, StepProgress};
use memgpt_core::ids::AgentId;
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
use crate::state::AppState;

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/chat/completions", post(completions))
        .api_route("/v1/models", get(models))
}

/// A chat completion request as OpenAI clients send it (fields memgpt does not use, such as
/// `temperature`, are accepted and ignored).
#[derive(Debug, Deserialize, JsonSchema)]
struct CompletionRequest {
    /// The agent: its id, or its name among the caller's agents.
    model: String,
    /// The conversation as the client has it; only the newest `user` message is used.
    messages: Vec<ChatMessage>,
    /// Stream the answer as `chat.completion.chunk` events.
    #[serde(default)]
    stream: bool,
    /// The user's name, passed on with the message.
    user: Option<String>,
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

/// The caller's agent that `model` names: an id, or a name.
async fn named_agent(state: &AppState, caller: Caller, model: &str) -> ApiResult<AgentId> {
    if let Ok(id) = model.parse::<AgentId>() {
        caller.owns(state, id).await?;
        return Ok(id);
    }
    for id in state.tenants.agents_of(caller.tenant).await? {
        if let Some(agent) = state.hub.storage().agents.load_agent(id).await?
            && agent.name == model
        {
            return Ok(id);
        }
    }
    Err(ApiError::not_found(format_args!("model (agent) `{model}`")))
}

/// What to step with: the newest user message.
fn event(request: &CompletionRequest) -> ApiResult<Event> {
    let message = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .ok_or_else(|| ApiError::invalid("the request has no `user` message"))?;
    let text = message.text();
    if text.trim().is_empty() {
        return Err(ApiError::invalid("the newest user message is empty"));
    }
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
async fn completions(
    State(state): State<AppState>,
    caller: Caller,
    Body(request): Body<CompletionRequest>,
) -> ApiResult<Response> {
    let event = event(&request)?;
    let id = named_agent(&state, caller, &request.model).await?;
    let agent = state.hub.lock(id).await?;
    let completion_id = format!("chatcmpl-{}", uuid::Uuid::now_v7().simple());
    let created = chrono::Utc::now().timestamp();
    if request.stream {
        let stream = stream_completion(state, agent, event, completion_id, created, request.model);
        return Ok(stream.into_response());
    }
    let mut agent = agent;
    let step = tokio::spawn(async move {
        state
            .metrics
            .step(&mut agent, event)
            .await
            .map_err(ApiError::from)
    });
    let record = match step.await {
        Ok(result) => result?,
        Err(e) => return Err(ApiError::internal("the step", e)),
    };
    if let memgpt_core::StopReason::ProviderError { message, .. } = &record.stop_reason {
        return Err(ApiError::new(
            crate::error::ErrorCode::LlmError,
            message.clone(),
        ));
    }
    Ok(Json(Completion {
        id: completion_id,
        object: "chat.completion",
        created,
        model: request.model,
        choices: vec![Choice {
            index: 0,
            message: json!({"role": "assistant", "content": record.reply()}),
            finish_reason: finish_reason(&record).to_owned(),
        }],
        usage: CompletionUsage {
            prompt_tokens: record.usage.prompt_tokens,
            completion_tokens: record.usage.completion_tokens,
            total_tokens: record.usage.total(),
        },
    })
    .into_response())
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

/// The step streamed as OpenAI `chat.completion.chunk`s: the role first, each reply of the
/// agent as content when it is said, the finish reason, then `[DONE]`.
fn stream_completion(
    state: AppState,
    mut agent: LiveAgent,
    event: Event,
    id: String,
    created: i64,
    model: String,
) -> StepStream {
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let _ = tx.send(chunk(json!({"role": "assistant", "content": ""}), None).to_string());
    let replies = Arc::new(std::sync::Mutex::new(0usize));
    let observer = {
        let (tx, chunk, replies) = (tx.clone(), chunk.clone(), replies.clone());
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
                    let _ = tx.send(chunk(json!({"content": content}), None).to_string());
                }
            }
        }
    };
    agent.set_observer(Some(Arc::new(observer)));
    tokio::spawn(async move {
        let outcome = state.metrics.step(&mut agent, event).await;
        let agent: &mut Agent = &mut agent;
        agent.set_observer(None);
        let last = match outcome {
            Ok(record) => chunk(json!({}), Some(finish_reason(&record))),
            Err(e) => {
                let e = ApiError::from(e);
                json!({"error": {"code": e.code, "message": e.message}})
            }
        };
        let _ = tx.send(last.to_string());
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
    /// One model per agent: `{"id": name, "object": "model", "created", "owned_by"}`.
    data: Vec<Value>,
}

/// Lists the caller's agents as models (by name), for clients that ask first.
async fn models(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<Models>> {
    let mut data = Vec::new();
    for id in state.tenants.agents_of(caller.tenant).await? {
        if let Some(agent) = state.hub.storage().agents.load_agent(id).await? {
            data.push(json!({
                "id": agent.name,
                "object": "model",
                "created": agent.created_at.timestamp(),
                "owned_by": "memgpt",
                "agent_id": agent.id,
            }));
        }
    }
    Ok(Json(Models {
        object: "list",
        data,
    }))
}
