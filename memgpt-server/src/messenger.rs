//! Agents writing to each other on the server: the [`AgentMessenger`] that `memgpt serve`'s
//! agents get. An agent reaches its own tenant's agents only (by name or id, as the OpenAI
//! routes name them); a waited-for message steps the addressee in the request that sent it,
//! and one not waited for is stepped in a task of its own.

use std::sync::Weak;
use std::time::Duration;

use async_trait::async_trait;
use memgpt_core::Event;
use memgpt_core::ids::AgentId;
use memgpt_core::messaging::{AgentMessage, AgentMessenger, Delivery, MessengerError};
use tracing::{debug, warn};

use crate::auth::Caller;
use crate::error::ErrorCode;
use crate::state::ServerState;

/// How long a waited-for message waits for its addressee to finish another step.
const BUSY_WAIT: Duration = Duration::from_secs(60);

/// The messenger of `memgpt serve`'s agents (see the [module](self) documentation).
#[derive(Debug, Clone)]
pub(crate) struct HubMessenger {
    state: Weak<ServerState>,
}

impl HubMessenger {
    /// A messenger over `state`'s agents (held weakly: the state owns the agents, which own
    /// this).
    pub(crate) fn new(state: Weak<ServerState>) -> Self {
        Self { state }
    }
}

#[async_trait]
impl AgentMessenger for HubMessenger {
    async fn deliver(&self, message: AgentMessage) -> Result<Delivery, MessengerError> {
        let to = message.to.clone();
        let failed = |why: String| MessengerError::Failed {
            agent: to.clone(),
            why,
        };
        let state = self
            .state
            .upgrade()
            .ok_or_else(|| failed("the server is shutting down".into()))?;
        // The sender's tenant is the addressee's.
        let tenant = state
            .tenants
            .owner(message.from)
            .await
            .map_err(|e| failed(e.to_string()))?
            .ok_or_else(|| MessengerError::NotFound(to.clone()))?;
        let id = Caller { tenant }
            .agent_named(&state, &to)
            .await
            .map_err(|e| match e.code {
                ErrorCode::NotFound => MessengerError::NotFound(to.clone()),
                _ => failed(e.message),
            })?;
        // Named by its id, the addressee's name is read for the sender; named by its name, it
        // is what the sender wrote.
        let name = match to.parse::<AgentId>() {
            Ok(_) => addressee_name(&state, id)
                .await
                .unwrap_or_else(|| to.clone()),
            Err(_) => to.clone(),
        };
        if !message.wait {
            tokio::spawn(step_later(state, id, message));
            return Ok(Delivery::Queued { agent: name });
        }
        if message.waiting.contains(&id) {
            return Err(MessengerError::Busy {
                agent: name,
                why: "it is waiting for this exchange itself; answer with send_message".into(),
            });
        }
        let mut agent = tokio::time::timeout(BUSY_WAIT, state.hub.lock(id))
            .await
            .map_err(|_| MessengerError::Busy {
                agent: name.clone(),
                why: format!(
                    "it stayed busy with another step for {}s",
                    BUSY_WAIT.as_secs()
                ),
            })?
            .map_err(|e| failed(e.message))?;
        let record = state
            .step(&mut agent, Event::from_agent(&message))
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok(Delivery::Replied {
            agent: name,
            replies: record.replies,
        })
    }
}

/// The addressee's name, as the sender will read it.
async fn addressee_name(state: &ServerState, id: AgentId) -> Option<String> {
    let agent = state.hub.storage().agents.load_agent(id).await.ok()??;
    Some(agent.name)
}

/// Steps agent `id` with a message it was not waited on for, once it is free.
async fn step_later(state: std::sync::Arc<ServerState>, id: AgentId, message: AgentMessage) {
    let outcome = match state.hub.lock(id).await {
        Ok(mut agent) => state
            .step(&mut agent, Event::from_agent(&message))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.message),
    };
    match outcome {
        Ok(()) => debug!(from = %message.from, to = %id, "delivered an agent's message"),
        Err(e) => {
            warn!(from = %message.from, to = %id, error = %e, "an agent's message could not be delivered")
        }
    }
}
