//! [`StepRecord`]: what one step did (messages, replies, function calls, timings) and why it
//! stopped.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::context::ContextStats;
use crate::ids::AgentId;
use crate::llm::Usage;
use crate::message::Message;
use crate::paging::FlushRecord;

/// Why a step ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The agent gave control back: its functions ran without requesting a heartbeat (for
    /// example it called `send_message`).
    EndTurn,
    /// The model answered without calling a function; its text was kept as inner monologue.
    NoFunctionCall,
    /// The chain of heartbeats reached `max_chain_length` LLM calls.
    ChainLimit {
        /// The limit.
        limit: usize,
    },
    /// A timer event arrived while timers were paused; nothing ran and nothing was stored.
    TimersPaused,
    /// A call needs a person's approval ([`ToolRule::RequiresApproval`](crate::rules::ToolRule::RequiresApproval)):
    /// the step so far is committed and goes on with [`Event::approve`](crate::Event::approve)
    /// or [`Event::deny`](crate::Event::deny) of `call_id`. Until then other events are refused
    /// ([`Error::ApprovalPending`](crate::Error::ApprovalPending)) and timers are skipped.
    AwaitingApproval {
        /// The call's id.
        call_id: String,
        /// The function.
        function: String,
        /// Its JSON arguments as the model wrote them.
        arguments: String,
    },
    /// The LLM provider failed (after its retries). Everything before the failure was
    /// committed; nothing was lost.
    ProviderError {
        /// The error, as the provider reported it (for logs: it may name the provider's
        /// address or echo the request).
        message: String,
        /// Whether retrying later may succeed.
        retryable: bool,
        /// What kind of failure it was, in words fit to show a service's users.
        #[serde(default)]
        failure: crate::llm::ProviderFailure,
    },
}

/// One function call the model made, and what came of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallRecord {
    /// The provider's call id.
    pub call_id: String,
    /// The function name as the model wrote it.
    pub name: String,
    /// The raw JSON arguments as the model wrote them.
    pub arguments: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Its result (or error) text, as the model sees it.
    pub output: String,
    /// Whether the model requested a heartbeat.
    pub request_heartbeat: bool,
    /// How long it ran.
    #[serde(with = "secs")]
    pub duration: Duration,
}

/// Where a step's time went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepTimings {
    /// The whole step.
    #[serde(with = "secs")]
    pub total: Duration,
    /// Waiting for the LLM (agent calls only).
    #[serde(with = "secs")]
    pub llm: Duration,
    /// Running functions.
    #[serde(with = "secs")]
    pub functions: Duration,
    /// Summarizing evicted messages (LLM included).
    #[serde(with = "secs")]
    pub summarizer: Duration,
    /// Committing to storage.
    #[serde(with = "secs")]
    pub commit: Duration,
    /// Embedding the step's conversation messages for recall search (before the commit).
    #[serde(with = "secs", default)]
    pub embedding: Duration,
}

impl StepTimings {
    /// Time spent outside the LLM, the summarizer and the embedder: the framework's own
    /// overhead plus functions and storage.
    pub fn overhead(&self) -> Duration {
        self.total
            .saturating_sub(self.llm + self.summarizer + self.embedding)
    }
}

/// Everything one step did: what callers, logs and benchmarks read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The agent.
    pub agent_id: AgentId,
    /// The event's kind (`user_message`, `timer`...).
    pub event: String,
    /// Every message the step appended, in order (event, assistant turns, function results,
    /// heartbeats, alerts).
    pub messages: Vec<Message>,
    /// What the agent said to the user (`send_message`), in order.
    pub replies: Vec<String>,
    /// Every function call (records saved before the rename say `tool_calls`).
    #[serde(alias = "tool_calls")]
    pub function_calls: Vec<FunctionCallRecord>,
    /// LLM calls made by the agent (summarizer calls excluded).
    pub llm_calls: usize,
    /// Token usage of those calls.
    pub usage: Usage,
    /// Whether the memory-pressure warning was inserted.
    pub pressure_warning: bool,
    /// Flushes performed.
    pub flushes: Vec<FlushRecord>,
    /// Where the time went.
    pub timings: StepTimings,
    /// Why the step ended.
    pub stop_reason: StopReason,
    /// Main context after the step.
    pub context: ContextStats,
    /// Labels of the shared blocks other writers had changed since this agent's last step:
    /// the step started from their new text (its prompt was rebuilt with it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_blocks_changed: Vec<String>,
}

impl StepRecord {
    /// The replies joined by newlines (convenient for chat front-ends and tests).
    pub fn reply(&self) -> String {
        self.replies.join("\n")
    }
}

mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}
