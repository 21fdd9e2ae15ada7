//! Tenants in the agents' own database: SQLite or PostgreSQL, the same tables and queries.

use async_trait::async_trait;
use chrono::Utc;
use memgpt_core::ids::AgentId;
use sqlx::{QueryBuilder, Row};
use uuid::Uuid;

use super::{ApiKey, KeyId, Tenant, TenantId, TenantStore, TenantsError};
use crate::db::{Db, millis, time, with_pool};

/// A [`TenantStore`] in the database that holds the agents (tables `memgpt_tenants`,
/// `memgpt_api_keys`, `memgpt_agent_owners`), so one backup holds both, and every server
/// process on a PostgreSQL database sees the same tenants and revocations at once.
#[derive(Debug, Clone)]
pub struct SqlTenants {
    db: Db,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memgpt_tenants (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS memgpt_api_keys (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES memgpt_tenants (id),
    name       TEXT NOT NULL,
    prefix     TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX IF NOT EXISTS memgpt_api_keys_by_tenant ON memgpt_api_keys (tenant_id, created_at);
CREATE TABLE IF NOT EXISTS memgpt_agent_owners (
    agent_id   TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES memgpt_tenants (id),
    claimed_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS memgpt_agent_owners_by_tenant ON memgpt_agent_owners (tenant_id, claimed_at);
";

/// Selects the columns [`tenant`] reads; conditions follow.
const SELECT_TENANTS: &str = "SELECT id, name, created_at FROM memgpt_tenants";

impl SqlTenants {
    /// Tenants in `db` (call [`TenantStore::migrate`] before use).
    pub fn new(db: Db) -> Self {
        Self { db }
    }
}

fn db(e: sqlx::Error) -> TenantsError {
    TenantsError::Database(e.to_string())
}

fn uuid(text: &str) -> Result<Uuid, TenantsError> {
    text.parse()
        .map_err(|e| TenantsError::Database(format!("a stored id `{text}` is not a UUID: {e}")))
}

fn tenant<R: Row>(row: &R) -> Result<Tenant, TenantsError>
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r str: sqlx::ColumnIndex<R>,
{
    Ok(Tenant {
        id: TenantId(uuid(&row.try_get::<String, _>("id").map_err(db)?)?),
        name: row.try_get("name").map_err(db)?,
        created_at: time(row.try_get("created_at").map_err(db)?),
    })
}

fn key<R: Row>(row: &R) -> Result<ApiKey, TenantsError>
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> &'r str: sqlx::ColumnIndex<R>,
{
    Ok(ApiKey {
        id: KeyId(uuid(&row.try_get::<String, _>("id").map_err(db)?)?),
        tenant_id: TenantId(uuid(&row.try_get::<String, _>("tenant_id").map_err(db)?)?),
        name: row.try_get("name").map_err(db)?,
        prefix: row.try_get("prefix").map_err(db)?,
        created_at: time(row.try_get("created_at").map_err(db)?),
        revoked_at: row
            .try_get::<Option<i64>, _>("revoked_at")
            .map_err(db)?
            .map(time),
    })
}

#[async_trait]
impl TenantStore for SqlTenants {
    async fn migrate(&self) -> Result<(), TenantsError> {
        self.db.migrate(SCHEMA).await.map_err(db)
    }

    async fn create_tenant(&self, name: &str) -> Result<Tenant, TenantsError> {
        let tenant = Tenant {
            id: TenantId::new(),
            name: name.to_owned(),
            created_at: Utc::now(),
        };
        let inserted = with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new("INSERT INTO memgpt_tenants (id, name, created_at) ");
            sql.push_values([&tenant], |mut row, tenant| {
                row.push_bind(tenant.id.to_string())
                    .push_bind(tenant.name.clone())
                    .push_bind(millis(tenant.created_at));
            });
            sql.push(" ON CONFLICT (name) DO NOTHING");
            sql.build().execute(pool).await.map_err(db)?.rows_affected()
        });
        if inserted == 0 {
            return Err(TenantsError::NameTaken(name.to_owned()));
        }
        Ok(tenant)
    }

    async fn tenants(&self) -> Result<Vec<Tenant>, TenantsError> {
        with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new(SELECT_TENANTS);
            sql.push(" ORDER BY created_at, id");
            sql.build().fetch_all(pool).await.map_err(db)?.iter().map(tenant).collect()
        })
    }

    async fn tenant(&self, id: TenantId) -> Result<Option<Tenant>, TenantsError> {
        with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new(SELECT_TENANTS);
            sql.push(" WHERE id = ").push_bind(id.to_string());
            sql.build()
                .fetch_optional(pool)
                .await
                .map_err(db)?
                .as_ref()
                .map(tenant)
                .transpose()
        })
    }

    async fn add_key(&self, key: &ApiKey, hash: &str) -> Result<(), TenantsError> {
        if self.tenant(key.tenant_id).await?.is_none() {
            return Err(TenantsError::NotFound(format!("tenant {}", key.tenant_id)));
        }
        with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new(
                "INSERT INTO memgpt_api_keys (id, tenant_id, name, prefix, hash, created_at) ",
            );
            sql.push_values([key], |mut row, key| {
                row.push_bind(key.id.to_string())
                    .push_bind(key.tenant_id.to_string())
                    .push_bind(key.name.clone())
                    .push_bind(key.prefix.clone())
                    .push_bind(hash.to_owned())
                    .push_bind(millis(key.created_at));
            });
            sql.build().execute(pool).await.map(|_| ()).map_err(db)
        })
    }

    async fn keys(&self, tenant: TenantId) -> Result<Vec<ApiKey>, TenantsError> {
        with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new(
                "SELECT id, tenant_id, name, prefix, created_at, revoked_at FROM memgpt_api_keys \
                 WHERE tenant_id = ",
            );
            sql.push_bind(tenant.to_string()).push(" ORDER BY created_at, id");
            sql.build().fetch_all(pool).await.map_err(db)?.iter().map(key).collect()
        })
    }

    async fn revoke_key(&self, id: KeyId) -> Result<bool, TenantsError> {
        let updated = with_pool!(&self.db, pool => {
            let mut sql =
                QueryBuilder::new("UPDATE memgpt_api_keys SET revoked_at = COALESCE(revoked_at, ");
            sql.push_bind(millis(Utc::now()))
                .push(") WHERE id = ")
                .push_bind(id.to_string());
            sql.build().execute(pool).await.map_err(db)?.rows_affected()
        });
        Ok(updated > 0)
    }

    async fn authenticate(&self, hash: &str) -> Result<Option<TenantId>, TenantsError> {
        let found: Option<String> = with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new("SELECT tenant_id FROM memgpt_api_keys WHERE hash = ");
            sql.push_bind(hash.to_owned()).push(" AND revoked_at IS NULL");
            sql.build_query_scalar().fetch_optional(pool).await.map_err(db)?
        });
        found.map(|t| uuid(&t).map(TenantId)).transpose()
    }

    async fn claim_agent(&self, agent: AgentId, tenant: TenantId) -> Result<(), TenantsError> {
        with_pool!(&self.db, pool => {
            let mut sql =
                QueryBuilder::new("INSERT INTO memgpt_agent_owners (agent_id, tenant_id, claimed_at) ");
            sql.push_values([(agent, tenant)], |mut row, (agent, tenant)| {
                row.push_bind(agent.to_string())
                    .push_bind(tenant.to_string())
                    .push_bind(millis(Utc::now()));
            });
            sql.push(" ON CONFLICT (agent_id) DO NOTHING");
            sql.build().execute(pool).await.map(|_| ()).map_err(db)
        })
    }

    async fn owner(&self, agent: AgentId) -> Result<Option<TenantId>, TenantsError> {
        let found: Option<String> = with_pool!(&self.db, pool => {
            let mut sql =
                QueryBuilder::new("SELECT tenant_id FROM memgpt_agent_owners WHERE agent_id = ");
            sql.push_bind(agent.to_string());
            sql.build_query_scalar().fetch_optional(pool).await.map_err(db)?
        });
        found.map(|t| uuid(&t).map(TenantId)).transpose()
    }

    async fn agents_of(&self, tenant: TenantId) -> Result<Vec<AgentId>, TenantsError> {
        let ids: Vec<String> = with_pool!(&self.db, pool => {
            let mut sql =
                QueryBuilder::new("SELECT agent_id FROM memgpt_agent_owners WHERE tenant_id = ");
            sql.push_bind(tenant.to_string())
                .push(" ORDER BY claimed_at, agent_id");
            sql.build_query_scalar().fetch_all(pool).await.map_err(db)?
        });
        ids.iter()
            .map(|id| {
                id.parse()
                    .map_err(|e| TenantsError::Database(format!("agent id `{id}`: {e}")))
            })
            .collect()
    }

    async fn release_agent(&self, agent: AgentId) -> Result<(), TenantsError> {
        with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new("DELETE FROM memgpt_agent_owners WHERE agent_id = ");
            sql.push_bind(agent.to_string());
            sql.build().execute(pool).await.map(|_| ()).map_err(db)
        })
    }
}
