//! Live agents: each agent loaded once per process and used by one request at a time.
//!
//! A request that acts on an agent (a step, a memory edit, an archival insert) locks it here;
//! another request for the same agent waits its turn. Across processes sharing a PostgreSQL
//! database the store's agent lock serialises steps, and every operation first catches up
//! with commits made elsewhere, so a cached agent is never acted on stale.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memgpt_core::embed::Embedder;
use memgpt_core::ids::AgentId;
use memgpt_core::llm::LlmProvider;
use memgpt_core::store::Storage;
use memgpt_core::{Agent, AgentBuilder};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::error::ApiResult;

type Slot = Arc<AsyncMutex<Option<Agent>>>;

/// The agents of one process, loaded on first use and kept up to a capacity.
#[derive(Debug)]
pub struct AgentHub {
    storage: Storage,
    provider: Arc<dyn LlmProvider>,
    embedder: Option<Arc<dyn Embedder>>,
    live: Mutex<HashMap<AgentId, Slot>>,
    capacity: usize,
}

/// An agent locked for one request; others wait until it is dropped.
#[derive(Debug)]
pub struct LiveAgent(OwnedMutexGuard<Option<Agent>>);

impl std::ops::Deref for LiveAgent {
    type Target = Agent;

    fn deref(&self) -> &Agent {
        // `AgentHub::lock` hands out only loaded slots.
        self.0
            .as_ref()
            .unwrap_or_else(|| unreachable!("a live agent is loaded"))
    }
}

impl std::ops::DerefMut for LiveAgent {
    fn deref_mut(&mut self) -> &mut Agent {
        self.0
            .as_mut()
            .unwrap_or_else(|| unreachable!("a live agent is loaded"))
    }
}

impl AgentHub {
    /// A hub building agents from `storage`, `provider` and `embedder`, keeping at most
    /// `capacity` idle agents loaded.
    pub fn new(
        storage: Storage,
        provider: Arc<dyn LlmProvider>,
        embedder: Option<Arc<dyn Embedder>>,
        capacity: usize,
    ) -> Self {
        Self {
            storage,
            provider,
            embedder,
            live: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// The store.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// A builder with this hub's provider, store and embedder: new agents start here.
    pub fn builder(&self) -> AgentBuilder {
        let mut builder = Agent::builder()
            .provider(self.provider.clone())
            .storage(self.storage.clone());
        if let Some(embedder) = &self.embedder {
            builder = builder.embedder(embedder.clone());
        }
        builder
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Slot>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks agent `id` (which the caller has checked exists and is theirs), loading it if
    /// needed.
    pub async fn lock(&self, id: AgentId) -> ApiResult<LiveAgent> {
        let slot = {
            let mut live = self.live();
            if !live.contains_key(&id) && live.len() >= self.capacity {
                // Unload idle agents: nobody holds or waits for their slot.
                live.retain(|_, slot| Arc::strong_count(slot) > 1);
            }
            live.entry(id).or_default().clone()
        };
        let mut guard = slot.lock_owned().await;
        if guard.is_none() {
            *guard = Some(self.builder().load(id).await?);
        }
        Ok(LiveAgent(guard))
    }

    /// Keeps a newly built agent loaded.
    pub async fn adopt(&self, agent: Agent) {
        let id = agent.id();
        let slot = self.live().entry(id).or_default().clone();
        *slot.lock().await = Some(agent);
    }

    /// Unloads agent `id` (deleted, or reconfigured: the next use loads it afresh).
    pub fn forget(&self, id: AgentId) {
        self.live().remove(&id);
    }

    /// Agents loaded now.
    pub fn loaded(&self) -> usize {
        self.live().len()
    }
}
