//! Messages between agents: the [`AgentMessenger`] seam that `send_message_to_agent` goes
//! through, and the limits that keep agents from talking in circles.
//!
//! An agent built with a messenger ([`AgentBuilder::messenger`](crate::AgentBuilder::messenger))
//! and offered `send_message_to_agent` can write to another agent. With `wait`, the messenger
//! steps the addressee now with an [`EventKind::AgentMessage`](crate::agent::EventKind::AgentMessage)
//! and hands back what it said (its `send_message` replies) as the function's result; without,
//! it delivers the message for the addressee's own next step and returns at once. Who can reach
//! whom is the messenger's business (`memgpt serve`'s keeps to one tenant).
//!
//! Two limits hold whatever the messenger: a message carries its hop count, and an agent
//! whose step began with a message of [`MAX_AGENT_HOPS`] hops cannot send on (two agents
//! answering each other stop there); and a waited-for message to an agent whose step is itself
//! waiting in the same exchange is refused, since it would wait for itself.

use async_trait::async_trait;

use crate::ids::AgentId;

/// The most hops an exchange between agents may take from the event that started it (a user's
/// message, a timer): a message sent while answering one of `MAX_AGENT_HOPS` hops is refused.
pub const MAX_AGENT_HOPS: u32 = 3;

/// One agent's message to another, as a messenger receives it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AgentMessage {
    /// The sender.
    pub from: AgentId,
    /// The sender's name.
    pub from_name: String,
    /// The addressee, by name or id, as the sender wrote it.
    pub to: String,
    /// The text.
    pub text: String,
    /// Whether the sender waits for the reply (its step is paused until then).
    pub wait: bool,
    /// Its hop: 1 when sent while answering a user or a timer, one more for each agent message
    /// the exchange went through before.
    pub hops: u32,
    /// The agents whose steps wait for this delivery, the sender last (empty when the sender
    /// does not wait: the message starts a chain of its own). A messenger refuses a
    /// waited-for delivery to one of them ([`MessengerError::Busy`]).
    pub waiting: Vec<AgentId>,
}

/// What became of a delivered message.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Delivery {
    /// The addressee stepped with it; these are its replies (`send_message`), in order.
    Replied {
        /// The addressee's name.
        agent: String,
        /// What it said.
        replies: Vec<String>,
    },
    /// The addressee reads it on a step of its own, later.
    Queued {
        /// The addressee's name.
        agent: String,
    },
}

/// Why a message was not delivered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MessengerError {
    /// No agent by that name or id is within the sender's reach.
    #[error("there is no agent `{0}` you can write to")]
    NotFound(String),
    /// The addressee cannot take a waited-for message now (it waits on this exchange itself,
    /// or stays busy too long).
    #[error("agent `{agent}` cannot answer now: {why}")]
    Busy {
        /// The addressee.
        agent: String,
        /// Why.
        why: String,
    },
    /// The addressee's step failed.
    #[error("agent `{agent}` failed to answer: {why}")]
    Failed {
        /// The addressee.
        agent: String,
        /// What went wrong.
        why: String,
    },
}

/// Delivers messages between agents: resolves the addressee within the sender's reach and
/// steps it (waited for) or hands it the message for later. Implementations must refuse a
/// waited-for delivery to an agent in [`AgentMessage::waiting`].
#[async_trait]
pub trait AgentMessenger: std::fmt::Debug + Send + Sync {
    /// Delivers `message`.
    async fn deliver(&self, message: AgentMessage) -> Result<Delivery, MessengerError>;
}
