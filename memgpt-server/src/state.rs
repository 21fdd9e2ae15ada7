//! What every handler can reach: the live agents, the tenant store and the configuration.

use std::sync::Arc;
use std::time::Duration;

use crate::hub::AgentHub;
use crate::metrics::Metrics;
use crate::tenants::{MemoryTenants, TenantStore, TenantsError};
use crate::timers::{MemoryTimers, TimerStore, TimersError};

/// What a server needs besides its store and model.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The admin key (`MEMGPT_ADMIN_KEY`): creates tenants and keys. `None` disables those
    /// routes.
    pub admin_key: Option<String>,
    /// The largest request body accepted, in bytes (default 8 MiB).
    pub max_body_bytes: usize,
    /// How long a request may take before it is answered `504 timeout` (default 5 minutes; a
    /// step that is still running completes and commits regardless).
    pub request_timeout: Duration,
    /// Agents kept loaded per process (default 10,000); past it, the least recently used idle
    /// ones are unloaded (and loaded again from the store when next used).
    pub live_agents: usize,
    /// How often due timers are looked for (default 1 s).
    pub timer_poll: Duration,
    /// How long a claimed timer stays with the process that claimed it before another may
    /// fire it (default 10 minutes: longer than any step).
    pub timer_lease: Duration,
    /// How long retries of a message or chat-completion post find its first attempt (see
    /// [`idempotency`](crate::idempotency)).
    pub idempotency: crate::idempotency::IdempotencyConfig,
    /// The functions agents may be given (default: those linked into the program,
    /// [`FunctionRegistry::linked`](memgpt_core::function::FunctionRegistry::linked)). Add
    /// run-time ones here, such as MCP servers' tools: `memgpt serve` adds the tools of the
    /// `[mcp_servers]` in memgpt.toml, and each agent is given those its `tools` list names.
    pub functions: Option<memgpt_core::function::FunctionRegistry>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            admin_key: None,
            max_body_bytes: 8 * 1024 * 1024,
            request_timeout: Duration::from_secs(300),
            live_agents: 10_000,
            timer_poll: Duration::from_secs(1),
            timer_lease: Duration::from_secs(600),
            idempotency: Default::default(),
            functions: None,
        }
    }
}

/// Everything a handler can reach.
#[derive(Debug)]
pub struct ServerState {
    /// The live agents (and through them the store, the model and the embedder).
    pub hub: AgentHub,
    /// Tenants, keys and agent ownership.
    pub tenants: Arc<dyn TenantStore>,
    /// Timer events.
    pub timers: Arc<dyn TimerStore>,
    /// This process's metrics.
    pub metrics: Metrics,
    /// The admin key, if any.
    pub admin_key: Option<String>,
    /// The configuration.
    pub config: ServerConfig,
    /// The outcomes of keyed message and chat-completion posts, for their retries.
    pub(crate) idempotency: crate::idempotency::Idempotency,
    /// Held while an agent is named (created, renamed, imported), so two requests cannot
    /// give one tenant's agents the same name.
    pub(crate) naming: tokio::sync::Mutex<()>,
}

/// The state handlers receive.
pub type AppState = Arc<ServerState>;

/// The server's own tables next to the agents: tenants, keys, agent ownership, timers.
#[derive(Debug, Clone)]
pub struct ServerTables {
    /// Tenants, keys and agent ownership.
    pub tenants: Arc<dyn TenantStore>,
    /// Timer events.
    pub timers: Arc<dyn TimerStore>,
}

/// Errors of preparing the [`ServerTables`].
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    /// The tenant tables.
    #[error(transparent)]
    Tenants(#[from] TenantsError),
    /// The timer table.
    #[error(transparent)]
    Timers(#[from] TimersError),
}

impl ServerTables {
    /// Tables in process memory (for `memory://` stores and tests).
    pub fn in_memory() -> Self {
        Self {
            tenants: Arc::new(MemoryTenants::new()),
            timers: Arc::new(MemoryTimers::new()),
        }
    }

    /// Tables in the agents' database.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub fn in_database(db: crate::db::Db) -> Self {
        Self {
            tenants: Arc::new(crate::tenants::SqlTenants::new(db.clone())),
            timers: Arc::new(crate::timers::SqlTimers::new(db)),
        }
    }

    /// Creates the tables if needed.
    pub async fn migrate(&self) -> Result<(), TablesError> {
        self.tenants.migrate().await?;
        self.timers.migrate().await?;
        Ok(())
    }
}
