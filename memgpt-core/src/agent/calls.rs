//! Calling functions from the agent: the calls of one model response under the step's rules
//! and approvals ([`Agent::run_calls`]), one call with its result message and record, and
//! [`Agent::call`] (a function run as if the model had called it, outside any step). The
//! checks and the running itself are the function runtime's ([`run_call`]).

use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::{Instrument, debug};

use super::run::StepRun;
use super::{Agent, FunctionCallRecord, Rollback};
use crate::config::LoopStyle;
use crate::error::Result;
use crate::function::{CallLimits, FunctionContext, FunctionReturn, Messaging, run_call};
use crate::message::{Message, ToolCall};
use crate::rules::StepRules;

/// What the calls of one model response ask of the loop.
#[derive(Debug, Default)]
pub(super) struct Turn {
    /// A call failed or was refused: the model gets control back.
    pub(super) failed: bool,
    /// A call asked for a heartbeat (or a `Continue` rule applies).
    pub(super) heartbeat: bool,
    /// The until-reply loop: the model called a terminal function.
    pub(super) replied: bool,
    /// A `Terminal` rule's function ran.
    pub(super) ended_by: Option<String>,
    /// A call that waits for approval.
    pub(super) paused: Option<ToolCall>,
}

/// A person's verdict on a call that waited for approval.
#[derive(Debug)]
pub(super) enum Decision {
    Approved,
    Denied(Option<String>),
}

impl Decision {
    /// The verdict of an approval event.
    pub(super) fn of(approve: bool, reason: Option<String>) -> Self {
        if approve {
            Decision::Approved
        } else {
            Decision::Denied(reason)
        }
    }
}

impl Agent {
    /// Runs the calls of one model response in order (refusing what the rules forbid, pausing
    /// on a call that needs approval) and says what they ask of the loop. `decision` is a
    /// person's verdict on the first call (which was waiting for it).
    pub(super) async fn run_calls(
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
        self.embed_backlog().await;
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
        let archival_changed = !run.writes.passages.is_empty() || !run.writes.retired.is_empty();
        if memory_changed || pause.is_some() || archival_changed {
            let now = run.now(guard.agent.rt.clock.as_ref());
            let archival = super::ArchivalChanges {
                added: std::mem::take(&mut run.writes.passages),
                retired: std::mem::take(&mut run.writes.retired),
                ..Default::default()
            };
            guard
                .agent
                .commit_with(now, Vec::new(), Vec::new(), archival)
                .await?;
        }
        guard.keep();
        Ok(record)
    }

    /// Appends an error result for a call that is not run (a tool rule forbids it, or the step
    /// already ended), so every call keeps its result.
    pub(super) fn refuse_call(&mut self, run: &mut StepRun, call: &ToolCall, why: String) {
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
        let limits = CallLimits {
            max_argument_bytes: self.state.config.max_function_argument_bytes,
            max_output_chars: self.state.config.max_function_output_chars,
            fill_heartbeat: self.state.config.loop_style == LoopStyle::UntilReply,
        };
        let recall_messages = self.context.counts().recall;
        let stats = self.context.stats();
        let memory_budget = self
            .state
            .config
            .memory_budget(stats.system_tokens + stats.tools_tokens);
        let waiting = std::mem::take(&mut run.waiting);
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
            embedding_backlog: self.embedding_backlog,
            messaging: Messaging {
                messenger: self.rt.messenger.as_deref(),
                name: &self.state.name,
                hops: run.hops,
                waiting: &waiting,
            },
            memory_budget,
        };
        let span = super::telemetry::tool_span(&call.name, &call.id);
        let result = run_call(&self.rt.functions, call, limits, &mut ctx)
            .instrument(span.clone())
            .await;
        super::telemetry::record_tool(&span, &result);
        run.waiting = waiting;
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

    /// Shows the step's archival inserts in the context's counts.
    pub(super) fn sync_archival_count(&mut self, run: &StepRun) {
        let mut counts = self.context.counts();
        counts.archival = self.committed_passages + run.writes.passages.len() as u64;
        self.context.set_counts(counts);
    }
}
