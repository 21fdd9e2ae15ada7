//! [`Services`]: what an agent runs with besides its state (provider, storage, functions,
//! policy...), and the main context and queue a state opens with.

use std::sync::Arc;

use super::progress::StepObserver;
use crate::config::LoopStyle;
use crate::context::{MainContext, MemoryCounts};
use crate::embed::Embedder;
use crate::error::Result;
use crate::function::{Extensions, FunctionSet, FunctionSettings};
use crate::llm::LlmProvider;
use crate::queue::QueueManager;
use crate::store::{AgentState, Storage, StoreError};
use crate::summarizer::Summarizer;
use crate::time::Clock;
use crate::tokens::TokenCounter;

/// The services an agent runs with, injected by its builder (not persisted).
#[derive(Clone)]
pub(crate) struct Services {
    pub(crate) provider: Arc<dyn LlmProvider>,
    pub(crate) summarizer: Arc<dyn Summarizer>,
    pub(crate) embedder: Option<Arc<dyn Embedder>>,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) manager: QueueManager,
    pub(crate) storage: Storage,
    pub(crate) functions: FunctionSet,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) extensions: Extensions,
    pub(crate) settings: FunctionSettings,
    pub(crate) observer: Option<Arc<dyn StepObserver>>,
    /// Where `send_message_to_agent` delivers ([`crate::messaging`]).
    pub(crate) messenger: Option<Arc<dyn crate::messaging::AgentMessenger>>,
    /// Opened without a chat model ([`AgentBuilder::without_model`](super::AgentBuilder::without_model)):
    /// steps are refused.
    pub(crate) without_model: bool,
}

/// Builds the main context of `state`, with an empty queue.
pub(super) fn main_context(
    services: &Services,
    state: &AgentState,
    counts: MemoryCounts,
) -> MainContext {
    let schemas = match state.config.loop_style {
        LoopStyle::Heartbeat => services.functions.schemas().clone(),
        LoopStyle::UntilReply => services.functions.schemas_without_heartbeat(),
    };
    let mut context = MainContext::new(
        state.system.clone(),
        state.memory.clone(),
        schemas,
        state.config.prompt_budget(),
        services.counter.clone(),
        state.memory_updated_at,
    );
    context
        .queue_mut()
        .set_policy(services.manager.policy().clone());
    context.set_summary(state.summary.clone());
    context.set_counts(counts);
    context
}

/// Reads the queued messages and the recall/archival counts of a stored agent.
pub(super) async fn load_queue(
    services: &Services,
    state: &AgentState,
) -> Result<(Vec<crate::message::Message>, MemoryCounts)> {
    let id = state.id;
    let queued = services
        .storage
        .recall
        .get_messages(id, &state.fifo)
        .await?;
    if queued.len() != state.fifo.len() {
        return Err(StoreError::Corrupt(format!(
            "agent {id}: {} queued messages are missing from recall storage",
            state.fifo.len() - queued.len()
        ))
        .into());
    }
    let counts = MemoryCounts {
        recall: services.storage.recall.count_messages(id).await?,
        archival: services.storage.archival.count_passages(id).await?,
    };
    Ok((queued, counts))
}
