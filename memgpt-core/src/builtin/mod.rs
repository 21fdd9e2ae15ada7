//! The built-in MemGPT functions, defined with [`memgpt_fn`](crate::memgpt_fn) like any user
//! tool.
//!
//! | function | what it does |
//! |---|---|
//! | `send_message` | talks to the user (terminal: ends the turn) |
//! | `pause_heartbeats` | ignores timer events for a while |
//! | `core_memory_append` / `core_memory_replace` | edits working context |
//! | `archival_memory_insert` / `archival_memory_search` | writes and pages through archival storage |
//! | `archival_memory_update` / `archival_memory_forget` / `archival_memory_search_as_of` | supersedes or retires a fact, searches the facts of a past day (opt-in: [`FACT_FUNCTIONS`]) |
//! | `conversation_search` / `conversation_search_date` | pages through recall storage |
//! | `memory_rethink` / `memory_finish_edits` | rewrites a block as a whole, ends a consolidation turn (opt-in: [`CONSOLIDATION_FUNCTIONS`]) |
//! | `memory` / `memory_apply_patch` | Letta's memory tools: view, create, edit, rename, describe and delete blocks by path or patch (opt-in) |
//! | `skill` | loads a skill's files into working context, unloads them, lists the skills (opt-in; offered to agents with skills) |
//! | `send_message_to_agent` | writes to another agent, waiting for its reply or not (opt-in; see [`crate::messaging`]) |

mod agents;
mod archival;
mod consolidation;
mod core_memory;
mod facts;
mod memory_tool;
mod messaging;
mod recall;

use std::fmt::Write;

use chrono::{DateTime, Utc};

use crate::store::SearchPage;
use crate::time::format_time;

pub use crate::config::{CONSOLIDATION_FUNCTIONS, DEFAULT_FUNCTIONS, FACT_FUNCTIONS};

/// Longest text shown per search hit; longer hits are cut (the full text stays in storage).
/// A default page of five hits then fits the agent's 6,000-character function-output limit.
const MAX_HIT_CHARS: usize = 1_000;

/// Renders one page of results so the LLM knows where it is and whether to page further.
fn render_page<T>(
    page: &SearchPage<T>,
    mut line: impl FnMut(&T) -> (DateTime<Utc>, String),
) -> String {
    if page.total == 0 {
        return "No results found.".to_owned();
    }
    let last_page = page.page_count() - 1;
    if page.hits.is_empty() {
        return format!(
            "Page {} is past the end: the {} results fill pages 0-{last_page}.",
            page.page.number, page.total
        );
    }
    let first = page.page.offset() + 1;
    let mut out = format!(
        "Showing results {first}-{} of {} (page {} of 0-{last_page}):",
        first + page.hits.len() - 1,
        page.total,
        page.page.number
    );
    for (i, hit) in page.hits.iter().enumerate() {
        let (time, text) = line(&hit.item);
        let _ = write!(
            out,
            "\n{}. [{}] {}",
            first + i,
            format_time(time),
            truncate(&text)
        );
    }
    if page.has_more() {
        let _ = write!(
            out,
            "\nMore results: call again with page={}.",
            page.page.number + 1
        );
    }
    out
}

fn truncate(text: &str) -> String {
    let flat = text.replace('\n', " ");
    match flat.char_indices().nth(MAX_HIT_CHARS) {
        Some((cut, _)) => format!("{}... (truncated)", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Hit, Page};
    use chrono::TimeZone;

    #[test]
    fn pages_say_where_they_are() {
        let t = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
        let page = SearchPage {
            hits: vec![
                Hit {
                    item: "a",
                    score: 1.0,
                },
                Hit {
                    item: "b",
                    score: 0.5,
                },
            ],
            page: Page::new(1, 2),
            total: 5,
        };
        let text = render_page(&page, |s| (t, s.to_string()));
        assert_eq!(
            text,
            "Showing results 3-4 of 5 (page 1 of 0-2):\n3. [2024-01-01T00:00:00Z] a\n4. [2024-01-01T00:00:00Z] b\n\
             More results: call again with page=2."
        );
        let past = SearchPage::<&str> {
            hits: vec![],
            page: Page::new(9, 2),
            total: 5,
        };
        assert_eq!(
            render_page(&past, |s| (t, s.to_string())),
            "Page 9 is past the end: the 5 results fill pages 0-2."
        );
        let none = SearchPage::<&str> {
            hits: vec![],
            page: Page::new(0, 2),
            total: 0,
        };
        assert_eq!(
            render_page(&none, |s| (t, s.to_string())),
            "No results found."
        );
    }

    #[test]
    fn long_hits_are_cut() {
        let long = "é".repeat(MAX_HIT_CHARS + 10);
        assert!(truncate(&long).ends_with("... (truncated)"));
        assert_eq!(truncate("a\nb"), "a b");
    }
}
