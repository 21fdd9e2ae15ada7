//! The agent loop: one event in, a chain of LLM calls and function executions, one commit out.

use std::sync::Arc;
use std::time::Instant;

use tracing::{Instrument, debug, warn};

use super::calls::{Decision, Turn};
use super::run::StepRun;
use super::telemetry;
use super::{Agent, Event, EventKind, Rollback, StepProgress, StepRecord, StopReason};
use crate::config::LoopStyle;
use crate::error::{Error, Result};
use crate::function::without_nul;
use crate::ids::MessageId;
use crate::llm::{ToolSchema, complete_dispatched};
use crate::message::{Message, MessageKind, ToolCall};
use crate::rules::StepRules;
use crate::store::{PendingApproval, storable};

/// The heartbeat after a function requested one.
const HEARTBEAT_REQUESTED: &str = "[automated, hidden from the user] Function called with request_heartbeat=true; you have control again.";
/// The heartbeat after a failed function call.
const HEARTBEAT_FAILED: &str = "[automated, hidden from the user] A function call failed; you have control again. Read the error and correct the call.";

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

/// Below this many free tokens for messages, the context counts as full.
const MIN_MESSAGE_ROOM: usize = 64;

impl Agent {
    /// Runs one step: handles `event`, follows heartbeats, and commits everything atomically.
    ///
    /// Returns the step's record. Provider failures (after the provider's own retries) end the
    /// step with [`StopReason::ProviderError`] and what happened before them is still
    /// committed, the event (the user's message) first: it is never lost and must not be sent
    /// again (that would store it twice). To have the model answer it, step with
    /// [`Event::resume`], which adds no message; the next step of any kind carries on from it
    /// too. An `Err` means nothing was stored (storage failure, oversize input, embedding
    /// failure of an upload) and the agent is unchanged; the same happens if the returned
    /// future is dropped before it completes.
    pub async fn step(&mut self, event: impl Into<Event>) -> Result<StepRecord> {
        if self.rt.without_model {
            return Err(Error::Config(
                "this agent was opened without a model (AgentBuilder::without_model): it cannot step"
                    .to_owned(),
            ));
        }
        let event = event.into();
        let span =
            telemetry::step_span(&self.id().to_string(), &self.state.name, event.kind.label());
        let result = async {
            // Only one step of this agent at a time, across processes where the store can lock.
            let lease = self.rt.storage.agents.lock_agent(self.id()).await?;
            let result = self.step_leased(event).await;
            if let Err(e) = lease.release().await {
                warn!(error = %e, "could not release the agent's step lock");
            }
            result
        }
        .instrument(span.clone())
        .await;
        telemetry::record_step(&span, &result);
        result
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
        if let EventKind::AgentMessage { hops, waiting, .. } = &event.kind {
            run.hops = *hops;
            run.waiting = waiting.clone();
        }
        let label = event.kind.label();
        let now = run.now(self.rt.clock.as_ref());
        // Other agents' (and people's) edits of shared blocks are in the prompt of this step.
        run.shared_blocks_changed = self.refresh_shared_blocks_at(now).await?;
        if !run.shared_blocks_changed.is_empty() {
            debug!(blocks = ?run.shared_blocks_changed, "shared blocks changed under the agent");
        }

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
        // What earlier steps left unembedded is embedded first, so this step's searches rank it
        // by meaning too.
        run.timings.embedding += self.embed_backlog().await;

        let limit = self.state.config.max_chain_length.max(1);
        let tool_rules = self.state.config.tool_rules.clone();
        let until_reply = self.state.config.loop_style == LoopStyle::UntilReply;
        let (event_id, mut rules, responses, mut resumed) = match &event.kind {
            EventKind::Approval {
                call_id,
                approve,
                reason,
            } => {
                let decision = Decision::of(*approve, reason.clone());
                let (message, rules, llm_calls, turn) = self
                    .resume(&mut run, &tool_rules, call_id, decision)
                    .await?;
                (message, rules, llm_calls, Some(turn))
            }
            EventKind::Resume => {
                // The newest queued message (the unanswered event) is what the model reads.
                let anchor = self
                    .context
                    .queue()
                    .entries()
                    .next_back()
                    .map_or_else(MessageId::new, |e| e.message().id);
                (anchor, StepRules::new(&tool_rules), 0, None)
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
        // A consolidation's cursor moves with the step that consolidated: in the same commit.
        let cursor_before = self.state.consolidated_until;
        if let EventKind::Consolidation { until, .. } = &event.kind {
            self.state.consolidated_until = Some(*until);
        }
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

        // A consolidation the model did not carry out is read again next time: it failed at
        // the model, or ran no function at all (it answered in text instead of editing memory
        // or saying it was done with `memory_finish_edits`).
        if let EventKind::Consolidation { .. } = &event.kind {
            let worked = run.function_calls.iter().any(|c| c.ok);
            if matches!(stop, StopReason::ProviderError { .. }) || !worked {
                if !worked {
                    warn!(
                        stop = ?stop,
                        "the consolidation ran no function: its messages are read again next time"
                    );
                }
                self.state.consolidated_until = cursor_before;
            }
        }
        if let Some(pause) = run.writes.pause_until.take() {
            self.state.heartbeats_paused_until = pause;
        }
        let now = run.now(self.rt.clock.as_ref());
        let messages = std::mem::take(&mut run.messages);
        let archival = super::ArchivalChanges {
            added: std::mem::take(&mut run.writes.passages),
            retired: std::mem::take(&mut run.writes.retired),
            ..Default::default()
        };
        let embeddings = if self.state.config.defer_message_embeddings {
            self.embedding_backlog = self.rt.embedder.is_some();
            Vec::new()
        } else {
            let started = Instant::now();
            let embeddings = self.embed_for_commit(&messages).await;
            run.timings.embedding = started.elapsed();
            embeddings
        };
        let started = Instant::now();
        let messages = self
            .commit_with(now, messages, embeddings, archival)
            .await?;
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
        // Someone is watching: stream, so the reply shows while it is written.
        let observer = self.rt.observer.as_deref();
        let stream = std::sync::Mutex::new(super::reply_stream::ReplyStream::default());
        let sink = |delta: crate::llm::StreamDelta<'_>| {
            let (Some(observer), Ok(mut stream)) = (observer, stream.lock()) else {
                return;
            };
            let pieces = stream.feed(delta);
            if let Some(text) = pieces.thinking {
                observer.observe(StepProgress::ThinkingDelta(text));
            }
            if !pieces.reply.is_empty() {
                observer.observe(StepProgress::ReplyDelta(&pieces.reply));
            }
        };
        let sink = observer.map(|_| &sink as &crate::llm::StreamSink<'_>);
        let provider = self.rt.provider.as_ref();
        let model = if request.model.is_empty() {
            provider.model()
        } else {
            request.model.as_str()
        };
        let span = telemetry::chat_span(provider.provider_name(), model);
        let result = complete_dispatched(provider, &request, pager.wants_attention(), sink)
            .instrument(span.clone())
            .await;
        telemetry::record_chat(&span, result.as_ref().map(|(r, _)| r));
        let result = result.map(|(response, weights)| {
            if let Some(weights) = weights {
                pager.observe_attention(&mut self.context, &weights, request.messages.len());
            }
            response
        });
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
                    failure: crate::llm::ProviderFailure::of(&e),
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
    pub(super) fn push(&mut self, run: &mut StepRun, message: Message) {
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

    pub(super) fn record(
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
            shared_blocks_changed: run.shared_blocks_changed,
        }
    }
}
