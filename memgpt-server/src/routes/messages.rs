//! Messages: send one (an agent step), stream a step as it happens, list the conversation.

use std::convert::Infallible;
use std::sync::Arc;

use aide::OperationOutput;
use aide::axum::ApiRouter;
use aide::axum::routing::post;
use aide::generate::GenContext;
use aide::openapi::{MediaType, Operation, Response as ApiResponse, SchemaObject};
use axum::Json;
use axum::extract::{Path, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures_util::stream::{self, Stream};
use memgpt_core::agent::{Event, StepProgress};
use memgpt_core::message::MessageKind;
use memgpt_core::store::{RecallQuery, TimeRange};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::params::{AgentPath, page_of};
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::idempotency::{Answer, Claim, Outcome, RequestKey, RetryHeaders};
use crate::query::Query;
use crate::state::AppState;
use crate::views::{FlushView, MessageView, PageView, StepView};

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/agents/{agent_id}/messages", post(send).get(list))
        .api_route("/v1/agents/{agent_id}/messages/stream", post(stream_step))
}

/// What happened, for the agent to react to.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum EventType {
    /// A user's message (the default).
    #[default]
    User,
    /// A system alert (an event the agent should know about).
    SystemAlert,
    /// The user logged in.
    Login,
    /// A timer went off (`text` says why).
    Timer,
    /// Approves or denies the function call the agent waits on (`call_id`, `approve`;
    /// `text` says why, with a denial): the paused step goes on.
    Approval,
}

/// An event to step the agent with.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("allOf" = [
    {
        "if": {"properties": {"type": {"enum": ["user", "system_alert"]}}},
        "then": {"required": ["text"], "properties": {"text": {"pattern": crate::routes::document::NOT_BLANK}}}
    },
    {
        "if": {"required": ["type"], "properties": {"type": {"const": "approval"}}},
        "then": {"required": ["call_id", "approve"], "properties": {"call_id": {"type": "string"}, "approve": {"type": "boolean"}}},
        "else": {"properties": {"call_id": {"type": "null"}, "approve": {"type": "null"}}}
    }
]))]
struct SendMessage {
    /// The message (for `user` and `system_alert`), or the timer's reason.
    #[serde(default)]
    text: String,
    /// What kind of event (default `user`).
    #[serde(default, rename = "type")]
    kind: EventType,
    /// The user's name, for a `user` message.
    name: Option<String>,
    /// For `approval`: the id of the pending call (`pending_approval.call_id` of the step
    /// that paused).
    call_id: Option<String>,
    /// For `approval`: whether the call may run.
    approve: Option<bool>,
}

impl SendMessage {
    fn event(self) -> ApiResult<Event> {
        let needs_text = matches!(self.kind, EventType::User | EventType::SystemAlert);
        if needs_text && self.text.trim().is_empty() {
            return Err(ApiError::invalid("`text` is empty"));
        }
        let approval = matches!(self.kind, EventType::Approval);
        if !approval && (self.call_id.is_some() || self.approve.is_some()) {
            return Err(ApiError::invalid(
                "`call_id` and `approve` belong to messages of `type` `approval`",
            ));
        }
        Ok(match (self.kind, self.name) {
            (EventType::User, Some(name)) => Event::user_named(name, self.text),
            (EventType::User, None) => Event::user(self.text),
            (EventType::SystemAlert, _) => Event::alert(self.text),
            (EventType::Login, _) => Event::login(),
            (EventType::Timer, _) => Event::timer(self.text),
            (EventType::Approval, _) => match (self.call_id, self.approve) {
                (Some(call_id), Some(true)) => Event::approve(call_id),
                (Some(call_id), Some(false)) => Event::deny(call_id, self.text),
                _ => {
                    return Err(ApiError::invalid(
                        "an `approval` needs `call_id` and `approve`",
                    ));
                }
            },
        })
    }
}

/// Sends an event and answers with the step's record once it is committed.
///
/// The step runs to its end even if the client goes away: it commits whole or not at all. If
/// the model cannot be reached (after the provider's retries) the answer is `502 llm_error`;
/// the event that started the step is kept, as the agent saw it, so the message must not be
/// sent again as a new request: retry the same request with its `Idempotency-Key` (the
/// official OpenAI SDKs' own retries count as the same request too), which resumes the step
/// instead of storing the message twice.
async fn send(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    RetryHeaders(headers): RetryHeaders,
    Body(request): Body<SendMessage>,
) -> ApiResult<Answer<Json<StepView>>> {
    let event = request.event()?;
    let id = path.owned(&state, caller).await?;
    let key = RequestKey::of(&headers, "messages", id, &event)?;
    let (ticket, event) = match state.idempotency.claim(caller.tenant, key).await? {
        Claim::Replay(outcome) => {
            return Ok(Answer {
                body: Json(StepView::new(&outcome.record, outcome.version)),
                replayed: true,
            });
        }
        Claim::Run(ticket) => (ticket, event),
        Claim::Resume(ticket) => (ticket, Event::resume()),
    };
    let mut agent = state.hub.lock(id).await?;
    let state = state.clone();
    let step = tokio::spawn(async move {
        let record = Arc::new(state.step(&mut agent, event).await?);
        let version = agent.version();
        ticket.finish(Outcome::of(record.clone(), version));
        if let Some(failure) = crate::error::llm_failure(&record) {
            return Err(failure);
        }
        Ok::<_, ApiError>(StepView::new(&record, version))
    });
    match step.await {
        Ok(result) => result.map(|view| Answer {
            body: Json(view),
            replayed: false,
        }),
        Err(e) => Err(ApiError::internal("the step", e)),
    }
}

/// Server-Sent Events of a step: `message` (each message as it joins the context: the
/// event, the assistant's turns with their function calls, function results, heartbeats,
/// memory-pressure alerts), `thinking_delta` and `reply_delta` (`{"text": ...}`: pieces of the
/// inner monologue and of `send_message`'s text as the model writes them, before the message
/// that holds them), `flush` (messages evicted into recall and summarised), then
/// `step` (the committed record) or `error` (the step failed and left nothing stored).
#[derive(Debug)]
pub(crate) struct StepStream(Response);

impl StepStream {
    /// An event-stream response.
    pub(crate) fn new(response: Response) -> Self {
        Self(response)
    }
}

impl IntoResponse for StepStream {
    fn into_response(self) -> Response {
        self.0
    }
}

impl OperationOutput for StepStream {
    type Inner = ();

    fn operation_response(_: &mut GenContext, _: &mut Operation) -> Option<ApiResponse> {
        Some(ApiResponse {
            description: "Server-Sent Events: `message` (a message view), `thinking_delta` and \
                          `reply_delta` (`{\"text\": ...}`, the model's text as it is written), \
                          `flush`, then `step` (the step view) or `error` (an error body)"
                .to_owned(),
            content: [(
                "text/event-stream".to_owned(),
                MediaType {
                    schema: Some(SchemaObject {
                        json_schema: sse_schema(&[
                            "message",
                            "thinking_delta",
                            "reply_delta",
                            "flush",
                            "step",
                            "error",
                        ]),
                        external_docs: None,
                        example: None,
                    }),
                    ..MediaType::default()
                },
            )]
            .into_iter()
            .collect(),
            ..ApiResponse::default()
        })
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<aide::openapi::StatusCode>, ApiResponse)> {
        Self::operation_response(ctx, operation)
            .map(|r| vec![(Some(aide::openapi::StatusCode::Code(200)), r)])
            .unwrap_or_default()
    }
}

/// The schema of a Server-Sent Events body: the text, or (as contract testers read a stream)
/// each event, named one of `events` (or unnamed, for `[]`), its data a JSON text.
pub(crate) fn sse_schema(events: &[&str]) -> schemars::Schema {
    let event = if events.is_empty() {
        serde_json::json!({"type": "string"})
    } else {
        serde_json::json!({"type": "string", "enum": events})
    };
    schemars::json_schema!({
        "anyOf": [
            {"type": "string"},
            {
                "type": "object",
                "required": ["data"],
                "properties": {
                    "event": event,
                    "data": {"type": "string"},
                    "id": {"type": "string"},
                    "retry": {"type": "integer"}
                }
            }
        ]
    })
}

/// What the step task sends to the event stream.
/// The data of `thinking_delta` and `reply_delta` events.
#[derive(Serialize)]
struct DeltaView<'a> {
    text: &'a str,
}

enum Progress {
    Message(MessageView),
    Flush(FlushView),
    /// A piece of inner monologue or of `send_message`'s text as the model writes it.
    Delta(&'static str, String),
    Done(Box<StepView>),
    Failed(ApiError),
}

impl Progress {
    fn event(&self) -> SseEvent {
        let (name, data) = match self {
            Progress::Message(m) => ("message", serde_json::to_string(m)),
            Progress::Flush(f) => ("flush", serde_json::to_string(f)),
            Progress::Delta(name, text) => (*name, serde_json::to_string(&DeltaView { text })),
            Progress::Done(s) => ("step", serde_json::to_string(s)),
            Progress::Failed(e) => (
                "error",
                serde_json::to_string(&ErrorBody {
                    error: crate::error::ErrorDetail {
                        code: e.code,
                        message: e.message.clone(),
                    },
                }),
            ),
        };
        SseEvent::default()
            .event(name)
            .data(data.unwrap_or_else(|e| format!("{{\"unserialisable\": \"{e}\"}}")))
    }
}

/// Sends an event and streams the step as it happens (Server-Sent Events).
///
/// Errors found before the step starts (bad body, unknown agent) are ordinary JSON error
/// responses; once streaming, a failed step ends the stream with an `error` event.
async fn stream_step(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    RetryHeaders(headers): RetryHeaders,
    Body(request): Body<SendMessage>,
) -> ApiResult<Answer<StepStream>> {
    let event = request.event()?;
    let id = path.owned(&state, caller).await?;
    let key = RequestKey::of(&headers, "messages/stream", id, &event)?;
    let (tx, rx) = mpsc::unbounded_channel::<Progress>();
    let (ticket, event) = match state.idempotency.claim(caller.tenant, key).await? {
        Claim::Replay(outcome) => {
            // The step as it was: its messages, then its record.
            for message in &outcome.record.messages {
                let _ = tx.send(Progress::Message(message.into()));
            }
            let view = StepView::new(&outcome.record, outcome.version);
            let _ = tx.send(Progress::Done(Box::new(view)));
            drop(tx);
            return Ok(Answer {
                body: StepStream(Sse::new(events(rx)).into_response()),
                replayed: true,
            });
        }
        Claim::Run(ticket) => (ticket, event),
        Claim::Resume(ticket) => (ticket, Event::resume()),
    };
    let mut agent = state.hub.lock(id).await?;
    let observer = tx.clone();
    agent.set_observer(Some(Arc::new(move |progress: StepProgress<'_>| {
        let item = match progress {
            StepProgress::Message(m) => Progress::Message(m.into()),
            StepProgress::Flush(f) => Progress::Flush(f.into()),
            StepProgress::ThinkingDelta(text) => Progress::Delta("thinking_delta", text.to_owned()),
            StepProgress::ReplyDelta(text) => Progress::Delta("reply_delta", text.to_owned()),
            _ => return,
        };
        // A client that went away stops reading; the step goes on regardless.
        let _ = observer.send(item);
    })));
    tokio::spawn(async move {
        let outcome = match state.step(&mut agent, event).await {
            Ok(record) => {
                let record = Arc::new(record);
                ticket.finish(Outcome::of(record.clone(), agent.version()));
                match crate::error::llm_failure(&record) {
                    Some(failure) => Progress::Failed(failure),
                    None => Progress::Done(Box::new(StepView::new(&record, agent.version()))),
                }
            }
            Err(e) => Progress::Failed(e.into()),
        };
        agent.set_observer(None);
        drop(agent);
        let _ = tx.send(outcome);
    });
    Ok(Answer {
        body: StepStream(
            Sse::new(events(rx))
                .keep_alive(KeepAlive::default())
                .into_response(),
        ),
        replayed: false,
    })
}

fn events(
    rx: mpsc::UnboundedReceiver<Progress>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    stream::unfold(rx, |mut rx| async move {
        let item = rx.recv().await?;
        Some((Ok(item.event()), rx))
    })
}

/// Which messages to list.
#[derive(Debug, Deserialize, JsonSchema)]
struct ListMessages {
    /// The page, from 0 (default 0).
    #[schemars(range(max = 1_000_000))]
    #[serde(default)]
    page: usize,
    /// Results per page, 1-1000 (default 50).
    #[schemars(range(min = 1, max = 1000))]
    size: Option<usize>,
    /// Only messages created at or after this time (RFC 3339).
    start: Option<DateTime<Utc>>,
    /// Only messages created before this time (RFC 3339).
    end: Option<DateTime<Utc>>,
}

/// Every message of the agent (the conversation, function results, heartbeats, alerts),
/// oldest first, a page at a time; `start` and `end` narrow it to a stretch of time (what a
/// flush evicted, for example).
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    Query(query): Query<ListMessages>,
) -> ApiResult<Json<PageView<MessageView>>> {
    let id = path.owned(&state, caller).await?;
    let page = page_of(query.page, query.size, 50)?;
    let range = TimeRange {
        start: query.start,
        end: query.end,
    };
    let found = state
        .hub
        .storage()
        .recall
        .list_messages(
            id,
            &RecallQuery {
                kinds: MessageKind::ALL.to_vec(),
                ..RecallQuery::range(range, page)
            },
        )
        .await?;
    Ok(Json(PageView::new(&found, |m| MessageView::from(m))))
}
