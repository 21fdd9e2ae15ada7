//! Tenants in process memory, for `memory://` stores and tests.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::Utc;
use memgpt_core::ids::AgentId;

use super::{ApiKey, KeyId, Tenant, TenantId, TenantStore, TenantsError};

/// A [`TenantStore`] in process memory: gone on exit, like the `memory://` agents it guards.
#[derive(Debug, Default)]
pub struct MemoryTenants {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    tenants: Vec<Tenant>,
    keys: Vec<(ApiKey, String)>,
    owners: Vec<(AgentId, TenantId)>,
    by_agent: HashMap<AgentId, TenantId>,
}

impl MemoryTenants {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl TenantStore for MemoryTenants {
    async fn migrate(&self) -> Result<(), TenantsError> {
        Ok(())
    }

    async fn create_tenant(&self, name: &str) -> Result<Tenant, TenantsError> {
        let mut inner = self.inner();
        if inner.tenants.iter().any(|t| t.name == name) {
            return Err(TenantsError::NameTaken(name.to_owned()));
        }
        let tenant = Tenant {
            id: TenantId::new(),
            name: name.to_owned(),
            created_at: Utc::now(),
        };
        inner.tenants.push(tenant.clone());
        Ok(tenant)
    }

    async fn tenants(&self) -> Result<Vec<Tenant>, TenantsError> {
        Ok(self.inner().tenants.clone())
    }

    async fn tenant(&self, id: TenantId) -> Result<Option<Tenant>, TenantsError> {
        Ok(self.inner().tenants.iter().find(|t| t.id == id).cloned())
    }

    async fn add_key(&self, key: &ApiKey, hash: &str) -> Result<(), TenantsError> {
        let mut inner = self.inner();
        if !inner.tenants.iter().any(|t| t.id == key.tenant_id) {
            return Err(TenantsError::NotFound(format!("tenant {}", key.tenant_id)));
        }
        inner.keys.push((key.clone(), hash.to_owned()));
        Ok(())
    }

    async fn keys(&self, tenant: TenantId) -> Result<Vec<ApiKey>, TenantsError> {
        Ok(self
            .inner()
            .keys
            .iter()
            .filter(|(k, _)| k.tenant_id == tenant)
            .map(|(k, _)| k.clone())
            .collect())
    }

    async fn revoke_key(&self, id: KeyId) -> Result<bool, TenantsError> {
        let mut inner = self.inner();
        let Some((key, _)) = inner.keys.iter_mut().find(|(k, _)| k.id == id) else {
            return Ok(false);
        };
        key.revoked_at.get_or_insert_with(Utc::now);
        Ok(true)
    }

    async fn authenticate(&self, hash: &str) -> Result<Option<TenantId>, TenantsError> {
        Ok(self
            .inner()
            .keys
            .iter()
            .find(|(k, h)| h == hash && k.revoked_at.is_none())
            .map(|(k, _)| k.tenant_id))
    }

    async fn claim_agent(&self, agent: AgentId, tenant: TenantId) -> Result<(), TenantsError> {
        let mut inner = self.inner();
        if inner.by_agent.insert(agent, tenant).is_none() {
            inner.owners.push((agent, tenant));
        }
        Ok(())
    }

    async fn owner(&self, agent: AgentId) -> Result<Option<TenantId>, TenantsError> {
        Ok(self.inner().by_agent.get(&agent).copied())
    }

    async fn agents_of(&self, tenant: TenantId) -> Result<Vec<AgentId>, TenantsError> {
        Ok(self
            .inner()
            .owners
            .iter()
            .filter(|(_, t)| *t == tenant)
            .map(|(a, _)| *a)
            .collect())
    }

    async fn release_agent(&self, agent: AgentId) -> Result<(), TenantsError> {
        let mut inner = self.inner();
        inner.by_agent.remove(&agent);
        inner.owners.retain(|(a, _)| *a != agent);
        Ok(())
    }
}
