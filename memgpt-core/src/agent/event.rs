//! [`Event`]: what happened that the agent reacts to (a user's message, an alert, a login, a
//! timer, an approval, another agent's message).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::AgentId;

/// Something that makes the agent run, like an interrupt makes an OS run.
///
/// ```
/// use memgpt_core::agent::Event;
///
/// let e: Event = "hello".into();
/// assert!(matches!(e.kind, memgpt_core::agent::EventKind::UserMessage { .. }));
/// let replay = Event::user("we met in Paris").at("2023-05-08T13:56:00Z".parse().unwrap());
/// assert!(replay.at.is_some());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// When it happened; `None` means now (the agent's clock). Every message of the step is
    /// stamped with this time, which lets historical conversations be replayed.
    pub at: Option<DateTime<Utc>>,
}

/// The kinds of events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// The user sent a message.
    UserMessage {
        /// The text.
        text: String,
        /// The user's name, if known.
        name: Option<String>,
    },
    /// A system alert for the agent.
    SystemAlert {
        /// The text.
        text: String,
    },
    /// The user logged in.
    Login,
    /// The user uploaded a document: it is split into passages in archival storage and the
    /// agent is told.
    DocumentUpload {
        /// The document's name.
        name: String,
        /// Its text.
        text: String,
    },
    /// A scheduled timer fired (ignored while heartbeats are paused).
    Timer {
        /// Why it fired.
        reason: String,
    },
    /// Another agent wrote to this one (`send_message_to_agent`, see [`crate::messaging`]).
    AgentMessage {
        /// The sender.
        from: AgentId,
        /// The sender's name.
        from_name: String,
        /// The text.
        text: String,
        /// The message's hop in its exchange ([`AgentMessage::hops`](crate::messaging::AgentMessage::hops)).
        hops: u32,
        /// The agents whose steps wait for this one's reply, the sender last (empty when the
        /// sender does not wait).
        waiting: Vec<AgentId>,
    },
    /// A consolidation companion's run ([`crate::consolidation`]): its primary's conversation
    /// since the last run, as a transcript. The step advances the companion's cursor to
    /// `until` ([`AgentState::consolidated_until`](crate::store::AgentState::consolidated_until)).
    Consolidation {
        /// The agent whose memory is consolidated.
        primary: AgentId,
        /// The transcript and what to do with it.
        text: String,
        /// The end of the stretch of conversation it holds (exclusive).
        until: DateTime<Utc>,
    },
    /// A person approved or denied the function call the agent is waiting on
    /// ([`StopReason::AwaitingApproval`](crate::StopReason::AwaitingApproval)): the paused step
    /// goes on, with the call run (approved) or failed with the denial as its result.
    Approval {
        /// The pending call's id.
        call_id: String,
        /// Whether it may run.
        approve: bool,
        /// Why (shown to the model with a denial).
        reason: Option<String>,
    },
    /// Runs the model again on the context as it stands, with no new message: how a step that
    /// failed at the model ([`StopReason::ProviderError`](crate::StopReason::ProviderError)) is
    /// retried. Its event was stored with it, so sending the message again would store it twice.
    Resume,
}

impl EventKind {
    /// A short name for records and logs.
    pub fn label(&self) -> &'static str {
        match self {
            EventKind::UserMessage { .. } => "user_message",
            EventKind::SystemAlert { .. } => "system_alert",
            EventKind::Login => "login",
            EventKind::DocumentUpload { .. } => "document_upload",
            EventKind::Timer { .. } => "timer",
            EventKind::Consolidation { .. } => "consolidation",
            EventKind::Approval { .. } => "approval",
            EventKind::AgentMessage { .. } => "agent_message",
            EventKind::Resume => "resume",
        }
    }
}

impl Event {
    fn now(kind: EventKind) -> Self {
        Self { kind, at: None }
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::now(EventKind::UserMessage {
            text: text.into(),
            name: None,
        })
    }

    /// A user message from a named user.
    pub fn user_named(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self::now(EventKind::UserMessage {
            text: text.into(),
            name: Some(name.into()),
        })
    }

    /// A system alert.
    pub fn alert(text: impl Into<String>) -> Self {
        Self::now(EventKind::SystemAlert { text: text.into() })
    }

    /// A login.
    pub fn login() -> Self {
        Self::now(EventKind::Login)
    }

    /// A document upload.
    pub fn document(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self::now(EventKind::DocumentUpload {
            name: name.into(),
            text: text.into(),
        })
    }

    /// A timer.
    pub fn timer(reason: impl Into<String>) -> Self {
        Self::now(EventKind::Timer {
            reason: reason.into(),
        })
    }

    /// A consolidation run over `transcript` (see [`Agent::consolidate`](crate::Agent::consolidate),
    /// which builds it).
    pub fn consolidation(primary: AgentId, transcript: crate::consolidation::Transcript) -> Self {
        Self::now(EventKind::Consolidation {
            primary,
            text: transcript.text,
            until: transcript.until,
        })
    }

    /// Approves the pending function call `call_id`: it runs and the step goes on.
    pub fn approve(call_id: impl Into<String>) -> Self {
        Self::now(EventKind::Approval {
            call_id: call_id.into(),
            approve: true,
            reason: None,
        })
    }

    /// Denies the pending function call `call_id`: the model reads the denial (with `reason`)
    /// as the call's result and goes on.
    pub fn deny(call_id: impl Into<String>, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self::now(EventKind::Approval {
            call_id: call_id.into(),
            approve: false,
            reason: (!reason.trim().is_empty()).then_some(reason),
        })
    }

    /// Runs the model again after a step that failed at the model, on the messages already
    /// stored (see [`EventKind::Resume`]).
    pub fn resume() -> Self {
        Self::now(EventKind::Resume)
    }

    /// A message from another agent, as a messenger delivers it.
    pub fn from_agent(message: &crate::messaging::AgentMessage) -> Self {
        Self::now(EventKind::AgentMessage {
            from: message.from,
            from_name: message.from_name.clone(),
            text: message.text.clone(),
            hops: message.hops,
            waiting: message.waiting.clone(),
        })
    }

    /// Stamps the event with the time it happened.
    pub fn at(mut self, at: DateTime<Utc>) -> Self {
        self.at = Some(at);
        self
    }
}

impl From<&str> for Event {
    fn from(text: &str) -> Self {
        Event::user(text)
    }
}

impl From<String> for Event {
    fn from(text: String) -> Self {
        Event::user(text)
    }
}
