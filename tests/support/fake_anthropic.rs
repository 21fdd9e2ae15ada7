//! A fake Anthropic Messages API server on 127.0.0.1 for tests.
//!
//! It speaks the real wire format (`POST /v1/messages`, JSON or, when the request asks for
//! `"stream": true`, server-sent events sent in small chunks) over real HTTP, and plays back
//! scripted replies:
//!
//! * agent requests (those offering tools) are answered from [`FakeAnthropic::push`]'s queue;
//! * summarizer requests (no tools) from [`FakeAnthropic::push_summary`]'s queue;
//! * faults are scripted replies too: [`Reply::status`], [`Reply::rate_limited`],
//!   [`Reply::overloaded`], [`Reply::prompt_too_long`], and for streams
//!   [`Reply::stream_error`] (an `error` event mid-stream) and [`Reply::truncated`] (the
//!   connection closes mid-stream);
//! * [`FakeAnthropic::hold_streams`] pauses every stream after its first text piece until the
//!   client says it has seen that piece, which proves the client streams incrementally.
//!
//! With nothing scripted it answers HTTP 400 `invalid_request_error`, which providers do not
//! retry, so an under-scripted test fails fast and visibly.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc, oneshot};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A message: text, then function calls.
    Message {
        /// The text block, if any.
        text: Option<String>,
        /// `(name, input)` of each `tool_use` block.
        calls: Vec<(String, Value)>,
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
    /// A stream that sends `text`, then an `error` event (JSON requests get the error as a
    /// status instead).
    StreamError {
        /// Text sent before the error.
        text: String,
        /// The error type, e.g. `overloaded_error`.
        kind: String,
        /// The error message.
        message: String,
    },
    /// A stream that sends `text` and then closes without `message_stop`.
    Truncated {
        /// Text sent before the connection closes.
        text: String,
    },
}

impl Reply {
    /// A reply calling one function.
    pub fn call(name: &str, input: Value) -> Self {
        Self::calls("", &[(name, input)])
    }

    /// A reply with text (inner monologue) and several calls.
    pub fn calls(thought: &str, calls: &[(&str, Value)]) -> Self {
        Reply::Message {
            text: (!thought.is_empty()).then(|| thought.to_owned()),
            calls: calls
                .iter()
                .map(|(n, a)| ((*n).to_owned(), a.clone()))
                .collect(),
        }
    }

    /// A reply with text and no call.
    pub fn text(content: &str) -> Self {
        Reply::Message {
            text: Some(content.to_owned()),
            calls: Vec::new(),
        }
    }

    /// An error status with Anthropic's error body.
    pub fn status(status: u16, kind: &str, message: &str) -> Self {
        Reply::Status {
            status,
            body: error_body(kind, message),
            headers: Vec::new(),
        }
    }

    /// HTTP 429 asking the client to wait `retry_after` (sent in seconds, as Anthropic does).
    pub fn rate_limited(retry_after: Duration) -> Self {
        Reply::Status {
            status: 429,
            body: error_body(
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
            headers: vec![(
                "retry-after".into(),
                format!("{}", retry_after.as_secs_f64()),
            )],
        }
    }

    /// HTTP 529 `overloaded_error`.
    pub fn overloaded() -> Self {
        Self::status(529, "overloaded_error", "Overloaded")
    }

    /// HTTP 400 "prompt is too long", as Anthropic sends it.
    pub fn prompt_too_long() -> Self {
        Self::status(
            400,
            "invalid_request_error",
            "prompt is too long: 212345 tokens > 200000 maximum",
        )
    }

    /// A stream that fails mid-way with an `error` event of `kind`.
    pub fn stream_error(text: &str, kind: &str, message: &str) -> Self {
        Reply::StreamError {
            text: text.to_owned(),
            kind: kind.to_owned(),
            message: message.to_owned(),
        }
    }

    /// A stream whose connection closes after `text`.
    pub fn truncated(text: &str) -> Self {
        Reply::Truncated {
            text: text.to_owned(),
        }
    }
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The `x-api-key` header, if any.
    pub api_key: Option<String>,
    /// The `anthropic-version` header, if any.
    pub version: Option<String>,
    /// The JSON body.
    pub body: Value,
}

impl Received {
    /// Whether the request offered tools (an agent call, not a summarizer call).
    pub fn has_tools(&self) -> bool {
        self.body["tools"].as_array().is_some_and(|t| !t.is_empty())
    }

    /// Whether the request asked for a stream.
    pub fn streams(&self) -> bool {
        self.body["stream"] == json!(true)
    }

    /// The messages sent.
    pub fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// All text of the `text` blocks of the messages, joined by newlines.
    pub fn all_text(&self) -> String {
        self.messages()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|b| b["text"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    summaries: VecDeque<Reply>,
    received: Vec<Received>,
    /// Streams wait on this after their first text piece, when set.
    hold: Option<Arc<Notify>>,
    /// How many held streams were released by the client (rather than by the timeout).
    released: u64,
    /// The cached prefix of the last request with a `cache_control` breakpoint (tools, then
    /// the system blocks up to it), as the prompt cache would hold it.
    cached_prefix: Option<String>,
}

type Shared = Arc<Mutex<Script>>;

fn lock(script: &Shared) -> MutexGuard<'_, Script> {
    script.lock().unwrap_or_else(|p| p.into_inner())
}

/// The server. Dropping it shuts it down.
pub struct FakeAnthropic {
    addr: SocketAddr,
    script: Shared,
    shutdown: Option<oneshot::Sender<()>>,
}

impl FakeAnthropic {
    /// Starts a server on an ephemeral port of 127.0.0.1.
    pub async fn start() -> Self {
        let script: Shared = Arc::default();
        let app = Router::new()
            .route("/v1/messages", post(messages))
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

    /// The base URL to configure a provider with (`http://127.0.0.1:PORT`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues the answer to the next agent request.
    pub fn push(&self, reply: Reply) {
        lock(&self.script).replies.push_back(reply);
    }

    /// Queues several answers.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.script).replies.extend(replies);
    }

    /// Queues the answer to the next summarizer request (one without tools).
    pub fn push_summary(&self, summary: &str) {
        lock(&self.script).summaries.push_back(Reply::text(summary));
    }

    /// From now on, every stream pauses after its first text piece (or after `message_start`
    /// when there is no text) until `notify_one` is called on the returned handle (or 10
    /// seconds pass). [`FakeAnthropic::released`] counts
    /// the streams the client released.
    pub fn hold_streams(&self) -> Arc<Notify> {
        let gate = Arc::new(Notify::new());
        lock(&self.script).hold = Some(gate.clone());
        gate
    }

    /// How many held streams were released by the client rather than by the timeout.
    pub fn released(&self) -> u64 {
        lock(&self.script).released
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Received> {
        lock(&self.script).received.clone()
    }

    /// Agent requests (with tools), in order.
    pub fn agent_requests(&self) -> Vec<Received> {
        self.requests()
            .into_iter()
            .filter(Received::has_tools)
            .collect()
    }

    /// Summarizer requests (without tools), in order.
    pub fn summary_requests(&self) -> Vec<Received> {
        self.requests()
            .into_iter()
            .filter(|r| !r.has_tools())
            .collect()
    }

    /// Scripted agent replies not consumed yet.
    pub fn remaining(&self) -> usize {
        lock(&self.script).replies.len()
    }
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn error(status: u16, kind: &str, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
        axum::Json(error_body(kind, message)),
    )
        .into_response()
}

async fn messages(State(script): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                400,
                "invalid_request_error",
                &format!("fake server: invalid JSON body: {e}"),
            );
        }
    };
    // What the real API insists on.
    if body["max_tokens"].as_u64().is_none() {
        return error(400, "invalid_request_error", "max_tokens: Field required");
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let received = Received {
        api_key: header("x-api-key"),
        version: header("anthropic-version"),
        body,
    };
    let (reply, hold, cache) = {
        let mut s = lock(&script);
        s.received.push(received.clone());
        let cache = prompt_cache(&mut s, &received.body);
        let reply = if received.has_tools() {
            s.replies.pop_front()
        } else {
            s.summaries.pop_front()
        };
        (reply, s.hold.clone(), cache)
    };
    let Some(reply) = reply else {
        return error(
            400,
            "invalid_request_error",
            "fake server: no scripted reply left",
        );
    };
    let model = received.body["model"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // About 4 bytes a token, of the prompt only (so a streamed request counts the same); the
    // cached prefix's tokens are reported apart, as read from or written to the cache.
    let input_tokens = (received.body["system"].to_string().len()
        + received.body["messages"].to_string().len()) as u64
        / 4;
    let (read, written) = cache;
    let usage = json!({"input_tokens": input_tokens.saturating_sub(read + written),
        "cache_read_input_tokens": read, "cache_creation_input_tokens": written});
    match reply {
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
            response
        }
        Reply::StreamError { kind, message, .. } if !received.streams() => {
            error(500, &kind, &message)
        }
        Reply::Truncated { .. } if !received.streams() => {
            error(500, "api_error", "fake server: truncated")
        }
        Reply::Message { text, calls } if !received.streams() => {
            let mut content = Vec::new();
            if let Some(text) = text {
                content.push(json!({"type": "text", "text": text}));
            }
            for (name, input) in &calls {
                content.push(
                    json!({"type": "tool_use", "id": tool_use_id(), "name": name, "input": input}),
                );
            }
            let stop = if calls.is_empty() {
                "end_turn"
            } else {
                "tool_use"
            };
            axum::Json(json!({
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": with_output(&usage, 10)
            }))
            .into_response()
        }
        streamed => stream(streamed, &model, &usage, hold, script.clone()),
    }
}

/// Unique tool-use ids.
fn tool_use_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("toolu_fake_{:04}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn event(out: &mut String, data: Value) {
    let kind = data["type"].as_str().unwrap_or("message").to_owned();
    out.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
}

/// Splits `text` into pieces of about `size` characters (never inside a character).
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The SSE body of `reply`, in two parts: up to and including the first text piece (or
/// `message_start` when there is no text), and the rest.
/// `usage` with `output_tokens` set.
fn with_output(usage: &Value, output_tokens: u64) -> Value {
    let mut usage = usage.clone();
    usage["output_tokens"] = json!(output_tokens);
    usage
}

/// Prompt caching as Anthropic does it: the prefix up to the request's `cache_control`
/// breakpoint (tools, then system blocks) is read from the cache when the previous such
/// request had the same prefix, and written to it otherwise. Returns (read, written) tokens.
fn prompt_cache(script: &mut Script, body: &Value) -> (u64, u64) {
    let Some(blocks) = body["system"].as_array() else {
        return (0, 0);
    };
    let Some(end) = blocks.iter().position(|b| b.get("cache_control").is_some()) else {
        return (0, 0);
    };
    let mut prefix = body["tools"].to_string();
    let mut text = 0;
    for block in &blocks[..=end] {
        let block = block["text"].as_str().unwrap_or_default();
        text += block.len();
        prefix.push_str(block);
    }
    // Of the system text only, so the three counts still add up to the usual total.
    let tokens = text as u64 / 4;
    if script.cached_prefix.as_deref() == Some(prefix.as_str()) {
        (tokens, 0)
    } else {
        script.cached_prefix = Some(prefix);
        (0, tokens)
    }
}

fn sse(reply: Reply, model: &str, usage: &Value) -> (String, String) {
    let mut head = String::new();
    event(
        &mut head,
        json!({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": with_output(usage, 1)}}),
    );
    event(&mut head, json!({"type": "ping"}));
    let (text, calls, ending) = match reply {
        Reply::Message { text, calls } => (text.unwrap_or_default(), calls, None),
        Reply::StreamError {
            text,
            kind,
            message,
        } => (
            text,
            Vec::new(),
            Some(Some(
                json!({"type": "error", "error": {"type": kind, "message": message}}),
            )),
        ),
        Reply::Truncated { text } => (text, Vec::new(), Some(None)),
        Reply::Status { .. } => unreachable!("statuses are not streamed"),
    };
    let mut tail = String::new();
    let mut index = 0;
    if !text.is_empty() {
        event(
            &mut head,
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        );
        for (i, piece) in pieces(&text, 5).into_iter().enumerate() {
            let out = if i == 0 { &mut head } else { &mut tail };
            event(
                out,
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
            );
        }
        if ending.is_none() {
            event(&mut tail, json!({"type": "content_block_stop", "index": 0}));
        }
        index = 1;
    }
    match ending {
        Some(Some(error)) => {
            event(&mut tail, error);
            return (head, tail);
        }
        // Truncated: the body ends before `message_stop`.
        Some(None) => return (head, tail),
        None => {}
    }
    for (name, input) in &calls {
        event(
            &mut tail,
            json!({"type": "content_block_start", "index": index, "content_block":
                {"type": "tool_use", "id": tool_use_id(), "name": name, "input": {}}}),
        );
        // Like the real API: an empty piece first, then the JSON in pieces (here one
        // character each, the hardest split), with its own spacing (which the client must
        // normalize).
        let json = serde_json::to_string_pretty(input).unwrap_or_default();
        let mut parts = vec![String::new()];
        parts.extend(pieces(&json, 1));
        for part in parts {
            event(
                &mut tail,
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}),
            );
        }
        event(
            &mut tail,
            json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    event(
        &mut tail,
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 10}}),
    );
    event(&mut tail, json!({"type": "message_stop"}));
    (head, tail)
}

/// Chunks of `size` bytes, split anywhere (even inside a UTF-8 character).
fn byte_chunks(text: &str, size: usize) -> Vec<Bytes> {
    text.as_bytes()
        .chunks(size)
        .map(Bytes::copy_from_slice)
        .collect()
}

fn stream(
    reply: Reply,
    model: &str,
    usage: &Value,
    hold: Option<Arc<Notify>>,
    script: Shared,
) -> Response {
    let (head, tail) = sse(reply, model, usage);
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    tokio::spawn(async move {
        for chunk in byte_chunks(&head, 7) {
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
        if let Some(gate) = hold {
            let released = tokio::time::timeout(Duration::from_secs(10), gate.notified())
                .await
                .is_ok();
            if released {
                lock(&script).released += 1;
            }
        }
        for chunk in byte_chunks(&tail, 7) {
            if tx.send(chunk).await.is_err() {
                return;
            }
        }
        // Dropping `tx` ends the body.
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(ChunkStream(rx)))
        .unwrap_or_else(|_| error(500, "api_error", "fake server: response"))
}

/// The body of a streamed response: the chunks the writer task sends.
struct ChunkStream(mpsc::Receiver<Bytes>);

impl futures_core::Stream for ChunkStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(Ok))
    }
}
