//! Archival storage: insert, list, search, update, forget and delete passages.

use aide::axum::ApiRouter;
use aide::axum::routing::{delete, post};
use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use memgpt_core::ids::PassageId;
use memgpt_core::store::Validity;
use memgpt_core::store::{SearchMode, TimeRange};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::{AgentPath, PageQuery, page_of};
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult};
use crate::hub::LiveAgent;
use crate::query::Query;
use crate::reply::{Created, NoContent};
use crate::state::AppState;
use crate::views::{PageView, PassageView};

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route("/v1/agents/{agent_id}/archival", post(insert).get(list))
        .api_route("/v1/agents/{agent_id}/archival/search", post(search))
        .api_route(
            "/v1/agents/{agent_id}/archival/{passage_id}",
            delete(remove).patch(update),
        )
        .api_route(
            "/v1/agents/{agent_id}/archival/{passage_id}/forget",
            post(forget),
        )
}

/// Text to store.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct InsertPassages {
    /// The text; long text is split into passages as `archival_memory_insert` splits it.
    #[schemars(pattern(crate::routes::document::NOT_BLANK))]
    text: String,
    /// Tags for filtering searches.
    #[serde(default)]
    tags: Vec<String>,
}

/// Passages stored.
#[derive(Debug, Serialize, JsonSchema)]
struct Inserted {
    /// Their ids, in order.
    #[schemars(with = "Vec<String>")]
    ids: Vec<PassageId>,
}

/// Stores text in archival memory (split, embedded and committed as the agent's own inserts).
async fn insert(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    Body(request): Body<InsertPassages>,
) -> ApiResult<Created<Inserted>> {
    let id = path.owned(&state, caller).await?;
    if request.text.trim().is_empty() {
        return Err(ApiError::invalid("`text` is empty"));
    }
    let mut metadata = serde_json::Map::new();
    let tags: Vec<String> = request
        .tags
        .iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    if !tags.is_empty() {
        metadata.insert("tags".to_owned(), tags.into());
    }
    metadata.insert("source".to_owned(), "api".into());
    let mut agent = state.hub.lock(id).await?;
    let ids = agent.insert_archival(&request.text, metadata).await?;
    Ok(Created(Inserted { ids }))
}

/// The agent's passages, oldest first, a page at a time.
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    Query(query): Query<PageQuery>,
) -> ApiResult<Json<PageView<PassageView>>> {
    let id = path.owned(&state, caller).await?;
    let page = page_of(query.page, query.size, 50)?;
    let found = state.hub.storage().archival.list_passages(id, page).await?;
    Ok(Json(PageView::new(&found, |p| PassageView::from(p))))
}

/// How to rank.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    /// By meaning (embedding similarity).
    Vector,
    /// By words (BM25).
    Text,
    /// Both, fused.
    Hybrid,
}

/// An archival search.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchArchival {
    /// What to look for.
    query: String,
    /// How to rank (default: the agent's configured mode; words alone without an embedder).
    mode: Option<Mode>,
    /// Only passages with one of these tags.
    #[serde(default)]
    tags: Vec<String>,
    /// Only passages stored at or after this time.
    start: Option<DateTime<Utc>>,
    /// Only passages stored before this time.
    end: Option<DateTime<Utc>>,
    /// The facts valid at this time (default: the current facts; superseded, forgotten and
    /// expired passages are left out).
    as_of: Option<DateTime<Utc>>,
    /// Every passage, superseded, forgotten and expired ones included (overrides `as_of`).
    #[serde(default)]
    include_retired: bool,
    /// The page, from 0.
    #[schemars(range(max = 1_000_000))]
    #[serde(default)]
    page: usize,
    /// Results per page (default 10).
    #[schemars(range(min = 1, max = 1000))]
    size: Option<usize>,
}

/// Searches archival memory, ranked as `archival_memory_search` ranks.
async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    Body(request): Body<SearchArchival>,
) -> ApiResult<Json<PageView<PassageView>>> {
    let id = path.owned(&state, caller).await?;
    let page = page_of(request.page, request.size, 10)?;
    let mode = request.mode.map(|m| match m {
        Mode::Vector => SearchMode::Vector,
        Mode::Text => SearchMode::Text,
        Mode::Hybrid => SearchMode::Hybrid,
    });
    let range = TimeRange {
        start: request.start,
        end: request.end,
    };
    let validity = match (request.include_retired, request.as_of) {
        (true, _) => Validity::Any,
        (false, Some(at)) => Validity::AsOf(at),
        (false, None) => Validity::Current,
    };
    let agent = state.hub.lock(id).await?;
    let found = agent
        .search_archival(&request.query, mode, page, &request.tags, range, validity)
        .await?;
    Ok(Json(PageView::new(&found, |p| PassageView::from(p))))
}

/// `/v1/agents/{agent_id}/archival/{passage_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
struct PassagePath {
    /// The agent.
    agent_id: String,
    /// The passage.
    passage_id: String,
}

impl PassagePath {
    /// The caller's agent, loaded, and the passage id (an id that does not parse is a `404`,
    /// as a passage that does not exist).
    async fn live_passage(
        &self,
        state: &AppState,
        caller: Caller,
    ) -> ApiResult<(LiveAgent, PassageId)> {
        let agent = AgentPath {
            agent_id: self.agent_id.clone(),
        }
        .live(state, caller)
        .await?;
        let passage = self.passage_id.parse().map_err(|_| self.not_found())?;
        Ok((agent, passage))
    }

    /// The `404` of a passage that does not exist (or is another agent's).
    fn not_found(&self) -> ApiError {
        ApiError::not_found(format_args!("passage {}", self.passage_id))
    }
}

/// Deletes a passage.
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<PassagePath>,
) -> ApiResult<NoContent> {
    let (mut agent, passage) = path.live_passage(&state, caller).await?;
    if agent.delete_archival(&[passage]).await?.is_empty() {
        return Err(path.not_found());
    }
    Ok(NoContent)
}

/// The new version of a fact.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdatePassage {
    /// The new, complete text (split like an insert; the old passage's tags are kept).
    #[schemars(pattern(crate::routes::document::NOT_BLANK))]
    text: String,
}

/// Replaces a current fact with its new version, as `archival_memory_update` does: the new
/// passages are stored, true from now, and the old one is superseded by them (searches as of
/// an earlier time still find it). `409` if the passage is no longer current.
async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<PassagePath>,
    Body(request): Body<UpdatePassage>,
) -> ApiResult<Created<Inserted>> {
    if request.text.trim().is_empty() {
        return Err(ApiError::invalid("`text` is empty"));
    }
    let (mut agent, passage) = path.live_passage(&state, caller).await?;
    let ids = agent.update_archival(passage, &request.text).await?;
    Ok(Created(Inserted { ids }))
}

/// Why a fact is retired.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ForgetPassage {
    /// Why it is no longer true.
    #[schemars(pattern(crate::routes::document::NOT_BLANK))]
    reason: String,
    /// When it stops being a current fact (default: now; a time in the past counts as now).
    at: Option<DateTime<Utc>>,
}

/// Retires a current fact now (or at `at`), as `archival_memory_forget` does: from then on
/// searches no longer return it unless asked for an earlier time or for retired passages.
/// `409` if it is no longer current.
async fn forget(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<PassagePath>,
    Body(request): Body<ForgetPassage>,
) -> ApiResult<NoContent> {
    let reason = request.reason.trim();
    if reason.is_empty() {
        return Err(ApiError::invalid("`reason` is empty"));
    }
    let (mut agent, passage) = path.live_passage(&state, caller).await?;
    match request.at {
        Some(at) => agent.forget_archival_at(passage, reason, at).await?,
        None => agent.forget_archival(passage, reason).await?,
    }
    Ok(NoContent)
}
