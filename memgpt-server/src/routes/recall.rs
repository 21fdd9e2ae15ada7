//! Recall storage: the whole conversation, searched as `conversation_search` searches it.

use aide::axum::ApiRouter;
use aide::axum::routing::post;
use axum::Json;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use memgpt_core::retrieval::FoundBy;
use memgpt_core::store::{RecallQuery, TimeRange};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::params::{AgentPath, page_of};
use crate::auth::Caller;
use crate::body::Body;
use crate::error::ApiResult;
use crate::state::AppState;
use crate::views::{MessageView, PageView};

pub(super) fn routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route("/v1/agents/{agent_id}/recall/search", post(search))
}

/// A recall search.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchRecall {
    /// What to look for; without it, the messages of the date range, oldest first.
    query: Option<String>,
    /// Only messages at or after this time.
    start: Option<DateTime<Utc>>,
    /// Only messages before this time.
    end: Option<DateTime<Utc>>,
    /// The page, from 0.
    #[schemars(range(max = 1_000_000))]
    #[serde(default)]
    page: usize,
    /// Results per page (default 10).
    #[schemars(range(min = 1, max = 1000))]
    size: Option<usize>,
}

/// A message a search found, and why.
#[derive(Debug, Serialize, JsonSchema)]
struct RecallHit {
    /// The message.
    #[serde(flatten)]
    message: MessageView,
    /// Why it was found (not in listings): `words` (its own words hold a query term),
    /// `context` (only the turns just before it do: it is the context around a match, shown
    /// so the match reads in its conversation; its score is low) or `meaning` (its embedding is
    /// near the query's).
    #[serde(skip_serializing_if = "Option::is_none")]
    found_by: Option<FoundBy>,
}

/// Search results.
#[derive(Debug, Serialize, JsonSchema)]
struct RecallResults {
    /// The page.
    #[serde(flatten)]
    page: PageView<RecallHit>,
    /// Whether meaning ranked along with words.
    semantic: bool,
    /// How the results were found, when it matters (words only, and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// Searches the conversation (every message ever, evicted ones included).
async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Path(path): Path<AgentPath>,
    Body(request): Body<SearchRecall>,
) -> ApiResult<Json<RecallResults>> {
    let id = path.owned(&state, caller).await?;
    let page = page_of(request.page, request.size, 10)?;
    let range = TimeRange {
        start: request.start,
        end: request.end,
    };
    let query = match request.query.filter(|q| !q.trim().is_empty()) {
        Some(text) => RecallQuery {
            range,
            ..RecallQuery::text(text, page)
        },
        None => RecallQuery::range(range, page),
    };
    let agent = state.hub.lock(id).await?;
    let found = agent.search_recall(&query).await?;
    let mut why = found.found_by.iter().copied();
    let mut page = PageView::new(&found.page, |m| RecallHit {
        message: MessageView::from(m),
        found_by: None,
    });
    for hit in &mut page.items {
        hit.item.found_by = why.next();
    }
    Ok(Json(RecallResults {
        page,
        semantic: found.semantic,
        note: found.note.map(|n| crate::error::redact_addresses(&n)),
    }))
}
