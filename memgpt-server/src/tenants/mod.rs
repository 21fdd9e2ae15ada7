//! Who may do what: tenants, their API keys (stored hashed) and which tenant owns each agent.
//!
//! A [`TenantStore`] lives next to the agents: in the same SQLite file or PostgreSQL database
//! ([`SqlTenants`]), or in process memory for `memory://` ([`MemoryTenants`]).

mod keys;
mod memory;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;

use std::fmt;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use memgpt_core::ids::AgentId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use keys::{ApiKeySecret, KEY_PREFIX, hash_key};
pub use memory::MemoryTenants;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use sql::SqlTenants;

/// A tenant's id.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct TenantId(pub Uuid);

impl TenantId {
    /// A new, time-ordered id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }
}

impl Default for TenantId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An API key's id (not the key: that is shown once and stored only as a hash).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct KeyId(pub Uuid);

impl KeyId {
    /// A new, time-ordered id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }
}

impl Default for KeyId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A tenant: a customer whose agents and keys are walled off from every other tenant's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tenant {
    /// Its id.
    pub id: TenantId,
    /// A name for people (unique).
    pub name: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// An API key as listed: everything but the key itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiKey {
    /// Its id (for revoking it).
    pub id: KeyId,
    /// The tenant it acts for.
    pub tenant_id: TenantId,
    /// A name for people ("ci", "alice's laptop").
    pub name: String,
    /// The key's first characters, to recognise it.
    pub prefix: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; a revoked key authenticates nothing.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Errors of a [`TenantStore`].
#[derive(Debug, thiserror::Error)]
pub enum TenantsError {
    /// No such tenant or key.
    #[error("{0} not found")]
    NotFound(String),
    /// A tenant of that name exists.
    #[error("a tenant named `{0}` exists")]
    NameTaken(String),
    /// The database failed.
    #[error("tenant store: {0}")]
    Database(String),
}

/// Tenants, keys and agent ownership, shared by every server process of a deployment.
#[async_trait]
pub trait TenantStore: Send + Sync + fmt::Debug {
    /// Creates the store's tables if needed.
    async fn migrate(&self) -> Result<(), TenantsError>;

    /// Creates a tenant named `name`.
    async fn create_tenant(&self, name: &str) -> Result<Tenant, TenantsError>;

    /// Every tenant, oldest first.
    async fn tenants(&self) -> Result<Vec<Tenant>, TenantsError>;

    /// One tenant.
    async fn tenant(&self, id: TenantId) -> Result<Option<Tenant>, TenantsError>;

    /// Stores a new key of `key.tenant_id` under the SHA-256 `hash` of its secret.
    async fn add_key(&self, key: &ApiKey, hash: &str) -> Result<(), TenantsError>;

    /// The keys of a tenant, revoked ones included, oldest first.
    async fn keys(&self, tenant: TenantId) -> Result<Vec<ApiKey>, TenantsError>;

    /// Revokes a key; `false` if there is no such key. Revoking twice keeps the first time.
    async fn revoke_key(&self, id: KeyId) -> Result<bool, TenantsError>;

    /// The tenant whose unrevoked key hashes to `hash`.
    async fn authenticate(&self, hash: &str) -> Result<Option<TenantId>, TenantsError>;

    /// Records that `tenant` owns `agent` (before the agent is created, so an agent never
    /// exists without an owner).
    async fn claim_agent(&self, agent: AgentId, tenant: TenantId) -> Result<(), TenantsError>;

    /// Who owns `agent`.
    async fn owner(&self, agent: AgentId) -> Result<Option<TenantId>, TenantsError>;

    /// The agents `tenant` owns, oldest claim first.
    async fn agents_of(&self, tenant: TenantId) -> Result<Vec<AgentId>, TenantsError>;

    /// Forgets the owner of a deleted agent (or of one whose creation failed).
    async fn release_agent(&self, agent: AgentId) -> Result<(), TenantsError>;
}
