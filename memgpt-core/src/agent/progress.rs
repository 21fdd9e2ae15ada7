//! What a step is doing, as it happens: for displays that stream a step (a chat window, a
//! server's event stream) instead of waiting for its [`StepRecord`](super::StepRecord).

use std::fmt;

use crate::message::Message;
use crate::paging::FlushRecord;

/// One thing a step did, reported the moment it happened.
///
/// Progress is not commitment: a step that fails or is cancelled afterwards is rolled back
/// and leaves nothing stored, though its progress was already reported. The step's
/// [`StepRecord`](super::StepRecord) is the committed account.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum StepProgress<'a> {
    /// A message joined the FIFO queue: the event's own message, the assistant's turn (inner
    /// monologue and function calls, `send_message` among them), a function's result or error,
    /// a heartbeat, or a system alert such as the memory-pressure warning.
    Message(&'a Message),
    /// The queue was flushed: messages were evicted into recall storage and folded into the
    /// recursive summary.
    Flush(&'a FlushRecord),
    /// A piece of the model's inner monologue as it is generated. Streaming providers report
    /// it piece by piece; others all at once when the response is complete. The whole text
    /// arrives again in the assistant's [`StepProgress::Message`].
    ThinkingDelta(&'a str),
    /// A piece of the text of `send_message` as it is generated, decoded from the call's JSON
    /// arguments while they stream: concatenated, one call's pieces are its `message`. The
    /// call itself follows in the assistant's [`StepProgress::Message`], and runs only if
    /// valid: a display should treat the pieces as provisional until then.
    ReplyDelta(&'a str),
}

/// Watches steps as they run; set with
/// [`AgentBuilder::observer`](super::AgentBuilder::observer) or
/// [`Agent::set_observer`](super::Agent::set_observer).
///
/// Called on the step's task, between the step's own awaits: keep it quick (print, or send into
/// a channel). Any `Fn(StepProgress<'_>) + Send + Sync` closure is an observer.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
/// use std::sync::{Arc, Mutex};
/// use memgpt_core::Agent;
/// use memgpt_core::agent::StepProgress;
/// use memgpt_core::testing::ScriptedProvider;
/// use serde_json::json;
///
/// let llm = Arc::new(ScriptedProvider::new());
/// llm.push_call("send_message", json!({"message": "Hi!"}));
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let mut agent = Agent::builder()
///     .provider(llm)
///     .observer(move |progress: StepProgress<'_>| {
///         if let StepProgress::Message(m) = progress {
///             log.lock().unwrap().push(m.kind);
///         }
///     })
///     .build()
///     .await?;
/// agent.step("Hello").await?;
/// // The user's message, the assistant's turn, send_message's result.
/// assert_eq!(seen.lock().unwrap().len(), 3);
/// # Ok(()) }
/// ```
pub trait StepObserver: Send + Sync {
    /// Called for each thing a step does, in order.
    fn observe(&self, progress: StepProgress<'_>);
}

impl<F> StepObserver for F
where
    F: Fn(StepProgress<'_>) + Send + Sync,
{
    fn observe(&self, progress: StepProgress<'_>) {
        self(progress)
    }
}

impl fmt::Debug for dyn StepObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StepObserver")
    }
}
