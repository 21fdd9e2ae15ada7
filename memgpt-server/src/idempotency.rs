//! A retried request is one request: message and chat-completion posts that carry the same
//! `Idempotency-Key` (or that an official OpenAI SDK retries on its own) get the first
//! attempt's outcome instead of a second step, so the user's message is stored once.
//!
//! **The failed-step rule**, the same on every surface (the native API, the OpenAI facade, the
//! CLI's `/retry`): a step that fails at the model keeps its event (the user's message is
//! stored, as the agent saw it) and is answered `502 llm_error`. A retry of that request does
//! not store the message again: it *resumes* the step ([`Event::resume`]), and the model
//! answers the stored message. A retry of a request whose step completed gets that step's
//! record again (`Idempotent-Replayed: true`); one of a request still running waits for it. A
//! request refused before anything was stored leaves nothing to remember and runs afresh.
//!
//! Which requests are "the same":
//! * an `Idempotency-Key` header (at most 255 visible ASCII characters), scoped to the tenant,
//!   for [`IdempotencyConfig::window`] after the attempt ends; the same key with another request
//!   is refused (`422 idempotency_key_reused`);
//! * without one, the official SDKs' own retries: they number their attempts in
//!   `x-stainless-retry-count`, so an attempt numbered 1 or more is a retry of the latest first
//!   attempt (numbered 0) of the same request. A first attempt always runs: sending the same
//!   words twice on purpose stores them twice.
//!
//! Outcomes are kept in this process (a server of several processes behind a load balancer
//! should route a tenant's retries to one process, or use keys its clients never reuse).
//!
//! [`Event::resume`]: memgpt_core::Event::resume

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use memgpt_core::StepRecord;
use memgpt_core::ids::AgentId;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::tenants::TenantId;

/// The request header naming a request's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The header the official OpenAI SDKs number their attempts with (0 first).
pub const SDK_RETRY_COUNT: &str = "x-stainless-retry-count";
/// The response header of an answer replayed from an earlier attempt.
pub const REPLAYED: &str = "idempotent-replayed";

/// How long outcomes are kept.
#[derive(Clone, Copy, Debug)]
pub struct IdempotencyConfig {
    /// How long after an attempt ends a retry still finds it (default one hour).
    pub window: Duration,
    /// At most this many outcomes are kept (default 10,000); past it, the oldest go first.
    pub capacity: usize,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(3_600),
            capacity: 10_000,
        }
    }
}

/// What makes a request the same as another: its key and what it asks.
#[derive(Clone, Debug)]
pub(crate) struct RequestKey {
    key: String,
    /// A digest of the route, the agent and the event.
    fingerprint: [u8; 32],
    /// An SDK's first attempt: it runs, whatever ran before with the same words.
    first_attempt: bool,
}

impl RequestKey {
    /// The key of a request to `route` for `agent` asking `what` (its event, serialised), from
    /// its headers; `None` when the request carries neither an `Idempotency-Key` nor an SDK's
    /// attempt number.
    pub(crate) fn of(
        headers: &HeaderMap,
        route: &str,
        agent: AgentId,
        what: &impl serde::Serialize,
    ) -> ApiResult<Option<Self>> {
        let mut digest = Sha256::new();
        digest.update(route.as_bytes());
        digest.update(agent.as_uuid().as_bytes());
        digest.update(serde_json::to_vec(what).unwrap_or_default());
        let fingerprint: [u8; 32] = digest.finalize().into();
        if let Some(key) = headers.get(IDEMPOTENCY_KEY) {
            let key = key
                .to_str()
                .ok()
                .filter(|k| {
                    !k.is_empty() && k.len() <= 255 && k.bytes().all(|b| b.is_ascii_graphic())
                })
                .ok_or_else(|| {
                    ApiError::invalid("`Idempotency-Key` must be 1 to 255 visible ASCII characters")
                })?;
            return Ok(Some(Self {
                key: format!("key:{key}"),
                fingerprint,
                first_attempt: false,
            }));
        }
        let Some(attempt) = headers
            .get(SDK_RETRY_COUNT)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u32>().ok())
        else {
            return Ok(None);
        };
        let hex: String = fingerprint.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Some(Self {
            key: format!("sdk:{hex}"),
            fingerprint,
            first_attempt: attempt == 0,
        }))
    }
}

/// A committed step, as a retry is answered with it.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    /// The step's record.
    pub(crate) record: Arc<StepRecord>,
    /// The agent's version after it.
    pub(crate) version: u64,
    /// The response's own id (an OpenAI completion's `chatcmpl-...`), so a replay is the same
    /// answer.
    pub(crate) id: String,
    /// When it was answered (Unix seconds).
    pub(crate) created: i64,
}

impl Outcome {
    /// A step of the native API (no response id of its own).
    pub(crate) fn of(record: Arc<StepRecord>, version: u64) -> Self {
        Self {
            record,
            version,
            id: String::new(),
            created: 0,
        }
    }

    /// Whether the step failed at the model: its retry resumes it.
    fn failed_at_model(&self) -> bool {
        matches!(
            self.record.stop_reason,
            memgpt_core::StopReason::ProviderError { .. }
        )
    }
}

/// What a request should do.
#[derive(Debug)]
pub(crate) enum Claim {
    /// Run the request's step (a first attempt, or a request without a key).
    Run(Ticket),
    /// Resume the step of an earlier attempt that failed at the model ([`Event::resume`]
    /// instead of the request's event).
    ///
    /// [`Event::resume`]: memgpt_core::Event::resume
    Resume(Ticket),
    /// Answer with an earlier attempt's step.
    Replay(Outcome),
}

/// The right to run a step for a key; report how it ended with [`Ticket::finish`]. Dropped
/// unfinished (the step failed before storing anything), the key is forgotten, so a retry runs
/// afresh.
#[derive(Debug)]
pub(crate) struct Ticket {
    registry: Option<Arc<Registry>>,
    slot: (TenantId, String),
    /// Which attempt under the slot this is (a later first attempt may take the slot over).
    attempt: u64,
    sender: watch::Sender<Option<Outcome>>,
}

impl Ticket {
    /// A ticket for a request without a key: nothing is remembered.
    pub(crate) fn unkeyed() -> Self {
        Self {
            registry: None,
            slot: (TenantId(uuid::Uuid::nil()), String::new()),
            attempt: 0,
            sender: watch::channel(None).0,
        }
    }

    /// Records the committed step a retry is to be answered with (or resumes, if it failed at
    /// the model).
    pub(crate) fn finish(mut self, outcome: Outcome) {
        if let Some(registry) = self.registry.take() {
            registry.finish(&self.slot, self.attempt, outcome.clone());
        }
        let _ = self.sender.send(Some(outcome));
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.take() {
            registry.forget(&self.slot, self.attempt);
        }
    }
}

#[derive(Debug)]
enum State {
    Running(watch::Receiver<Option<Outcome>>),
    Done(Outcome),
}

#[derive(Debug)]
struct Entry {
    fingerprint: [u8; 32],
    /// The attempt that holds the slot.
    attempt: u64,
    /// When the attempt began (running) or ended (done).
    at: Instant,
    state: State,
}

#[derive(Debug, Default)]
struct Registry {
    entries: Mutex<HashMap<(TenantId, String), Entry>>,
    /// Numbers attempts.
    attempts: std::sync::atomic::AtomicU64,
    config: IdempotencyConfig,
}

impl Registry {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<(TenantId, String), Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an attempt's outcome, unless a later attempt holds the slot now.
    fn finish(&self, slot: &(TenantId, String), attempt: u64, outcome: Outcome) {
        if let Some(entry) = self
            .entries()
            .get_mut(slot)
            .filter(|e| e.attempt == attempt)
        {
            entry.at = Instant::now();
            entry.state = State::Done(outcome);
        }
    }

    /// Forgets an attempt that stored nothing, unless a later attempt holds the slot now.
    fn forget(&self, slot: &(TenantId, String), attempt: u64) {
        let mut entries = self.entries();
        let running = |e: &Entry| e.attempt == attempt && matches!(e.state, State::Running(_));
        if entries.get(slot).is_some_and(running) {
            entries.remove(slot);
        }
    }

    /// Drops outcomes past the window, then the oldest while over capacity.
    fn evict(&self, entries: &mut HashMap<(TenantId, String), Entry>) {
        let window = self.config.window;
        entries.retain(|_, e| matches!(e.state, State::Running(_)) || e.at.elapsed() < window);
        while entries.len() > self.config.capacity {
            let oldest = entries
                .iter()
                .filter(|(_, e)| matches!(e.state, State::Done(_)))
                .min_by_key(|(_, e)| e.at)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(key) => entries.remove(&key),
                None => break,
            };
        }
    }
}

/// The outcomes of this process's keyed requests (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Idempotency {
    registry: Arc<Registry>,
}

impl Idempotency {
    /// A registry keeping outcomes as `config` says.
    pub fn new(config: IdempotencyConfig) -> Self {
        Self {
            registry: Arc::new(Registry {
                entries: Mutex::default(),
                attempts: Default::default(),
                config,
            }),
        }
    }

    /// What `tenant`'s request with `key` should do; waits while an earlier attempt with the
    /// key is still running.
    pub(crate) async fn claim(
        &self,
        tenant: TenantId,
        key: Option<RequestKey>,
    ) -> ApiResult<Claim> {
        let Some(key) = key else {
            return Ok(Claim::Run(Ticket::unkeyed()));
        };
        let slot = (tenant, key.key.clone());
        loop {
            let mut waiting = {
                let mut entries = self.registry.entries();
                self.registry.evict(&mut entries);
                let existing = entries.get(&slot).filter(|_| !key.first_attempt);
                match existing.map(|e| (e.fingerprint, &e.state)) {
                    Some((fingerprint, _)) if fingerprint != key.fingerprint => {
                        return Err(ApiError::new(
                            ErrorCode::IdempotencyKeyReused,
                            "this `Idempotency-Key` was used with another request: use a new key \
                             for a new request",
                        ));
                    }
                    Some((_, State::Running(receiver))) => receiver.clone(),
                    Some((_, State::Done(outcome))) if !outcome.failed_at_model() => {
                        return Ok(Claim::Replay(outcome.clone()));
                    }
                    resumable => {
                        let resume = resumable.is_some();
                        let (sender, receiver) = watch::channel(None);
                        let attempt = self
                            .registry
                            .attempts
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        entries.insert(
                            slot.clone(),
                            Entry {
                                fingerprint: key.fingerprint,
                                attempt,
                                at: Instant::now(),
                                state: State::Running(receiver),
                            },
                        );
                        let ticket = Ticket {
                            registry: Some(self.registry.clone()),
                            slot,
                            attempt,
                            sender,
                        };
                        return Ok(if resume {
                            Claim::Resume(ticket)
                        } else {
                            Claim::Run(ticket)
                        });
                    }
                }
            };
            // The earlier attempt is running: wait for its end (or its ticket's drop), then
            // look again.
            let _ = waiting.wait_for(Option::is_some).await;
        }
    }
}

/// The headers that make a request idempotent (`Idempotency-Key`, an SDK's attempt number),
/// as a handler extracts them; the OpenAPI document lists `Idempotency-Key`.
#[derive(Debug, Clone, Default)]
pub(crate) struct RetryHeaders(pub(crate) HeaderMap);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for RetryHeaders {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let mut headers = HeaderMap::new();
        for name in [IDEMPOTENCY_KEY, SDK_RETRY_COUNT] {
            if let Some(value) = parts.headers.get(name) {
                headers.insert(name, value.clone());
            }
        }
        Ok(Self(headers))
    }
}

impl aide::OperationInput for RetryHeaders {
    fn operation_input(
        ctx: &mut aide::generate::GenContext,
        operation: &mut aide::openapi::Operation,
    ) {
        use aide::openapi::{
            HeaderStyle, Parameter, ParameterData, ParameterSchemaOrContent, SchemaObject,
        };
        let parameter = Parameter::Header {
            parameter_data: ParameterData {
                name: "Idempotency-Key".to_owned(),
                description: Some(
                    "Makes retries of this request one request: a retry with the same key gets the \
                     first attempt's step (header `Idempotent-Replayed: true`), or resumes it if it \
                     failed at the model; the user's message is stored once. Kept for an hour, per \
                     tenant."
                        .to_owned(),
                ),
                required: false,
                deprecated: None,
                format: ParameterSchemaOrContent::Schema(SchemaObject {
                    json_schema: schemars::json_schema!({
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 255,
                        "pattern": "^[!-~]+$"
                    }),
                    external_docs: None,
                    example: None,
                }),
                example: None,
                examples: Default::default(),
                explode: None,
                extensions: Default::default(),
            },
            style: HeaderStyle::Simple,
        };
        aide::operation::add_parameters(ctx, operation, [parameter]);
    }
}

/// A response that may replay an earlier attempt's (then marked `Idempotent-Replayed: true`).
#[derive(Debug)]
pub(crate) struct Answer<T> {
    pub(crate) body: T,
    pub(crate) replayed: bool,
}

impl<T: axum::response::IntoResponse> axum::response::IntoResponse for Answer<T> {
    fn into_response(self) -> axum::response::Response {
        let mut response = self.body.into_response();
        if self.replayed {
            response
                .headers_mut()
                .insert(REPLAYED, axum::http::HeaderValue::from_static("true"));
        }
        response
    }
}

impl<T: aide::OperationOutput> aide::OperationOutput for Answer<T> {
    type Inner = T::Inner;

    fn operation_response(
        ctx: &mut aide::generate::GenContext,
        operation: &mut aide::openapi::Operation,
    ) -> Option<aide::openapi::Response> {
        T::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut aide::generate::GenContext,
        operation: &mut aide::openapi::Operation,
    ) -> Vec<(Option<aide::openapi::StatusCode>, aide::openapi::Response)> {
        T::inferred_responses(ctx, operation)
    }
}
