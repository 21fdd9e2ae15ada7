//! How the SQL backends assemble result pages: one rule for counting, stopping past the end,
//! binding a page as `LIMIT`/`OFFSET`, and attaching ranked scores, shared by SQLite and
//! PostgreSQL.

use std::collections::HashMap;

use memgpt_core::store::{Hit, Page, SearchPage, StoreError};

/// `n` as an SQL integer (saturating: a huge page number from an LLM never wraps).
pub(crate) fn sql_int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A page of a chronological listing: `total` items match, and `rows(limit, offset)` reads the
/// page's items in order. Nothing is read for a page past the end.
pub(crate) async fn listing<T, F, Fut>(
    page: Page,
    total: usize,
    rows: F,
) -> Result<SearchPage<T>, StoreError>
where
    F: FnOnce(i64, i64) -> Fut,
    Fut: Future<Output = Result<Vec<T>, StoreError>>,
{
    if page.offset() >= total {
        return Ok(SearchPage {
            hits: Vec::new(),
            page,
            total,
        });
    }
    let hits = rows(sql_int(page.size), sql_int(page.offset()))
        .await?
        .into_iter()
        .map(|item| Hit { item, score: 0.0 })
        .collect();
    Ok(SearchPage { hits, page, total })
}

/// The page of a full ranking (`(score, key)`, best first, cut at least as deep as the page)
/// of `total` results: `fetch` reads the page's items by key (in any order, each with its key)
/// and they come back in rank order with their scores.
pub(crate) async fn ranked<T, F, Fut>(
    ranked: Vec<(f32, i64)>,
    page: Page,
    total: usize,
    fetch: F,
) -> Result<SearchPage<T>, StoreError>
where
    F: FnOnce(Vec<i64>) -> Fut,
    Fut: Future<Output = Result<Vec<(i64, T)>, StoreError>>,
{
    let ranked = page.slice(ranked);
    let keys: Vec<i64> = ranked.iter().map(|(_, key)| *key).collect();
    let mut items: HashMap<i64, T> = fetch(keys).await?.into_iter().collect();
    let hits = ranked
        .into_iter()
        .filter_map(|(score, key)| items.remove(&key).map(|item| Hit { item, score }))
        .collect();
    Ok(SearchPage { hits, page, total })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn listings_stop_past_the_end_and_saturate() {
        let page = Page::new(usize::MAX, 5);
        let out: SearchPage<u8> = listing(page, 3, |_, _| async {
            panic!("a page past the end reads nothing")
        })
        .await
        .unwrap();
        assert_eq!((out.hits.len(), out.total), (0, 3));
        let out = listing(Page::new(1, 2), 5, |limit, offset| async move {
            Ok(vec![limit as u8, offset as u8])
        })
        .await
        .unwrap();
        assert_eq!(
            out.hits.iter().map(|h| h.item).collect::<Vec<_>>(),
            vec![2, 2]
        );
        assert_eq!(sql_int(usize::MAX), i64::MAX);
    }

    #[tokio::test]
    async fn ranked_pages_keep_rank_order_and_scores() {
        let ranking = vec![(0.9, 7), (0.8, 3), (0.7, 5), (0.6, 1)];
        let out = ranked(ranking, Page::new(0, 3), 4, |keys| async move {
            assert_eq!(keys, vec![7, 3, 5]);
            // Rows come back in storage order; one vanished meanwhile.
            Ok(vec![(3, "c"), (7, "g")])
        })
        .await
        .unwrap();
        let got: Vec<_> = out.hits.iter().map(|h| (h.item, h.score)).collect();
        assert_eq!(got, vec![("g", 0.9), ("c", 0.8)]);
        assert_eq!(out.total, 4);
    }
}
