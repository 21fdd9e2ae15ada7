//! Archival storage: insert, list, search, delete passages.

use aide::axum::ApiRouter;
use aide::axum::routing::{delete, post};
use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use memgpt_core::ids::PassageId;
use memgpt_core::store::{SearchMode, TimeRange};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::{AgentPath, PageQuery, page_of};
use crate::auth::Caller;
use crate::body::Body;
use crate::error::{ApiError, ApiResult};
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
            delete(remove),
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
    let agent = state.hub.lock(id).await?;
    let found = agent
        .search_archival(&request.query, mode, page, &request.tags, range)
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

/// Deletes a passage.
async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<PassagePath>,
) -> ApiResult<NoContent> {
    let agent_path = AgentPath {
        agent_id: path.agent_id.clone(),
    };
    let mut agent = agent_path.live(&state, caller).await?;
    let not_found = || ApiError::not_found(format_args!("passage {}", path.passage_id));
    let passage: PassageId = path.passage_id.parse().map_err(|_| not_found())?;
    if agent.delete_archival(&[passage]).await?.is_empty() {
        return Err(not_found());
    }
    Ok(NoContent)
}
