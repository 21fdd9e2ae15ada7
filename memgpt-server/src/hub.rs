//! Live agents: each agent loaded once per process and used by one request at a time.
//!
//! A request that acts on an agent (a step, a memory edit, an archival insert) locks it here;
//! another request for the same agent waits its turn. Across processes sharing a PostgreSQL
//! database the store's agent lock serialises steps, and every operation first catches up
//! with commits made elsewhere, so a cached agent is never acted on stale.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memgpt_core::embed::Embedder;
use memgpt_core::function::FunctionRegistry;
use memgpt_core::ids::AgentId;
use memgpt_core::llm::LlmProvider;
use memgpt_core::messaging::AgentMessenger;
use memgpt_core::store::Storage;
use memgpt_core::{Agent, AgentBuilder};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::error::ApiResult;

type Slot = Arc<AsyncMutex<Option<Agent>>>;

/// The loaded agents and when each was last used.
#[derive(Debug, Default)]
struct Live {
    agents: HashMap<AgentId, (Slot, u64)>,
    /// Uses so far: the order of last use.
    clock: u64,
}

impl Live {
    /// Unloads the least recently used idle agents (nobody holds or waits for them), a batch
    /// at a time so the sort is paid rarely.
    fn unload_idle(&mut self, batch: usize) {
        let mut idle: Vec<(u64, AgentId)> = self
            .agents
            .iter()
            .filter(|(_, (slot, _))| Arc::strong_count(slot) == 1)
            .map(|(id, (_, used))| (*used, *id))
            .collect();
        idle.sort_unstable();
        for (_, id) in idle.into_iter().take(batch) {
            self.agents.remove(&id);
        }
    }
}

/// The agents of one process, loaded on first use and kept up to a capacity.
#[derive(Debug)]
pub struct AgentHub {
    storage: Storage,
    provider: Arc<dyn LlmProvider>,
    embedder: Option<Arc<dyn Embedder>>,
    live: Mutex<Live>,
    capacity: usize,
    registry: Option<FunctionRegistry>,
    /// Where the agents' `send_message_to_agent` delivers (set once the server state exists).
    messenger: std::sync::OnceLock<Arc<dyn AgentMessenger>>,
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
    /// `capacity` agents loaded (the least recently used idle ones are unloaded first).
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
            live: Mutex::new(Live::default()),
            capacity: capacity.max(1),
            registry: None,
            messenger: std::sync::OnceLock::new(),
        }
    }

    /// Agents look their functions up in `registry` instead of the linked functions (to
    /// offer run-time functions, such as MCP servers' tools).
    pub fn with_registry(mut self, registry: Option<FunctionRegistry>) -> Self {
        self.registry = registry;
        self
    }

    /// Gives the agents built from now on `messenger` for `send_message_to_agent` (the first
    /// call wins).
    pub fn set_messenger(&self, messenger: Arc<dyn AgentMessenger>) {
        let _ = self.messenger.set(messenger);
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
        if let Some(registry) = &self.registry {
            builder = builder.registry(registry.clone());
        }
        if let Some(messenger) = self.messenger.get() {
            builder = builder.messenger(messenger.clone());
        }
        builder
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Agent `id`'s slot, marked as just used (made if new, unloading idle agents if full).
    fn slot(&self, id: AgentId) -> Slot {
        let mut live = self.live();
        live.clock += 1;
        let now = live.clock;
        if !live.agents.contains_key(&id) && live.agents.len() >= self.capacity {
            live.unload_idle((self.capacity / 16).max(1));
        }
        let (slot, used) = live.agents.entry(id).or_default();
        *used = now;
        slot.clone()
    }

    /// Locks agent `id` (which the caller has checked exists and is theirs), loading it if
    /// needed.
    pub async fn lock(&self, id: AgentId) -> ApiResult<LiveAgent> {
        let mut guard = self.slot(id).lock_owned().await;
        if guard.is_none() {
            *guard = Some(self.builder().load(id).await?);
        }
        Ok(LiveAgent(guard))
    }

    /// Keeps a newly built agent loaded.
    pub async fn adopt(&self, agent: Agent) {
        let slot = self.slot(agent.id());
        *slot.lock().await = Some(agent);
    }

    /// Unloads agent `id` (deleted, or reconfigured: the next use loads it afresh).
    pub fn forget(&self, id: AgentId) {
        self.live().agents.remove(&id);
    }

    /// Agents loaded now.
    pub fn loaded(&self) -> usize {
        self.live().agents.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgpt_core::testing::ScriptedProvider;

    #[tokio::test]
    async fn the_least_recently_used_idle_agent_is_unloaded_first() {
        let hub = AgentHub::new(
            Storage::in_memory(),
            Arc::new(ScriptedProvider::new()),
            None,
            2,
        );
        let mut ids = Vec::new();
        for name in ["a", "b", "c"] {
            let agent = hub.builder().name(name).build().await.unwrap();
            ids.push(agent.id());
        }
        let (a, b, c) = (ids[0], ids[1], ids[2]);
        drop(hub.lock(a).await.unwrap());
        drop(hub.lock(b).await.unwrap());
        drop(hub.lock(a).await.unwrap());
        // Full: `b` was used longest ago.
        let held = hub.lock(c).await.unwrap();
        let loaded = |id: AgentId| hub.live().agents.contains_key(&id);
        assert!(loaded(a) && loaded(c) && !loaded(b));
        // An agent in use is never unloaded: with `c` held, loading `b` unloads `a`.
        drop(hub.lock(b).await.unwrap());
        assert!(loaded(c) && loaded(b) && !loaded(a));
        assert_eq!(hub.loaded(), 2);
        drop(held);
    }
}
