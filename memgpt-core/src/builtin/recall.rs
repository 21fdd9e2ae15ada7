use chrono::{DateTime, Duration, NaiveDate, Utc};

use crate::function::{ToolContext, ToolError};
use crate::memgpt_fn;
use crate::message::{Message, MessageKind};
use crate::store::{Page, RecallQuery, TimeRange};

/// Searches past conversation (recall memory) by keywords. Results are paginated.
#[memgpt_fn]
async fn conversation_search(
    ctx: &mut ToolContext<'_>,
    /// Words to look for.
    query: String,
    /// Page of results, from 0 (default 0).
    page: Option<u32>,
) -> Result<String, ToolError> {
    let query = RecallQuery::text(
        query,
        Page::new(page.unwrap_or(0) as usize, ctx.settings().page_size),
    );
    let page = ctx.search_recall(&query).await?;
    Ok(super::render_page(&page, render_message))
}

/// Lists past conversation (recall memory) between two dates, oldest first. Paginated.
#[memgpt_fn]
async fn conversation_search_date(
    ctx: &mut ToolContext<'_>,
    /// First day, YYYY-MM-DD (or an RFC 3339 time).
    start_date: String,
    /// Last day, inclusive, YYYY-MM-DD (or an RFC 3339 time).
    end_date: String,
    /// Page of results, from 0 (default 0).
    page: Option<u32>,
) -> Result<String, ToolError> {
    let start = parse_bound("start_date", &start_date, false)?;
    let end = parse_bound("end_date", &end_date, true)?;
    if start >= end {
        return Err(ToolError::new(format!(
            "start_date ({start_date}) must be before end_date ({end_date})"
        )));
    }
    let range = TimeRange {
        start: Some(start),
        end: Some(end),
    };
    let query = RecallQuery::range(
        range,
        Page::new(page.unwrap_or(0) as usize, ctx.settings().page_size),
    );
    let page = ctx.search_recall(&query).await?;
    Ok(super::render_page(&page, render_message))
}

/// Parses a date (whole day) or an RFC 3339 time. An end date includes its whole day.
fn parse_bound(field: &str, value: &str, end: bool) -> Result<DateTime<Utc>, ToolError> {
    let value = value.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        let t = t.with_timezone(&Utc);
        return Ok(if end { t + Duration::seconds(1) } else { t });
    }
    let day = NaiveDate::parse_from_str(value, "%Y-%m-%d").map_err(|_| {
        ToolError::new(format!(
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
    let who = match m.kind {
        MessageKind::User => "user",
        MessageKind::Assistant => "assistant",
        other => other.as_str(),
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
}
