//! `send_message_to_agent`: writing to another agent (opt-in; the agent needs a messenger, see
//! [`crate::messaging`]).

use crate::function::{FunctionContext, FunctionError};
use crate::memgpt_fn;
use crate::messaging::Delivery;

/// Sends a message to another agent. With wait, it answers now and you read its reply here;
/// without, it reads your message on its own time.
#[memgpt_fn]
async fn send_message_to_agent(
    ctx: &mut FunctionContext<'_>,
    /// The other agent's name or id.
    agent: String,
    /// The message.
    message: String,
    /// Wait for its reply (default false).
    wait: Option<bool>,
) -> Result<String, FunctionError> {
    if message.trim().is_empty() {
        return Err(FunctionError::new("the message is empty"));
    }
    Ok(
        match ctx
            .message_agent(&agent, &message, wait.unwrap_or(false))
            .await?
        {
            Delivery::Replied { agent, replies } if replies.is_empty() => {
                format!("Agent {agent} read your message and said nothing.")
            }
            Delivery::Replied { agent, replies } => {
                format!("Agent {agent} replied: {}", replies.join("\n"))
            }
            Delivery::Queued { agent } => format!(
                "Delivered to agent {agent}; it reads it on its own time and may write back."
            ),
        },
    )
}
