//! `archival_memory_update`, `archival_memory_forget` and `archival_memory_search_as_of`:
//! facts that change. Offered when an agent lists them
//! ([`FACT_FUNCTIONS`](crate::config::FACT_FUNCTIONS)); `archival_memory_search` then shows
//! passage ids.

use chrono::{DateTime, Duration, Utc};

use super::archival::{clean_tags, render_passages, stored};
use crate::function::{FunctionContext, FunctionError};
use crate::ids::PassageId;
use crate::memgpt_fn;
use crate::store::TimeRange;

/// Replaces a fact in archival memory with its new version (the old one is kept as history and
/// no longer shows in searches). Use it when something you stored has changed.
#[memgpt_fn]
async fn archival_memory_update(
    ctx: &mut FunctionContext<'_>,
    /// The id of the passage to replace, as archival_memory_search shows it.
    id: String,
    /// The new, complete text of the fact.
    content: String,
) -> Result<String, FunctionError> {
    let id = passage_id(&id)?;
    let ids = ctx.update_archival(id, &content).await?;
    Ok(format!("Passage {id} is superseded by {}.", stored(&ids)))
}

/// Retires a fact from archival memory that is wrong or no longer true, now or after some
/// days (kept as history; it no longer shows in searches).
#[memgpt_fn]
async fn archival_memory_forget(
    ctx: &mut FunctionContext<'_>,
    /// The id of the passage, as archival_memory_search shows it.
    id: String,
    /// Why it is no longer true.
    reason: String,
    /// Days until it stops being true (default 0: now).
    after_days: Option<u32>,
) -> Result<String, FunctionError> {
    let id = passage_id(&id)?;
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(FunctionError::new(
            "give a reason for forgetting the passage",
        ));
    }
    let days = after_days.unwrap_or(0);
    let at = ctx.now() + Duration::days(i64::from(days));
    ctx.forget_archival(id, reason, at).await?;
    Ok(if days == 0 {
        format!("Passage {id} is no longer a current fact.")
    } else {
        format!("Passage {id} stops being a current fact in {days} days.")
    })
}

/// Searches archival memory as it stood on a past day: the facts true then, including ones
/// since updated or forgotten. Paginated.
#[memgpt_fn]
async fn archival_memory_search_as_of(
    ctx: &mut FunctionContext<'_>,
    /// What to look for.
    query: String,
    /// The day, YYYY-MM-DD (its end), or an RFC 3339 time.
    as_of: String,
    /// Page of results, from 0 (default 0).
    page: Option<u32>,
    /// Only passages with one of these tags.
    tags: Option<Vec<String>>,
) -> Result<String, FunctionError> {
    let at = as_of_instant(&as_of)?;
    let page = ctx
        .search_archival(
            &query,
            page.unwrap_or(0) as usize,
            &clean_tags(tags),
            TimeRange::default(),
            Some(at),
        )
        .await?;
    Ok(render_passages(&page, ctx.settings().show_passage_ids))
}

/// The instant of an `as_of` argument: an RFC 3339 time, or a day's last moment (the facts
/// as they stood at the end of that day).
fn as_of_instant(value: &str) -> Result<DateTime<Utc>, FunctionError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value.trim()) {
        return Ok(t.with_timezone(&Utc));
    }
    let next_day = super::recall::parse_bound("as_of", value, true)?;
    Ok(next_day - Duration::microseconds(1))
}

/// A passage id the model wrote.
fn passage_id(id: &str) -> Result<PassageId, FunctionError> {
    id.trim().parse().map_err(|_| {
        FunctionError::new(format!(
            "`{id}` is not a passage id: use an id shown by archival_memory_search"
        ))
    })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn as_of_is_the_end_of_a_day_or_an_exact_time() {
        assert_eq!(
            as_of_instant("2025-03-15").unwrap(),
            Utc.with_ymd_and_hms(2025, 3, 16, 0, 0, 0).unwrap() - Duration::microseconds(1)
        );
        assert_eq!(
            as_of_instant("2025-03-15T10:00:00+02:00").unwrap(),
            Utc.with_ymd_and_hms(2025, 3, 15, 8, 0, 0).unwrap()
        );
        assert!(as_of_instant("last week").is_err());
        assert!(passage_id("nope").is_err());
    }
}
