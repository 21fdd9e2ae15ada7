//! Tenants and API keys, with the admin key.

use aide::axum::ApiRouter;
use aide::axum::routing::{delete, get_with, post};
use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::auth::Admin;
use crate::body::Body;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::reply::{Created, NoContent};
use crate::state::AppState;
use crate::tenants::{ApiKey, ApiKeySecret, KeyId, Tenant, TenantId, TenantsError};

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/admin/tenants", post(create_tenant).get(list_tenants))
        .api_route(
            "/v1/admin/tenants/{tenant_id}/keys",
            post(create_key).get(list_keys),
        )
        .api_route("/v1/admin/keys/{key_id}", delete(revoke_key))
        .api_route(
            "/v1/admin/whoami",
            get_with(whoami, |op| op.response_range::<4, ApiError>()),
        )
}

/// A new tenant.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateTenant {
    /// Its name (unique, 1-200 characters).
    #[schemars(
        length(min = 1, max = 200),
        pattern(crate::routes::document::NOT_BLANK)
    )]
    name: String,
}

/// Tenants.
#[derive(Debug, Serialize, JsonSchema)]
struct Tenants {
    /// Every tenant, oldest first.
    tenants: Vec<Tenant>,
}

/// Creates a tenant.
async fn create_tenant(
    _: Admin,
    State(state): State<AppState>,
    Body(request): Body<CreateTenant>,
) -> ApiResult<Created<Tenant>> {
    let name = request.name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::invalid("a tenant's name has 1 to 200 characters"));
    }
    match state.tenants.create_tenant(name).await {
        Ok(tenant) => Ok(Created(tenant)),
        Err(TenantsError::NameTaken(name)) => Err(ApiError::new(
            ErrorCode::AlreadyExists,
            format!("a tenant named `{name}` exists"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// Lists tenants.
async fn list_tenants(_: Admin, State(state): State<AppState>) -> ApiResult<Json<Tenants>> {
    Ok(Json(Tenants {
        tenants: state.tenants.tenants().await?,
    }))
}

/// `/v1/admin/tenants/{tenant_id}/...`.
#[derive(Debug, Deserialize, JsonSchema)]
struct TenantPath {
    /// The tenant.
    tenant_id: String,
}

impl TenantPath {
    fn id(&self) -> ApiResult<TenantId> {
        self.tenant_id
            .parse()
            .map(TenantId)
            .map_err(|_| ApiError::not_found(format_args!("tenant {}", self.tenant_id)))
    }
}

/// A new API key.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateKey {
    /// A name for people ("ci", "alice's laptop"); default "key".
    #[serde(default)]
    name: Option<String>,
}

/// A key just created: the only time the key itself is shown.
#[derive(Debug, Serialize, JsonSchema)]
struct NewKey {
    /// The key: send it as `Authorization: Bearer <key>`. It is stored only as a hash and
    /// cannot be shown again.
    key: String,
    /// Its id (for revoking it).
    id: KeyId,
    /// Its tenant.
    tenant_id: TenantId,
    /// Its name.
    name: String,
    /// Its first characters.
    prefix: String,
    /// When it was created.
    created_at: DateTime<Utc>,
}

/// Keys.
#[derive(Debug, Serialize, JsonSchema)]
struct Keys {
    /// The tenant's keys, revoked ones included, oldest first.
    keys: Vec<ApiKey>,
}

/// Creates an API key for a tenant.
async fn create_key(
    _: Admin,
    State(state): State<AppState>,
    Path(path): Path<TenantPath>,
    Body(request): Body<CreateKey>,
) -> ApiResult<Created<NewKey>> {
    let tenant = path.id()?;
    let secret = ApiKeySecret::generate()
        .ok_or_else(|| ApiError::internal("generating a key", "no randomness"))?;
    let key = ApiKey {
        id: KeyId::new(),
        tenant_id: tenant,
        name: request.name.unwrap_or_else(|| "key".to_owned()),
        prefix: secret.prefix(),
        created_at: Utc::now(),
        revoked_at: None,
    };
    state.tenants.add_key(&key, &secret.hash()).await?;
    Ok(Created(NewKey {
        key: secret.expose().to_owned(),
        id: key.id,
        tenant_id: key.tenant_id,
        name: key.name,
        prefix: key.prefix,
        created_at: key.created_at,
    }))
}

/// Lists a tenant's keys (never the keys themselves).
async fn list_keys(
    _: Admin,
    State(state): State<AppState>,
    Path(path): Path<TenantPath>,
) -> ApiResult<Json<Keys>> {
    let tenant = path.id()?;
    if state.tenants.tenant(tenant).await?.is_none() {
        return Err(ApiError::not_found(format_args!("tenant {tenant}")));
    }
    Ok(Json(Keys {
        keys: state.tenants.keys(tenant).await?,
    }))
}

/// `/v1/admin/keys/{key_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
struct KeyPath {
    /// The key's id.
    key_id: String,
}

/// Revokes a key: from now on it authenticates nothing, on every server process.
async fn revoke_key(
    _: Admin,
    State(state): State<AppState>,
    Path(path): Path<KeyPath>,
) -> ApiResult<NoContent> {
    let id = path
        .key_id
        .parse()
        .map(KeyId)
        .map_err(|_| ApiError::not_found(format_args!("key {}", path.key_id)))?;
    if state.tenants.revoke_key(id).await? {
        Ok(NoContent)
    } else {
        Err(ApiError::not_found(format_args!("key {id}")))
    }
}

/// Checks the admin key.
#[derive(Debug, Serialize, JsonSchema)]
struct AdminCheck {
    /// Always `true`: the key is the admin key.
    admin: bool,
}

/// Says whether the key presented is the admin key (`403 admin_only` otherwise).
async fn whoami(_: Admin) -> Json<AdminCheck> {
    Json(AdminCheck { admin: true })
}
