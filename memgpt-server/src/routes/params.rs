//! What many routes read from a request: the agent in the path ([`AgentPath`]) and the page
//! of a listing ([`PageQuery`], [`page_of`]).

use memgpt_core::ids::AgentId;
use memgpt_core::store::{AgentState, Page};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::hub::LiveAgent;
use crate::state::AppState;

/// `/v1/agents/{agent_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct AgentPath {
    /// The agent's id.
    pub(crate) agent_id: String,
}

impl AgentPath {
    /// The id; a malformed one is an agent that does not exist (`404`).
    pub(crate) fn id(&self) -> ApiResult<AgentId> {
        self.agent_id
            .parse()
            .map_err(|_| ApiError::not_found(format_args!("agent {}", self.agent_id)))
    }

    /// The id of the caller's agent: `404` if it is not theirs (or does not exist).
    pub(crate) async fn owned(&self, state: &AppState, caller: Caller) -> ApiResult<AgentId> {
        let id = self.id()?;
        caller.owns(state, id).await?;
        Ok(id)
    }

    /// The caller's agent as stored (for reads: no lock, whatever process committed last).
    pub(crate) async fn stored(&self, state: &AppState, caller: Caller) -> ApiResult<AgentState> {
        let id = self.owned(state, caller).await?;
        state
            .hub
            .storage()
            .agents
            .load_agent(id)
            .await?
            .ok_or_else(|| ApiError::not_found(format_args!("agent {id}")))
    }

    /// The caller's agent, locked for this request.
    pub(crate) async fn live(&self, state: &AppState, caller: Caller) -> ApiResult<LiveAgent> {
        let id = self.owned(state, caller).await?;
        state.hub.lock(id).await
    }
}

/// `?page=N&size=M` of a listing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PageQuery {
    /// The page, from 0 (default 0).
    #[schemars(range(max = 1_000_000))]
    #[serde(default)]
    pub(crate) page: usize,
    /// Results per page, 1-1000 (default 50).
    #[schemars(range(min = 1, max = 1000))]
    pub(crate) size: Option<usize>,
}

/// The largest page a listing or search returns.
pub(crate) const MAX_PAGE: usize = 1_000;

/// The highest page number a listing or search takes.
pub(crate) const MAX_PAGE_NUMBER: usize = 1_000_000;

/// The page a request asks for: `number` (at most [`MAX_PAGE_NUMBER`]) of `size` results
/// (default `default`, at most [`MAX_PAGE`]).
pub(crate) fn page_of(number: usize, size: Option<usize>, default: usize) -> ApiResult<Page> {
    if number > MAX_PAGE_NUMBER {
        return Err(ApiError::invalid(format!(
            "page {number} is out of range: use 0 to {MAX_PAGE_NUMBER}"
        )));
    }
    Ok(Page::new(number, page_size(size, default)?))
}

/// A page size from a request: default `default`, at most [`MAX_PAGE`].
pub(crate) fn page_size(size: Option<usize>, default: usize) -> ApiResult<usize> {
    match size {
        None => Ok(default),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::invalid(format!(
            "size {n} is out of range: use 1 to {MAX_PAGE}"
        ))),
    }
}
