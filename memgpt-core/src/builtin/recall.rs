//! `conversation_search` and `conversation_search_date`: the paper's recall storage functions.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::function::{FunctionContext, FunctionError, RecallResults};
use crate::memgpt_fn;
use crate::message::{Message, MessageKind};
use crate::store::{Page, RecallQuery, TimeRange};

/// Whose messages a conversation search looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum ConversationRole {
    /// The user's messages.
    User,
    /// Your own messages.
    Assistant,
}

impl ConversationRole {
    fn kind(self) -> MessageKind {
        match self {
            ConversationRole::User => MessageKind::User,
            ConversationRole::Assistant => MessageKind::Assistant,
        }
    }
}

/// Searches past conversation (recall memory) by meaning and keywords; people and dates named in
/// the query count. Paginated.
#[memgpt_fn]
async fn conversation_search(
    ctx: &mut FunctionContext<'_>,
    /// What to look for.
    query: String,
    /// Page of results, from 0 (default 0).
    page: Option<u32>,
    /// Only these roles (default both).
    roles: Option<Vec<ConversationRole>>,
    /// Earliest day, YYYY-MM-DD.
    start_date: Option<String>,
    /// Last day (inclusive), YYYY-MM-DD.
    end_date: Option<String>,
) -> Result<String, FunctionError> {
    let range = time_range(start_date.as_deref(), end_date.as_deref())?;
    let mut search = RecallQuery::text(
        query,
        Page::new(page.unwrap_or(0) as usize, ctx.settings().page_size),
    );
    search.range = range;
    if let Some(roles) = roles.filter(|r| !r.is_empty()) {
        search.kinds = roles.into_iter().map(ConversationRole::kind).collect();
        search.kinds.dedup();
    }
    let results = ctx.search_recall_and_mark_used(&search).await?;
    Ok(render(&results))
}

/// Lists past conversation (recall memory) between two dates, oldest first. Paginated.
#[memgpt_fn]
async fn conversation_search_date(
    ctx: &mut FunctionContext<'_>,
    /// First day, YYYY-MM-DD (or an RFC 3339 time).
    start_date: String,
    /// Last day, inclusive, YYYY-MM-DD (or an RFC 3339 time).
    end_date: String,
    /// Page of results, from 0 (default 0).
    page: Option<u32>,
) -> Result<String, FunctionError> {
    let range = time_range(Some(&start_date), Some(&end_date))?;
    let query = RecallQuery::range(
        range,
        Page::new(page.unwrap_or(0) as usize, ctx.settings().page_size),
    );
    let results = ctx.search_recall_and_mark_used(&query).await?;
    Ok(render(&results))
}

fn render(results: &RecallResults) -> String {
    let page = super::render_page(&results.page, render_message);
    match &results.note {
        Some(note) => format!("({note})\n{page}"),
        None => page,
    }
}

/// The range from optional first and last days; the last day is included.
pub(super) fn time_range(
    start: Option<&str>,
    end: Option<&str>,
) -> Result<TimeRange, FunctionError> {
    let range = TimeRange {
        start: start
            .filter(|s| !s.trim().is_empty())
            .map(|s| parse_bound("start_date", s, false))
            .transpose()?,
        end: end
            .filter(|s| !s.trim().is_empty())
            .map(|s| parse_bound("end_date", s, true))
            .transpose()?,
    };
    if let (Some(start), Some(end)) = (range.start, range.end)
        && start >= end
    {
        return Err(FunctionError::new(format!(
            "start_date ({}) must be before end_date ({})",
            start.date_naive(),
            (end - Duration::seconds(1)).date_naive()
        )));
    }
    Ok(range)
}

/// Parses a date (whole day) or an RFC 3339 time. An end date includes its whole day.
pub(super) fn parse_bound(
    field: &str,
    value: &str,
    end: bool,
) -> Result<DateTime<Utc>, FunctionError> {
    let value = value.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        let t = t.with_timezone(&Utc);
        return Ok(if end { t + Duration::seconds(1) } else { t });
    }
    let day = NaiveDate::parse_from_str(value, "%Y-%m-%d").map_err(|_| {
        FunctionError::new(format!(
            "`{field}`: could not read \"{value}\" as a date; use YYYY-MM-DD"
        ))
    })?;
    let day = if end {
        day.succ_opt().unwrap_or(day)
    } else {
        day
    };
    Ok(day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
}

fn render_message(m: &Message) -> (DateTime<Utc>, String) {
    let who = match (m.kind, &m.name) {
        (MessageKind::User | MessageKind::Assistant, Some(name)) if !name.trim().is_empty() => {
            name.as_str()
        }
        (MessageKind::User, _) => "user",
        (MessageKind::Assistant, _) => "assistant",
        (other, _) => other.as_str(),
    };
    (m.created_at, format!("{who}: {}", m.searchable_text()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn date_bounds_cover_whole_days() {
        let start = parse_bound("start_date", "2024-03-01", false).unwrap();
        let end = parse_bound("end_date", "2024-03-01", true).unwrap();
        assert_eq!(start, Utc.with_ymd_and_hms(2024, 3, 1, 0, 0, 0).unwrap());
        assert_eq!(end, Utc.with_ymd_and_hms(2024, 3, 2, 0, 0, 0).unwrap());
        let t = parse_bound("start_date", "2024-03-01T10:00:00Z", false).unwrap();
        assert_eq!(t, Utc.with_ymd_and_hms(2024, 3, 1, 10, 0, 0).unwrap());
        let err = parse_bound("start_date", "last week", false).unwrap_err();
        assert_eq!(
            err.message(),
            "`start_date`: could not read \"last week\" as a date; use YYYY-MM-DD"
        );
    }

    #[test]
    fn ranges_may_be_open_and_must_be_ordered() {
        let r = time_range(Some("2024-03-01"), None).unwrap();
        assert!(r.start.is_some() && r.end.is_none());
        assert!(time_range(None, Some(" ")).unwrap().is_unbounded());
        let err = time_range(Some("2024-03-02"), Some("2024-03-01")).unwrap_err();
        assert_eq!(
            err.message(),
            "start_date (2024-03-02) must be before end_date (2024-03-01)"
        );
        assert!(time_range(Some("2024-03-01"), Some("2024-03-01")).is_ok());
    }
}
