//! What every handler can reach: the live agents, the tenant store and the configuration.

use std::sync::Arc;
use std::time::Duration;

use crate::hub::AgentHub;
use crate::tenants::TenantStore;

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
    /// Idle agents kept loaded per process (default 10,000).
    pub live_agents: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            admin_key: None,
            max_body_bytes: 8 * 1024 * 1024,
            request_timeout: Duration::from_secs(300),
            live_agents: 10_000,
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
    /// The admin key, if any.
    pub admin_key: Option<String>,
    /// The configuration.
    pub config: ServerConfig,
}

/// The state handlers receive.
pub type AppState = Arc<ServerState>;
