//! A fake OpenAI-compatible server on 127.0.0.1 for tests and benchmarks.
//!
//! It speaks the real wire protocol (`POST /v1/chat/completions`, `POST /v1/embeddings`) over
//! real HTTP, and plays back scripted replies:
//!
//! * agent requests (those offering tools, or asking for a function call through
//!   `response_format`, `guided_json`, `grammar` or the text protocol's system prompt, see
//!   [`is_agent_request`]) are answered from [`FakeOpenAi::push`]'s queue, or by the default
//!   responder ([`FakeOpenAi::respond_with`]) when the queue is empty;
//! * summarizer requests (anything else) from [`FakeOpenAi::push_summary`]'s queue, or by
//!   [`FakeOpenAi::summarize_with`] when it is empty;
//! * replies are native tool calls ([`Reply::call`]) or plain content ([`Reply::text`],
//!   [`Reply::json_call`] for the structured modes);
//! * faults are scripted replies too: [`Reply::status`], [`Reply::rate_limited`],
//!   [`Reply::context_overflow`], [`Reply::delayed`];
//! * embeddings are computed with `HashingEmbedder` (deterministic, offline);
//! * a request with `"stream": true` gets server-sent events: every character of the content
//!   and of each call's arguments its own delta, each event split across two body frames in
//!   the middle of its bytes (see [`stream_body`]).
//!
//! With nothing scripted it answers HTTP 400 ("no scripted reply"), which providers do not
//! retry, so an under-scripted test fails fast and visibly.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use memgpt::embed::HashingEmbedder;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A chat completion with this assistant message.
    Message {
        /// Content (inner monologue).
        content: Option<String>,
        /// `(name, raw arguments)` of each tool call.
        calls: Vec<(String, String)>,
    },
    /// A non-2xx answer.
    Status {
        /// HTTP status.
        status: u16,
        /// JSON body.
        body: Value,
        /// Extra headers.
        headers: Vec<(String, String)>,
    },
    /// Another reply, after a delay.
    Delayed(Duration, Box<Reply>),
}

impl Reply {
    /// A reply calling one function.
    pub fn call(name: &str, arguments: Value) -> Self {
        Self::calls("", &[(name, arguments)])
    }

    /// A reply with inner monologue and several calls.
    pub fn calls(thought: &str, calls: &[(&str, Value)]) -> Self {
        Reply::Message {
            content: (!thought.is_empty()).then(|| thought.to_owned()),
            calls: calls
                .iter()
                .map(|(n, a)| ((*n).to_owned(), a.to_string()))
                .collect(),
        }
    }

    /// A reply calling a function with raw (possibly invalid) argument text.
    pub fn raw_call(name: &str, arguments: &str) -> Self {
        Reply::Message {
            content: None,
            calls: vec![(name.to_owned(), arguments.to_owned())],
        }
    }

    /// A reply whose content is one call in the structured modes' JSON shape
    /// (`{"thinking", "function", "arguments"}`), with no native call.
    pub fn json_call(thinking: &str, name: &str, arguments: Value) -> Self {
        Self::text(
            &json!({"thinking": thinking, "function": name, "arguments": arguments}).to_string(),
        )
    }

    /// A reply with text and no call.
    pub fn text(content: &str) -> Self {
        Reply::Message {
            content: Some(content.to_owned()),
            calls: Vec::new(),
        }
    }

    /// An error status with an OpenAI-style error body.
    pub fn status(status: u16, message: &str) -> Self {
        Reply::Status {
            status,
            body: json!({"error": {"message": message, "type": "fake"}}),
            headers: Vec::new(),
        }
    }

    /// HTTP 429 asking the client to wait `retry_after`.
    pub fn rate_limited(retry_after: Duration) -> Self {
        Reply::Status {
            status: 429,
            body: json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}),
            headers: vec![("retry-after-ms".into(), retry_after.as_millis().to_string())],
        }
    }

    /// HTTP 400 `context_length_exceeded`, as OpenAI sends it.
    pub fn context_overflow() -> Self {
        Reply::Status {
            status: 400,
            body: json!({"error": {
                "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded"
            }}),
            headers: Vec::new(),
        }
    }

    /// This reply after `delay`.
    pub fn delayed(self, delay: Duration) -> Self {
        Reply::Delayed(delay, Box::new(self))
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The `authorization` header, if any.
    pub authorization: Option<String>,
    /// The JSON body.
    pub body: Value,
}

impl Received {
    /// Whether the request offered tools natively.
    pub fn has_tools(&self) -> bool {
        self.body["tools"].as_array().is_some_and(|t| !t.is_empty())
    }

    /// Whether the request wants a function call (an agent call, not a summarizer call).
    pub fn is_agent(&self) -> bool {
        is_agent_request(&self.body)
    }

    /// The system prompt (the first message's content, if it is a system message).
    pub fn system_prompt(&self) -> String {
        self.messages()
            .first()
            .filter(|m| m["role"] == "system")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned()
    }

    /// The messages sent.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The content of the last message.
    pub fn last_content(&self) -> String {
        self.messages()
            .last()
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

type Responder = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Script {
    /// A pre-rendered completion sent for every chat request, unparsed and unrecorded.
    instant: Option<Bytes>,
    replies: VecDeque<Reply>,
    summaries: VecDeque<Reply>,
    responder: Option<Responder>,
    summarizer: Option<Responder>,
    received: Vec<Received>,
    record: bool,
    calls: u64,
    /// How long each embeddings request takes.
    embedding_delay: std::time::Duration,
    /// The prompt prefix of the last agent request (tools, then the system message), as
    /// OpenAI's automatic prompt cache would hold it.
    last_prefix: String,
}

/// The server. Dropping it shuts it down.
pub struct FakeOpenAi {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl FakeOpenAi {
    /// Starts a server on an ephemeral port of 127.0.0.1.
    pub async fn start() -> Self {
        let script = Arc::new(Mutex::new(Script {
            record: true,
            ..Script::default()
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/embeddings", post(embeddings))
            .with_state(script.clone());
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Self {
            addr,
            script,
            shutdown: Some(tx),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The base URL to configure a provider with (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues the answer to the next agent request.
    pub fn push(&self, reply: Reply) {
        self.lock().replies.push_back(reply);
    }

    /// Queues several answers.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        self.lock().replies.extend(replies);
    }

    /// Queues the answer to the next summarizer request (one without tools).
    pub fn push_summary(&self, summary: &str) {
        self.lock().summaries.push_back(Reply::text(summary));
    }

    /// Queues a fault for the next summarizer request.
    pub fn push_summary_reply(&self, reply: Reply) {
        self.lock().summaries.push_back(reply);
    }

    /// Answers agent requests with `responder` whenever the queue is empty.
    pub fn respond_with(&self, responder: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        self.lock().responder = Some(Arc::new(responder));
    }

    /// Answers summarizer requests with `responder` whenever their queue is empty (without
    /// one, a summary nobody scripted fails).
    pub fn summarize_with(&self, responder: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        self.lock().summarizer = Some(Arc::new(responder));
    }

    /// Answers every chat request at once with `reply`, rendered once in advance, without
    /// parsing or recording the request: an LLM that takes no time, for benchmarks.
    pub async fn respond_instantly(&self, reply: Reply) {
        let response = render(reply, &json!({"model": "instant", "messages": []}), 0).await;
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("rendered reply");
        self.lock().instant = Some(bytes);
    }

    /// Makes every embeddings request take `delay` (a slow embedder: work that must still be
    /// running when a test interrupts it).
    pub fn delay_embeddings(&self, delay: std::time::Duration) {
        self.lock().embedding_delay = delay;
    }

    /// Turns recording of received requests on or off (benchmarks turn it off).
    pub fn set_recording(&self, record: bool) {
        self.lock().record = record;
    }

    /// Every chat request received, in order.
    pub fn requests(&self) -> Vec<Received> {
        self.lock()
            .received
            .iter()
            .filter(|r| r.path.ends_with("/chat/completions"))
            .cloned()
            .collect()
    }

    /// Agent requests (those wanting a function call), in order.
    pub fn agent_requests(&self) -> Vec<Received> {
        self.requests()
            .into_iter()
            .filter(Received::is_agent)
            .collect()
    }

    /// Summarizer requests (the others), in order.
    pub fn summary_requests(&self) -> Vec<Received> {
        self.requests()
            .into_iter()
            .filter(|r| !r.is_agent())
            .collect()
    }

    /// The last chat request received.
    pub fn last_request(&self) -> Option<Received> {
        self.requests().pop()
    }

    /// Every request received on any path.
    pub fn all_requests(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// How many HTTP requests were answered.
    pub fn calls(&self) -> u64 {
        self.lock().calls
    }

    /// Scripted agent replies not consumed yet.
    pub fn remaining(&self) -> usize {
        self.lock().replies.len()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn record(script: &mut Script, path: &str, headers: &HeaderMap, body: &Value) {
    script.calls += 1;
    if script.record {
        script.received.push(Received {
            path: path.to_owned(),
            authorization: headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: body.clone(),
        });
    }
}

async fn chat(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let instant = script
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .instant
        .clone();
    if let Some(reply) = instant {
        return (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            reply,
        )
            .into_response();
    }
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error(400, &format!("fake server: invalid JSON body: {e}")),
    };
    let mut cached = 0;
    let reply = {
        let mut s = script.lock().unwrap_or_else(|p| p.into_inner());
        record(&mut s, "/v1/chat/completions", &headers, &body);
        if is_agent_request(&body) {
            cached = prompt_cache(&mut s, &body);
            s.replies
                .pop_front()
                .or_else(|| s.responder.as_ref().map(|r| r(&body)))
        } else {
            s.summaries
                .pop_front()
                .or_else(|| s.summarizer.as_ref().map(|r| r(&body)))
        }
    };
    let Some(reply) = reply else {
        return error(400, "fake server: no scripted reply left");
    };
    render(reply, &body, cached).await
}

/// OpenAI's automatic prompt caching: the bytes of the prompt prefix (tools, then the system
/// message) shared with the previous agent request count as cached, about 4 a token.
fn prompt_cache(script: &mut Script, body: &Value) -> usize {
    let prefix = format!(
        "{}{}",
        body["tools"],
        body["messages"][0]["content"].as_str().unwrap_or_default()
    );
    let shared = prefix
        .bytes()
        .zip(script.last_prefix.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    script.last_prefix = prefix;
    shared / 4
}

async fn render(mut reply: Reply, request: &Value, cached: usize) -> Response {
    loop {
        match reply {
            Reply::Delayed(delay, inner) => {
                tokio::time::sleep(delay).await;
                reply = *inner;
            }
            Reply::Status {
                status,
                body,
                headers,
            } => {
                let mut response = (
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    axum::Json(body),
                )
                    .into_response();
                for (name, value) in headers {
                    if let (Ok(name), Ok(value)) = (
                        axum::http::HeaderName::try_from(name),
                        axum::http::HeaderValue::try_from(value),
                    ) {
                        response.headers_mut().insert(name, value);
                    }
                }
                return response;
            }
            Reply::Message { content, calls } => {
                let prompt_chars: usize = request["messages"]
                    .as_array()
                    .map(|m| {
                        m.iter()
                            .map(|m| m["content"].as_str().map_or(0, str::len))
                            .sum()
                    })
                    .unwrap_or(0);
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, arguments))| {
                        json!({"id": format!("call_{}", fastrand_id(i)), "type": "function", "function": {"name": name, "arguments": arguments}})
                    })
                    .collect();
                let mut message = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    message["tool_calls"] = Value::Array(tool_calls.clone());
                }
                let finish = if calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                let usage = json!({"prompt_tokens": prompt_chars / 4, "completion_tokens": 10,
                    "total_tokens": prompt_chars / 4 + 10,
                    "prompt_tokens_details": {"cached_tokens": cached.min(prompt_chars / 4)}});
                if request["stream"] == true {
                    return stream_body(request, content.as_deref(), &tool_calls, finish, usage);
                }
                return axum::Json(json!({
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": request["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }))
                .into_response();
            }
        }
    }
}

/// A streamed completion: `chat.completion.chunk` events, one character of content or of a
/// call's arguments per delta, usage in a last chunk when asked (`stream_options`), then
/// `[DONE]`; every event goes out as two body frames split in the middle of its bytes.
fn stream_body(
    request: &Value,
    content: Option<&str>,
    tool_calls: &[Value],
    finish: &str,
    usage: Value,
) -> Response {
    let model = &request["model"];
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for c in content.unwrap_or_default().chars() {
        events.push(chunk(json!({"content": c.to_string()}), Value::Null));
    }
    for (index, call) in tool_calls.iter().enumerate() {
        let function = &call["function"];
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                "function": {"name": function["name"], "arguments": ""}}]}),
            Value::Null,
        ));
        for c in function["arguments"].as_str().unwrap_or_default().chars() {
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": c.to_string()}}]}),
                Value::Null,
            ));
        }
    }
    events.push(chunk(json!({}), json!(finish)));
    if request["stream_options"]["include_usage"] == true {
        events.push(
            json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
            "choices": [], "usage": usage}),
        );
    }
    let mut frames = std::collections::VecDeque::new();
    let texts = events
        .iter()
        .map(|e| format!("data: {e}\n\n"))
        .chain(std::iter::once("data: [DONE]\n\n".to_owned()));
    for text in texts {
        let bytes = Bytes::from(text);
        let middle = bytes.len() / 2;
        frames.push_back(bytes.slice(..middle));
        frames.push_back(bytes.slice(middle..));
    }
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        axum::body::Body::from_stream(Frames(frames)),
    )
        .into_response()
}

/// A body sent as the given frames, one per poll.
struct Frames(std::collections::VecDeque<Bytes>);

impl futures_core::Stream for Frames {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.pop_front().map(Ok))
    }
}

/// Whether a chat request body wants a function call: it offers tools, constrains the reply
/// with a schema or grammar, or carries the text protocol's system-prompt addendum.
pub fn is_agent_request(body: &Value) -> bool {
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let constrained = ["response_format", "guided_json", "grammar"]
        .iter()
        .any(|field| body.get(*field).is_some_and(|v| !v.is_null()));
    let text_protocol = body["messages"].as_array().is_some_and(|messages| {
        messages.iter().any(|m| {
            m["role"] == "system"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains(memgpt::structured::PROTOCOL_HEADING))
        })
    });
    has_tools || constrained || text_protocol
}

/// Unique-enough call ids without a random dependency.
fn fastrand_id(i: usize) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{}_{i}", NEXT.fetch_add(1, Ordering::Relaxed))
}

async fn embeddings(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error(400, &format!("fake server: invalid JSON body: {e}")),
    };
    let delay = {
        let mut script = script.lock().unwrap_or_else(|p| p.into_inner());
        record(&mut script, "/v1/embeddings", &headers, &body);
        script.embedding_delay
    };
    tokio::time::sleep(delay).await;
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => {
            return error(
                400,
                "fake server: `input` must be a string or an array of strings",
            );
        }
    };
    let embedder = HashingEmbedder::new(FAKE_EMBEDDING_DIMENSION);
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": embedder.vector(text)}))
        .collect();
    axum::Json(json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}})).into_response()
}

/// The dimension of the fake server's embeddings.
pub const FAKE_EMBEDDING_DIMENSION: usize = 64;

fn error(status: u16, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
        axum::Json(json!({"error": {"message": message}})),
    )
        .into_response()
}
