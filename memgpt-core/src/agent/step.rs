//! The agent loop: one event in, a chain of LLM calls and function executions, one commit out.

use std::any::Any;
use std::future::poll_fn;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tracing::{Instrument, debug, info_span, warn};

use super::{
    Agent, Event, EventKind, FunctionCallRecord, Rollback, StepProgress, StepRecord, StepTimings,
    StopReason,
};
use crate::config::LoopStyle;
use crate::error::{Error, Result};
use crate::function::HEARTBEAT;
use crate::function::{BoxFuture, FunctionContext, FunctionReturn, StepWrites};
use crate::ids::MessageId;
use crate::llm::{ToolSchema, Usage};
use crate::message::{Message, MessageKind, ToolCall};
use crate::paging::{FlushRecord, Pager};
use crate::queue::Pressure;
use crate::rules::StepRules;
use crate::store::{Page, PendingApproval, RecallQuery, json_holds_nul, storable};
use crate::time::{Clock, format_time};

/// The heartbeat after a function requested one.
const HEARTBEAT_REQUESTED: &str = "[automated, hidden from the user] Function called with request_heartbeat=true; you have control again.";
/// The heartbeat after a failed function call.
const HEARTBEAT_FAILED: &str = "[automated, hidden from the user] A function call failed; you have control again. Read the error and correct the call.";

/// What the calls of one model response ask of the loop.
#[derive(Debug, Default)]
struct Turn {
    /// A call failed or was refused: the model gets control back.
    failed: bool,
    /// A call asked for a heartbeat (or a `Continue` rule applies).
    heartbeat: bool,
    /// The until-reply loop: the model called a terminal function.
    replied: bool,
    /// A `Terminal` rule's function ran.
    ended_by: Option<String>,
    /// A call that waits for approval.
    paused: Option<ToolCall>,
}

/// Where a step's chain of model calls stands.
struct Chain {
    /// The event that started the step (for a resumed step, the message holding the call
    /// that waited for approval): never evicted during the step.
    event_id: MessageId,
    /// Where the current turn begins in the step's messages: the event, later the newest
    /// assistant message. Everything from there on is what the model must read next, so no
    /// flush may evict it.
    turn_start: usize,
    /// Model responses so far (against the chain limit).
    responses: usize,
    /// Whether a context overflow was already answered with a forced flush and a retry.
    overflow_retried: bool,
}

/// What one model call came to.
enum ModelTurn {
    /// Its calls ran (or were refused, or one waits for approval).
    Ran(Turn),
    /// The context overflowed and was flushed: call the model again.
    Retry,
    /// The step ends.
    Stop(StopReason),
}

/// A person's verdict on a call that waited for approval.
#[derive(Debug)]
enum Decision {
    Approved,
    Denied(Option<String>),
}

/// Below this many free tokens for messages, the context counts as full.
const MIN_MESSAGE_ROOM: usize = 64;

/// What a step accumulates before it commits.
struct StepRun {
    /// The event's time, if it was given (replays); otherwise the clock is read per message.
    fixed_time: Option<DateTime<Utc>>,
    started: Instant,
    messages: Vec<Message>,
    writes: StepWrites,
    function_calls: Vec<FunctionCallRecord>,
    llm_calls: usize,
    usage: Usage,
    pressure_warning: bool,
    flushes: Vec<FlushRecord>,
    timings: StepTimings,
}

impl StepRun {
    fn new(fixed_time: Option<DateTime<Utc>>) -> Self {
        Self {
            fixed_time,
            started: Instant::now(),
            messages: Vec::new(),
            writes: StepWrites::default(),
            function_calls: Vec::new(),
            llm_calls: 0,
            usage: Usage::default(),
            pressure_warning: false,
            flushes: Vec::new(),
            timings: StepTimings::default(),
        }
    }

    fn now(&self, clock: &dyn Clock) -> DateTime<Utc> {
        self.fixed_time.unwrap_or_else(|| clock.now())
    }
}

impl Agent {
    /// Runs one step: handles `event`, follows heartbeats, and commits everything atomically.
    ///
    /// Returns the step's record. Provider failures (after the provider's own retries) end the
    /// step with [`StopReason::ProviderError`] and what happened before them is still
    /// committed, the event (the user's message) first: it is never lost and never needs
    /// resending, and the next step carries on from it. An `Err` means nothing was stored (storage failure, oversize input, embedding
    /// failure of an upload) and the agent is unchanged; the same happens if the returned
    /// future is dropped before it completes.
    pub async fn step(&mut self, event: impl Into<Event>) -> Result<StepRecord> {
        let event = event.into();
        let span = info_span!("step", agent = %self.id(), event = event.kind.label());
        async {
            // Only one step of this agent at a time, across processes where the store can lock.
            let lease = self.rt.storage.agents.lock_agent(self.id()).await?;
            let result = self.step_leased(event).await;
            if let Err(e) = lease.release().await {
                warn!(error = %e, "could not release the agent's step lock");
            }
            result
        }
        .instrument(span)
        .await
    }

    async fn step_leased(&mut self, event: Event) -> Result<StepRecord> {
        self.sync_with_store().await?;
        let guard = Rollback::new(self);
        let record = guard.agent.run_step(event).await?;
        guard.keep();
        Ok(record)
    }

    async fn run_step(&mut self, event: Event) -> Result<StepRecord> {
        let mut run = StepRun::new(event.at);
        let label = event.kind.label();
        let now = run.now(self.rt.clock.as_ref());

        if let Some(stop) = self.check_approval_gate(&event)? {
            return Ok(self.record(run, label, Vec::new(), stop));
        }
        let paused_until = self
            .state
            .heartbeats_paused_until
            .filter(|until| now < *until);
        if let (EventKind::Timer { .. }, Some(until)) = (&event.kind, paused_until) {
            debug!(until = %until, "timer ignored: timers are paused");
            return Ok(self.record(run, label, Vec::new(), StopReason::TimersPaused));
        }

        let limit = self.state.config.max_chain_length.max(1);
        let tool_rules = self.state.config.tool_rules.clone();
        let until_reply = self.state.config.loop_style == LoopStyle::UntilReply;
        let (event_id, mut rules, responses, mut resumed) =
            match &event.kind {
                EventKind::Approval {
                    call_id,
                    approve,
                    reason,
                } => {
                    // The paused step goes on: the decided call first, under the same rules (the
                    // gate above checked that this call is the one waiting).
                    let pending = self.state.pending_approval.take().ok_or_else(|| {
                        Error::NoPendingApproval {
                            call_id: call_id.clone(),
                        }
                    })?;
                    let mut rules = StepRules::resume(&tool_rules, pending.rules);
                    let decision = if *approve {
                        Decision::Approved
                    } else {
                        Decision::Denied(reason.clone())
                    };
                    let calls = [pending.call];
                    let turn = self
                        .run_calls(&mut run, &mut rules, &calls, Some(decision))
                        .await;
                    (pending.message, rules, pending.llm_calls, Some(turn))
                }
                _ => {
                    let message = self.event_message(&event, &mut run, now).await?;
                    // Refused before any LLM call rather than by the commit at the end.
                    storable(&message.text, || "the event".into())?;
                    for passage in &run.writes.passages {
                        storable(&passage.text, || "an uploaded document".into())?;
                    }
                    self.check_fits(&message)?;
                    let event_id = message.id;
                    self.push(&mut run, message);
                    (event_id, StepRules::new(&tool_rules), 0, None)
                }
            };
        let mut chain = Chain {
            event_id,
            turn_start: 0,
            responses,
            overflow_retried: false,
        };
        let stop = loop {
            let turn = match resumed.take() {
                Some(turn) => turn,
                None => match self.model_turn(&mut run, &mut rules, &mut chain).await {
                    ModelTurn::Ran(turn) => turn,
                    ModelTurn::Retry => continue,
                    ModelTurn::Stop(stop) => break stop,
                },
            };
            let Turn {
                failed,
                heartbeat,
                replied,
                ended_by,
                ..
            } = turn;
            if ended_by.is_some() {
                break StopReason::EndTurn;
            }
            let missing = rules.missing_before_exit();
            // The paper's loop goes on when asked to; the until-reply loop until the model replies.
            let goes_on = heartbeat || (until_reply && !replied);
            if !failed && !goes_on && missing.is_empty() {
                break StopReason::EndTurn;
            }
            if chain.responses >= limit {
                break StopReason::ChainLimit { limit };
            }
            if until_reply && (failed || goes_on) {
                // No heartbeat messages: the function results are the model's next input.
                continue;
            }
            let reason = if failed {
                HEARTBEAT_FAILED.to_owned()
            } else if heartbeat {
                HEARTBEAT_REQUESTED.to_owned()
            } else {
                format!(
                    "[automated, hidden from the user] The step cannot end yet: call {} first.",
                    crate::rules::list(&missing)
                )
            };
            let now = run.now(self.rt.clock.as_ref());
            self.push(
                &mut run,
                Message::new(self.id(), MessageKind::Heartbeat, reason, now),
            );
        };

        if let Some(pause) = run.writes.pause_until.take() {
            self.state.heartbeats_paused_until = pause;
        }
        let now = run.now(self.rt.clock.as_ref());
        let messages = std::mem::take(&mut run.messages);
        let passages = std::mem::take(&mut run.writes.passages);
        let embeddings = if self.state.config.defer_message_embeddings {
            Vec::new()
        } else {
            let started = Instant::now();
            let embeddings = self.embed_for_commit(&messages).await;
            run.timings.embedding = started.elapsed();
            embeddings
        };
        let started = Instant::now();
        let messages = self.commit(now, messages, embeddings, passages).await?;
        run.timings.commit = started.elapsed();
        Ok(self.record(run, label, messages, stop))
    }

    /// One model call of the step and the calls it makes: the pressure check, the request
    /// (offering only what the rules allow), the provider's answer, the assistant message and
    /// its function calls.
    async fn model_turn(
        &mut self,
        run: &mut StepRun,
        rules: &mut StepRules<'_>,
        chain: &mut Chain,
    ) -> ModelTurn {
        let protected: Vec<MessageId> = std::iter::once(chain.event_id)
            .chain(run.messages[chain.turn_start..].iter().map(|m| m.id))
            .collect();
        self.relieve_pressure(run, &protected).await;
        let mut request = self.request();
        if !rules.is_empty() {
            // By construction: the model is offered only what the rules allow now.
            let allowed: Vec<String> = rules
                .allowed(request.tools.iter().map(|t| t.name.as_str()))
                .into_iter()
                .map(str::to_owned)
                .collect();
            if allowed.len() < request.tools.len() {
                let offered: Vec<ToolSchema> = request
                    .tools
                    .iter()
                    .filter(|t| allowed.contains(&t.name))
                    .cloned()
                    .collect();
                request.tools = offered.into();
            }
        }
        let started = Instant::now();
        let pager = Self::pager(&self.rt);
        let attention = pager
            .wants_attention()
            .then(|| self.rt.provider.as_attention())
            .flatten();
        let result = if let Some(attention) = attention {
            match attention.complete_with_attention(&request).await {
                Ok((response, weights)) => {
                    if let Some(weights) = weights {
                        pager.observe_attention(
                            &mut self.context,
                            &weights,
                            request.messages.len(),
                        );
                    }
                    Ok(response)
                }
                Err(e) => Err(e),
            }
        } else if let Some(observer) = &self.rt.observer {
            // Someone is watching: stream, so the reply shows while it is written.
            let stream = std::sync::Mutex::new(super::reply_stream::ReplyStream::default());
            let sink = |delta: crate::llm::StreamDelta<'_>| {
                let pieces = match stream.lock() {
                    Ok(mut stream) => stream.feed(delta),
                    Err(_) => return,
                };
                if let Some(text) = pieces.thinking {
                    observer.observe(StepProgress::ThinkingDelta(text));
                }
                if !pieces.reply.is_empty() {
                    observer.observe(StepProgress::ReplyDelta(&pieces.reply));
                }
            };
            crate::llm::complete_streaming(self.rt.provider.as_ref(), &request, &sink).await
        } else {
            self.rt.provider.complete(&request).await
        };
        run.timings.llm += started.elapsed();
        run.llm_calls += 1;
        let response = match result {
            Ok(response) => response,
            Err(e) if e.is_context_overflow() && !chain.overflow_retried => {
                warn!(error = %e, "provider reports a context overflow: flushing and retrying once");
                chain.overflow_retried = true;
                self.flush(run, &protected, true).await;
                return ModelTurn::Retry;
            }
            Err(e) => {
                warn!(error = %e, "provider failed; ending the step");
                return ModelTurn::Stop(StopReason::ProviderError {
                    message: e.to_string(),
                    retryable: e.is_transient(),
                });
            }
        };
        chain.responses += 1;
        run.usage += response.usage;
        let calls = response.tool_calls;
        if response.content.trim().is_empty() && calls.is_empty() {
            return ModelTurn::Stop(StopReason::NoFunctionCall);
        }
        let now = run.now(self.rt.clock.as_ref());
        chain.turn_start = run.messages.len();
        // What the model sent is stored as sent, except for NUL characters, which no store
        // holds (see `without_nul`).
        let received = calls.len();
        let allowed = self.state.config.max_calls_per_response.max(1);
        let calls: Vec<ToolCall> = calls
            .into_iter()
            .take(allowed)
            .map(|call| ToolCall {
                id: without_nul(call.id),
                name: without_nul(call.name),
                arguments: without_nul(call.arguments),
            })
            .collect();
        self.push(
            run,
            Message::assistant(self.id(), without_nul(response.content), calls.clone(), now),
        );
        if calls.is_empty() {
            return ModelTurn::Stop(StopReason::NoFunctionCall);
        }

        let mut turn = self.run_calls(run, rules, &calls, None).await;
        if received > calls.len() {
            warn!(
                received,
                ran = calls.len(),
                "too many function calls in one response"
            );
            let now = run.now(self.rt.clock.as_ref());
            self.push(
                run,
                Message::new(
                    self.id(),
                    MessageKind::SystemAlert,
                    format!(
                        "Your last response held {received} function calls; only the first {} \
                             ran (the limit per response). The others did not run: send them in \
                             your next responses.",
                        calls.len()
                    ),
                    now,
                ),
            );
            turn.failed = true;
        }
        if let Some(call) = turn.paused.take() {
            let message = run.messages[chain.turn_start].id;
            let stop = StopReason::AwaitingApproval {
                call_id: call.id.clone(),
                function: call.name.clone(),
                arguments: call.arguments.clone(),
            };
            self.state.pending_approval = Some(PendingApproval {
                call,
                message,
                llm_calls: chain.responses,
                rules: rules.progress(),
            });
            return ModelTurn::Stop(stop);
        }
        ModelTurn::Ran(turn)
    }

    /// Runs the calls of one model response in order (refusing what the rules forbid, pausing
    /// on a call that needs approval) and says what they ask of the loop. `decision` is a
    /// person's verdict on the first call (which was waiting for it).
    async fn run_calls(
        &mut self,
        run: &mut StepRun,
        rules: &mut StepRules<'_>,
        calls: &[ToolCall],
        mut decision: Option<Decision>,
    ) -> Turn {
        let until_reply = self.state.config.loop_style == LoopStyle::UntilReply;
        let mut turn = Turn::default();
        for call in calls {
            if let Some(terminal) = &turn.ended_by {
                let why = format!("not run: the step ended with `{terminal}`");
                self.refuse_call(run, call, why);
                continue;
            }
            if let Some(paused) = &turn.paused {
                let why = format!(
                    "not run: the step paused for approval of `{}`; call it again once that is settled",
                    paused.name
                );
                self.refuse_call(run, call, why);
                turn.failed = true;
                continue;
            }
            let decided = decision.take();
            if decided.is_none() {
                if let Some(why) = rules.forbidden(&call.name) {
                    let why = format!("`{}` may not be called now: {why}", call.name);
                    self.refuse_call(run, call, why);
                    turn.failed = true;
                    continue;
                }
                if rules.requires_approval(&call.name) {
                    debug!(function = %call.name, "call waits for approval");
                    turn.paused = Some(call.clone());
                    continue;
                }
            }
            if let Some(Decision::Denied(reason)) = decided {
                let why = match reason {
                    Some(reason) => {
                        format!("the user denied this call of `{}`: {reason}", call.name)
                    }
                    None => format!("the user denied this call of `{}`", call.name),
                };
                self.refuse_call(run, call, why);
                turn.failed = true;
                continue;
            }
            let result = self.call_function(run, call).await;
            let output = match &result.result {
                Ok(text) | Err(text) => text.as_str(),
            };
            rules.called(&call.name, output);
            turn.failed |= result.is_failure();
            turn.heartbeat |=
                rules.continues(&call.name) || (!until_reply && result.request_heartbeat);
            turn.replied |= until_reply
                && !result.is_failure()
                && self
                    .rt
                    .functions
                    .get(&call.name)
                    .is_some_and(|f| f.is_terminal());
            if rules.is_terminal(&call.name) {
                turn.ended_by = Some(call.name.clone());
            }
        }
        turn
    }

    /// While a call waits for approval, only its approval or denial may step the agent: a
    /// timer is skipped (the returned stop reason), anything else is refused. An approval
    /// when nothing waits, or of another call, is refused too.
    fn check_approval_gate(&self, event: &Event) -> Result<Option<StopReason>> {
        let pending = self.state.pending_approval.as_ref();
        match (&event.kind, pending) {
            (EventKind::Approval { call_id, .. }, Some(p)) if *call_id == p.call.id => Ok(None),
            (EventKind::Approval { call_id, .. }, _) => Err(Error::NoPendingApproval {
                call_id: call_id.clone(),
            }),
            (EventKind::Timer { .. }, Some(p)) => {
                debug!(function = %p.call.name, "timer skipped: a call waits for approval");
                Ok(Some(StopReason::AwaitingApproval {
                    call_id: p.call.id.clone(),
                    function: p.call.name.clone(),
                    arguments: p.call.arguments.clone(),
                }))
            }
            (_, Some(p)) => Err(Error::ApprovalPending {
                call_id: p.call.id.clone(),
                function: p.call.name.clone(),
            }),
            (_, None) => Ok(None),
        }
    }

    /// The message an event puts into the queue (and the passages an upload adds).
    async fn event_message(
        &mut self,
        event: &Event,
        run: &mut StepRun,
        now: DateTime<Utc>,
    ) -> Result<Message> {
        let id = self.id();
        Ok(match &event.kind {
            EventKind::UserMessage { text, name } => {
                let mut message = Message::new(id, MessageKind::User, text.clone(), now);
                message.name = name.clone();
                message
            }
            EventKind::SystemAlert { text } => {
                Message::new(id, MessageKind::SystemAlert, text.clone(), now)
            }
            EventKind::Login => {
                let text = match self.last_login().await? {
                    Some(at) => format!(
                        "The user logged in. Their previous login was at {}.",
                        format_time(at)
                    ),
                    None => "The user logged in for the first time.".to_owned(),
                };
                Message::new(id, MessageKind::Login, text, now)
            }
            EventKind::DocumentUpload { name, text } => {
                let mut metadata = serde_json::Map::new();
                metadata.insert("source".into(), Value::String(name.clone()));
                let passages = self
                    .passage_writer()
                    .write(id, text, metadata, true, now)
                    .await
                    .map_err(|e| Error::from_passages(name, e))?;
                let count = passages.len();
                run.writes.passages.extend(passages);
                self.sync_archival_count(run);
                Message::new(
                    id,
                    MessageKind::DocumentUpload,
                    format!(
                        "The user uploaded the document \"{name}\" ({} characters) into your archival memory as {count} \
                         passages. Search it with archival_memory_search.",
                        text.chars().count()
                    ),
                    now,
                )
            }
            // Handled by `run_step` before any event message is made.
            EventKind::Approval { call_id, .. } => {
                return Err(Error::NoPendingApproval {
                    call_id: call_id.clone(),
                });
            }
            EventKind::Timer { reason } => Message::new(
                id,
                MessageKind::Timer,
                format!(
                    "Timer: {reason}. You may act on your own now; the user may not be present."
                ),
                now,
            ),
        })
    }

    async fn last_login(&self) -> Result<Option<DateTime<Utc>>> {
        let mut query = RecallQuery::kinds([MessageKind::Login], Page::first(1));
        let first = self.rt.storage.recall.search(self.id(), &query).await?;
        if first.total == 0 {
            return Ok(None);
        }
        query.page = Page::new(first.total - 1, 1);
        let last = self.rt.storage.recall.search(self.id(), &query).await?;
        Ok(last.hits.first().map(|hit| hit.item.created_at))
    }

    /// Rejects an event message that cannot fit the window even with an empty queue.
    fn check_fits(&self, message: &Message) -> Result<()> {
        let tokens = self.rt.counter.count_message(&message.to_chat());
        let stats = self.context.stats();
        let fixed_tokens = stats.total_tokens - stats.queue_tokens;
        let available = stats.window.saturating_sub(fixed_tokens);
        if available < MIN_MESSAGE_ROOM {
            return Err(Error::ContextFull {
                fixed_tokens,
                budget: stats.window,
            });
        }
        if tokens > available {
            return Err(Error::MessageTooLarge { tokens, available });
        }
        Ok(())
    }

    /// Appends a message to the queue and to the step's pending recall writes.
    fn push(&mut self, run: &mut StepRun, message: Message) {
        if let Some(observer) = &self.rt.observer {
            observer.observe(StepProgress::Message(&message));
        }
        run.messages.push(message.clone());
        self.context
            .queue_mut()
            .push(Arc::new(message), self.rt.counter.as_ref());
        let mut counts = self.context.counts();
        counts.recall += 1;
        self.context.set_counts(counts);
    }

    fn sync_archival_count(&mut self, run: &StepRun) {
        let mut counts = self.context.counts();
        counts.archival = self.committed_passages + run.writes.passages.len() as u64;
        self.context.set_counts(counts);
    }

    /// The pager for this agent's parts.
    fn pager(rt: &super::Services) -> Pager<'_> {
        Pager::new(&rt.manager, rt.summarizer.as_ref(), rt.embedder.as_deref())
    }

    /// The queue as the eviction policy sees it, what a flush would evict now, and where the
    /// policy warns and flushes (nothing changes).
    pub fn paging_preview(&self) -> crate::paging::PagingPreview {
        Self::pager(&self.rt).preview(&self.context)
    }

    /// Warns once at the policy's warning level; flushes at its flush level.
    async fn relieve_pressure(&mut self, run: &mut StepRun, protected: &[MessageId]) {
        match Self::pager(&self.rt).pressure(&self.context) {
            Pressure::Flush => self.flush(run, protected, false).await,
            Pressure::Warn if !self.state.pressure_warned => {
                self.state.pressure_warned = true;
                run.pressure_warning = true;
                let fraction = self.context.stats().fraction;
                let text = format!(
                    "Memory pressure: your context is {:.0}% full. Older messages will soon be evicted: a summary is \
                     kept and the conversation stays searchable, but save anything you will need (including function \
                     results) to core memory or archival memory now.",
                    fraction * 100.0
                );
                debug!(fraction, "memory-pressure warning");
                let now = run.now(self.rt.clock.as_ref());
                self.push(
                    run,
                    Message::new(self.id(), MessageKind::SystemAlert, text, now),
                );
            }
            _ => {}
        }
    }

    /// Pages out what the policy chooses (see [`Pager::flush`]).
    async fn flush(&mut self, run: &mut StepRun, protected: &[MessageId], forced: bool) {
        let clock = self.rt.clock.as_ref();
        let fixed_time = run.fixed_time;
        let now = || fixed_time.unwrap_or_else(|| clock.now());
        let pager = Self::pager(&self.rt);
        if let Some(flush) = pager.flush(&mut self.context, protected, forced, now).await {
            run.timings.summarizer += flush.summarizer_time;
            self.state.pressure_warned = false;
            if let Some(observer) = &self.rt.observer {
                observer.observe(StepProgress::Flush(&flush.record));
            }
            run.flushes.push(flush.record);
        }
    }

    /// Runs one of the agent's functions as if the LLM had called it, outside any step: the
    /// same argument validation (`arguments` is the JSON object the LLM would send, including
    /// `request_heartbeat` where the function takes it), the same context and the same output
    /// the LLM would read, in [`FunctionCallRecord::output`].
    ///
    /// Nothing is added to recall storage or the FIFO queue. What the function writes (archival
    /// inserts, memory edits, a timer pause) is committed as a step's writes are; a failed
    /// commit leaves the agent unchanged. Search results count as uses, as in a step. Useful to
    /// inspect memory the way the agent sees it (`conversation_search`,
    /// `archival_memory_search`), in functions, tests and evaluations.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
    /// use std::sync::Arc;
    /// use memgpt_core::Agent;
    /// use memgpt_core::testing::ScriptedProvider;
    /// use serde_json::json;
    ///
    /// let mut agent = Agent::builder().provider(Arc::new(ScriptedProvider::new())).build().await?;
    /// let record = agent
    ///     .call("conversation_search", json!({"query": "cats", "request_heartbeat": false}))
    ///     .await?;
    /// assert!(record.ok);
    /// assert!(record.output.starts_with("(ranked by words only"), "{}", record.output);
    /// # Ok(()) }
    /// ```
    pub async fn call(&mut self, function: &str, arguments: Value) -> Result<FunctionCallRecord> {
        self.sync_with_store().await?;
        let guard = Rollback::new(self);
        let mut run = StepRun::new(None);
        let call = ToolCall {
            id: "direct".to_owned(),
            name: function.to_owned(),
            arguments: arguments.to_string(),
        };
        let (_, record, memory_changed) = guard.agent.execute_call(&mut run, &call).await;
        let pause = run.writes.pause_until.take();
        if let Some(pause) = pause {
            guard.agent.state.heartbeats_paused_until = pause;
        }
        if memory_changed || pause.is_some() || !run.writes.passages.is_empty() {
            let now = run.now(guard.agent.rt.clock.as_ref());
            let passages = std::mem::take(&mut run.writes.passages);
            guard
                .agent
                .commit(now, Vec::new(), Vec::new(), passages)
                .await?;
        }
        guard.keep();
        Ok(record)
    }

    /// Appends an error result for a call that is not run (a tool rule forbids it, or the step
    /// already ended), so every call keeps its result.
    fn refuse_call(&mut self, run: &mut StepRun, call: &ToolCall, why: String) {
        let now = run.now(self.rt.clock.as_ref());
        run.function_calls.push(FunctionCallRecord {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            ok: false,
            output: why.clone(),
            request_heartbeat: false,
            duration: Duration::ZERO,
        });
        let message =
            Message::function_result(self.id(), call.id.clone(), call.name.clone(), Err(why), now);
        self.push(run, message);
    }

    /// Validates and runs one function call and appends its result. Never fails: every problem
    /// becomes an error result the LLM reads.
    async fn call_function(&mut self, run: &mut StepRun, call: &ToolCall) -> FunctionReturn {
        let now = run.now(self.rt.clock.as_ref());
        let (result, record, _) = self.execute_call(run, call).await;
        run.function_calls.push(record);
        let message = Message::function_result(
            self.id(),
            call.id.clone(),
            call.name.clone(),
            result.result.clone(),
            now,
        );
        self.push(run, message);
        result
    }

    /// Validates and runs one function call: its result (capped), its record, and whether it
    /// changed working context.
    async fn execute_call(
        &mut self,
        run: &mut StepRun,
        call: &ToolCall,
    ) -> (FunctionReturn, FunctionCallRecord, bool) {
        let started = Instant::now();
        let now = run.now(self.rt.clock.as_ref());
        let result = match self.rt.functions.get(&call.name).cloned() {
            None => FunctionReturn::failed(format!(
                "unknown function `{}`; the available functions are: {}",
                call.name,
                self.rt.functions.names().collect::<Vec<_>>().join(", ")
            )),
            Some(_) if call.arguments.len() > self.state.config.max_function_argument_bytes => {
                FunctionReturn::failed(format!(
                    "the arguments of `{}` are {} bytes, over the limit of {} bytes per call \
                     (AgentConfig::max_function_argument_bytes): split the content over several \
                     smaller calls",
                    call.name,
                    call.arguments.len(),
                    self.state.config.max_function_argument_bytes
                ))
            }
            Some(function) => match parse_raw_arguments(&call.name, &call.arguments)
                .map(|arguments| self.with_heartbeat_flag(&call.name, arguments))
            {
                Err(message) => FunctionReturn::failed(message),
                Ok(arguments) if json_holds_nul(&arguments) => FunctionReturn::failed(format!(
                    "the arguments of `{}` contain a NUL character (\\u0000), which memory cannot \
                     store: send the text without it",
                    call.name
                )),
                Ok(arguments) => {
                    let recall_messages = self.context.counts().recall;
                    let mut ctx = FunctionContext {
                        agent_id: self.state.id,
                        now,
                        memory: self.context.memory_mut(),
                        storage: &self.rt.storage,
                        embedder: self.rt.embedder.as_deref(),
                        counter: self.rt.counter.as_ref(),
                        writes: &mut run.writes,
                        settings: &self.rt.settings,
                        extensions: &self.rt.extensions,
                        committed_passages: self.committed_passages,
                        recall_messages,
                    };
                    match catch_unwind(function.call(&mut ctx, arguments)).await {
                        Ok(result) => result,
                        Err(panic) => {
                            let message = panic_message(panic.as_ref());
                            warn!(function = %call.name, %message, "function panicked");
                            FunctionReturn::failed(format!(
                                "function `{}` crashed: {message}",
                                call.name
                            ))
                        }
                    }
                }
            },
        };
        let limit = self.state.config.max_function_output_chars;
        let result = FunctionReturn {
            result: match result.result {
                Ok(text) => Ok(cap_output(without_nul(text), limit)),
                Err(text) => Err(cap_output(without_nul(text), limit)),
            },
            ..result
        };
        let memory_changed = self.context.memory_changed(now);
        self.sync_archival_count(run);
        for id in std::mem::take(&mut run.writes.used) {
            self.context.queue_mut().touch(id);
        }
        let duration = started.elapsed();
        run.timings.functions += duration;
        debug!(function = %call.name, ok = !result.is_failure(), heartbeat = result.request_heartbeat, "function call");
        let record = FunctionCallRecord {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            ok: !result.is_failure(),
            output: match &result.result {
                Ok(text) | Err(text) => text.clone(),
            },
            request_heartbeat: result.request_heartbeat,
            duration,
        };
        (result, record, memory_changed)
    }

    /// In the until-reply loop the model is not offered `request_heartbeat`, but functions
    /// declared with it still require it: it is filled in (`false`; the loop does not read it)
    /// where the model left it out.
    fn with_heartbeat_flag(&self, function: &str, mut arguments: Value) -> Value {
        if self.state.config.loop_style != LoopStyle::UntilReply {
            return arguments;
        }
        let takes_flag = self
            .rt
            .functions
            .schema(function)
            .and_then(|s| s.parameters.get("properties"))
            .is_some_and(|p| p.get(HEARTBEAT).is_some());
        if let Value::Object(map) = &mut arguments
            && takes_flag
        {
            map.entry(HEARTBEAT).or_insert(Value::Bool(false));
        }
        arguments
    }

    fn record(
        &self,
        run: StepRun,
        event: &str,
        messages: Vec<Message>,
        stop_reason: StopReason,
    ) -> StepRecord {
        let mut timings = run.timings;
        timings.total = run.started.elapsed();
        StepRecord {
            agent_id: self.id(),
            event: event.to_owned(),
            messages,
            replies: run.writes.replies,
            function_calls: run.function_calls,
            llm_calls: run.llm_calls,
            usage: run.usage,
            pressure_warning: run.pressure_warning,
            flushes: run.flushes,
            timings,
            stop_reason,
            context: self.context.stats(),
        }
    }
}

/// Cuts a function result to `max_chars` characters, saying how much was left out.
fn cap_output(text: String, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text,
        Some((cut, _)) => {
            let left_out = text[cut..].chars().count();
            format!(
                "{}... (truncated: {left_out} more characters; ask for less, e.g. a narrower query or the next page)",
                &text[..cut]
            )
        }
    }
}

/// Parses the model's raw arguments. Empty arguments mean `{}`; a JSON string holding a JSON
/// object (double-encoded arguments, a common model mistake) is unwrapped.
fn parse_raw_arguments(function: &str, raw: &str) -> Result<Value, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(value @ Value::Object(_)) => Ok(value),
            _ => Ok(Value::String(inner)),
        },
        Ok(value) => Ok(value),
        Err(e) => Err(format!(
            "the arguments to `{function}` are not valid JSON ({e}); send one JSON object of named arguments"
        )),
    }
}

/// `text` with each NUL character (U+0000) replaced by U+FFFD. No store can hold NUL (PostgreSQL
/// text cannot), so text the framework records on the model's or a tool's behalf (the model's
/// words and calls, function results) is cleaned rather than failing the step's commit; text
/// from the caller or in function arguments is refused with an error instead.
fn without_nul(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text
    }
}

/// Polls `future`, turning a panic into an `Err` instead of unwinding through the agent.
async fn catch_unwind<T>(
    mut future: BoxFuture<'_, T>,
) -> std::result::Result<T, Box<dyn Any + Send>> {
    poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    })
    .await
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_outputs_are_capped_with_a_note() {
        assert_eq!(cap_output("short".into(), 10), "short");
        let capped = cap_output("é".repeat(15), 10);
        assert!(capped.starts_with(&"é".repeat(10)));
        assert!(capped.contains("(truncated: 5 more characters;"));
    }

    #[test]
    fn raw_arguments_are_parsed_leniently_but_honestly() {
        assert_eq!(parse_raw_arguments("f", "").unwrap(), serde_json::json!({}));
        assert_eq!(
            parse_raw_arguments("f", r#""{\"a\":1}""#).unwrap(),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            parse_raw_arguments("f", "[1]").unwrap(),
            serde_json::json!([1])
        );
        let err = parse_raw_arguments("f", "{\"a\": 1,").unwrap_err();
        assert!(
            err.starts_with("the arguments to `f` are not valid JSON (EOF while parsing"),
            "{err}"
        );
    }
}
