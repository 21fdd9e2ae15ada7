//! `archival_memory_insert` and `archival_memory_search`: the paper's archival storage
//! functions.

use crate::function::{FunctionContext, FunctionError};
use crate::ids::PassageId;
use crate::memgpt_fn;
use crate::store::{Passage, SearchPage, TAGS_KEY};

/// Saves text to archival memory, your unlimited long-term store. Phrase it so it can be
/// found later on its own.
#[memgpt_fn]
async fn archival_memory_insert(
    ctx: &mut FunctionContext<'_>,
    /// The text to store.
    content: String,
    /// Labels to filter searches by later.
    tags: Option<Vec<String>>,
) -> Result<String, FunctionError> {
    let tags = clean_tags(tags);
    let mut metadata = serde_json::Map::new();
    if !tags.is_empty() {
        metadata.insert(TAGS_KEY.into(), serde_json::json!(tags));
    }
    let ids = ctx.insert_archival(&content, metadata).await?;
    let stored = if ctx.settings().show_passage_ids {
        stored(&ids)
    } else if ids.len() == 1 {
        "1 passage".to_owned()
    } else {
        format!("{} passages", ids.len())
    };
    Ok(format!(
        "Stored as {stored}; archival memory now holds {}.",
        ctx.archival_count()
    ))
}

/// Searches archival memory by meaning and keywords. Paginated.
#[memgpt_fn]
async fn archival_memory_search(
    ctx: &mut FunctionContext<'_>,
    /// What to look for.
    query: String,
    /// Page of results, from 0 (default 0).
    page: Option<u32>,
    /// Only passages with one of these tags.
    tags: Option<Vec<String>>,
    /// Earliest day stored, YYYY-MM-DD.
    start_date: Option<String>,
    /// Last day stored (inclusive), YYYY-MM-DD.
    end_date: Option<String>,
) -> Result<String, FunctionError> {
    let range = super::recall::time_range(start_date.as_deref(), end_date.as_deref())?;
    let page = ctx
        .search_archival(
            &query,
            page.unwrap_or(0) as usize,
            &clean_tags(tags),
            range,
            None,
        )
        .await?;
    Ok(render_passages(&page, ctx.settings().show_passage_ids))
}

/// A page of passages for the model: each with its id when the agent can update or forget
/// passages, its tags, and when it stops (or stopped) being a current fact, if it does
/// (superseded, or valid until then).
pub(super) fn render_passages(page: &SearchPage<Passage>, show_ids: bool) -> String {
    super::render_page(page, |p| {
        let mut text = if show_ids {
            format!("(id {}) ", p.id)
        } else {
            String::new()
        };
        let tags = p.tags();
        if !tags.is_empty() {
            text.push_str(&format!("[tags: {}] ", tags.join(", ")));
        }
        if let Some(to) = p.valid_to {
            let state = if p.superseded_by.is_some() {
                "superseded"
            } else {
                "valid until"
            };
            text.push_str(&format!("[{state} {}] ", crate::time::format_time(to)));
        }
        text.push_str(&p.text);
        (p.created_at, text)
    })
}

/// "passage <id>" or "N passages (<id>, ...)".
pub(super) fn stored(ids: &[PassageId]) -> String {
    match ids {
        [one] => format!("passage {one}"),
        many => format!(
            "{} passages ({})",
            many.len(),
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Tags trimmed, without empty or repeated ones.
pub(super) fn clean_tags(tags: Option<Vec<String>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for tag in tags.unwrap_or_default() {
        let tag = tag.trim();
        if !tag.is_empty() && !out.iter().any(|t| t == tag) {
            out.push(tag.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_cleaned() {
        assert_eq!(
            clean_tags(Some(vec![
                " work ".into(),
                "".into(),
                "work".into(),
                "home".into()
            ])),
            ["work", "home"]
        );
        assert!(clean_tags(None).is_empty());
    }
}
