use crate::function::{ToolContext, ToolError};
use crate::memgpt_fn;

/// Saves text to archival memory, your unlimited long-term store. Phrase it so it can be
/// found later on its own.
#[memgpt_fn]
async fn archival_memory_insert(
    ctx: &mut ToolContext<'_>,
    /// The text to store.
    content: String,
) -> Result<String, ToolError> {
    let ids = ctx
        .insert_archival(&content, serde_json::Map::new())
        .await?;
    let passages = if ids.len() == 1 {
        "1 passage".to_owned()
    } else {
        format!("{} passages", ids.len())
    };
    Ok(format!(
        "Stored as {passages}; archival memory now holds {}.",
        ctx.archival_count()
    ))
}

/// Searches archival memory by meaning and keywords. Results are paginated.
#[memgpt_fn]
async fn archival_memory_search(
    ctx: &mut ToolContext<'_>,
    /// What to look for.
    query: String,
    /// Page of results, from 0 (default 0).
    page: Option<u32>,
) -> Result<String, ToolError> {
    let page = ctx
        .search_archival(&query, page.unwrap_or(0) as usize)
        .await?;
    Ok(super::render_page(&page, |p| {
        (p.created_at, p.text.clone())
    }))
}
