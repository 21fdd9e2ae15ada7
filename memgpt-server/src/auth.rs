//! Who is calling: the admin (the key in `MEMGPT_ADMIN_KEY`) or a tenant (one of its API keys),
//! from `Authorization: Bearer KEY` (or `x-api-key: KEY`).

use aide::OperationInput;
use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use memgpt_core::ids::AgentId;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::state::AppState;
use crate::tenants::{TenantId, hash_key};

/// A request made with a tenant's API key.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    /// The tenant the key belongs to.
    pub tenant: TenantId,
}

/// A request made with the admin key.
#[derive(Clone, Copy, Debug)]
pub struct Admin;

/// The presented key, if any.
fn presented(parts: &Parts) -> Option<&str> {
    if let Some(value) = parts.headers.get(AUTHORIZATION) {
        let value = value.to_str().ok()?.trim();
        let (scheme, key) = value.split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then(|| key.trim());
    }
    parts.headers.get("x-api-key")?.to_str().ok().map(str::trim)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Some(key) = presented(parts) else {
            return Err(ApiError::new(
                ErrorCode::Unauthorized,
                "no API key: send `Authorization: Bearer <key>`",
            ));
        };
        match state.tenants.authenticate(&hash_key(key)).await? {
            Some(tenant) => Ok(Caller { tenant }),
            None => Err(ApiError::new(
                ErrorCode::Unauthorized,
                "the API key is unknown or revoked",
            )),
        }
    }
}

impl OperationInput for Caller {}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let Some(expected) = state.admin_key.as_deref() else {
            return Err(ApiError::new(
                ErrorCode::AdminOnly,
                "this server has no admin key (set MEMGPT_ADMIN_KEY)",
            ));
        };
        match presented(parts) {
            Some(key) if same(key, expected) => Ok(Admin),
            // No key at all is a request to authenticate; a wrong one is refused.
            None => Err(ApiError::new(
                ErrorCode::Unauthorized,
                "this route needs the admin key (Authorization: Bearer ...)",
            )),
            Some(_) => Err(ApiError::new(
                ErrorCode::AdminOnly,
                "this route needs the admin key",
            )),
        }
    }
}

impl OperationInput for Admin {}

/// Compares two secrets in time independent of where they differ (by their digests, so the
/// length does not leak either).
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

impl Caller {
    /// One of the caller's agents by id or by name: `404` for a name or id no agent of the
    /// caller's tenant has, `400` for a name several of them share.
    pub async fn agent_named(&self, state: &AppState, name_or_id: &str) -> ApiResult<AgentId> {
        if let Ok(id) = name_or_id.parse::<AgentId>() {
            self.owns(state, id).await?;
            return Ok(id);
        }
        let mut named = Vec::new();
        for id in state.tenants.agents_of(self.tenant).await? {
            if let Some(agent) = state.hub.storage().agents.load_agent(id).await?
                && agent.name == name_or_id
            {
                named.push(id);
            }
        }
        match named.as_slice() {
            [id] => Ok(*id),
            [] => Err(ApiError::not_found(format_args!("agent `{name_or_id}`"))),
            // Names are unique per tenant; agents created before they were may still share one.
            _ => Err(ApiError::invalid(format!(
                "{} agents are named `{name_or_id}`: name the one you mean by its id, or rename one",
                named.len()
            ))),
        }
    }

    /// Checks that the caller's tenant owns `agent`: otherwise `404`, exactly as for an agent
    /// that does not exist, so ids of other tenants' agents cannot be probed.
    pub async fn owns(&self, state: &AppState, agent: AgentId) -> ApiResult<()> {
        match state.tenants.owner(agent).await? {
            Some(owner) if owner == self.tenant => Ok(()),
            _ => Err(ApiError::not_found(format_args!("agent {agent}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_exactly() {
        assert!(same("mgk_abc", "mgk_abc"));
        assert!(!same("mgk_abc", "mgk_abd"));
        assert!(!same("mgk_abc", "mgk_ab"));
    }

    #[test]
    fn keys_come_from_bearer_or_x_api_key() {
        let parts = |name: &str, value: &str| {
            let (parts, ()) = axum::http::Request::builder()
                .header(name, value)
                .body(())
                .unwrap()
                .into_parts();
            parts
        };
        assert_eq!(presented(&parts("authorization", "Bearer k1")), Some("k1"));
        assert_eq!(
            presented(&parts("authorization", "bearer  k1 ")),
            Some("k1")
        );
        assert_eq!(presented(&parts("authorization", "Basic k1")), None);
        assert_eq!(presented(&parts("x-api-key", "k2")), Some("k2"));
    }
}
