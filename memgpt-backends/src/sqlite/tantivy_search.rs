//! The searches both tantivy text indexes run (recall's, `tantivy_recall`, and archival's,
//! `tantivy_archival`): a pruned union of the query's terms with filters checked on fast
//! fields, match counts and term statistics.
//!
//! Documents hold the analysed terms memgpt-core's analyzer wrote (joined by spaces); a
//! whitespace tokenizer splits them back apart, so tantivy sees exactly the terms every store
//! sees. A search is a union of the query's terms, which tantivy runs with block-max WAND (the
//! best `k` without scoring every match); filters are checked on fast fields as documents come,
//! so a filter never costs the pruning.

use memgpt_core::store::StoreError;
use tantivy::columnar::Column;
use tantivy::query::{BooleanQuery, EnableScoring, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, TextFieldIndexing, TextOptions};
use tantivy::{DocId, Score, SegmentReader, Term};

use crate::codec::{corrupt, db};
use crate::vector::TopK;

/// The tokenizer of the terms field: documents are analysed terms joined by spaces.
pub(super) const TERMS_TOKENIZER: &str = "memgpt_terms";

/// The options of a field of analysed terms.
pub(super) fn terms_options() -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TERMS_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    )
}

pub(super) fn tantivy_error(context: &str, e: tantivy::TantivyError) -> StoreError {
    db(context, e)
}

/// A fast string column of a segment and the ordinals of the admitted values in it.
pub(super) type AdmittedOrds = (Column<u64>, Vec<u64>);

/// The fast string column `name` of a segment and the ordinals in it of those of `values` the
/// segment holds (`None` when it holds none of them: no document of it can match).
pub(super) fn term_ords<'v>(
    segment: &SegmentReader,
    name: &str,
    values: impl IntoIterator<Item = &'v str>,
) -> Result<Option<AdmittedOrds>, StoreError> {
    let reading = |e: tantivy::TantivyError| tantivy_error("reading a text index", e);
    let io = |e: std::io::Error| db("reading a text index", e);
    let (terms, column) = segment
        .fast_fields()
        .str(name)
        .map_err(reading)?
        .map(|c| c.into_parts())
        .ok_or_else(|| corrupt(format!("a text index has no {name} column")))?;
    let mut ords = Vec::new();
    for value in values {
        if let Some(ord) = terms.term_ord(value).map_err(io)? {
            ords.push(ord);
        }
    }
    Ok((!ords.is_empty()).then_some((column, ords)))
}

/// In how many live documents each of `terms` occurs in `field`, exactly: in a segment
/// holding deleted documents (until a merge drops them) the term's live documents are counted,
/// so the figure depends on the rows indexed, never on the index's history.
pub(super) fn live_document_frequencies(
    searcher: &tantivy::Searcher,
    field: Field,
    terms: &[String],
) -> Result<Vec<u64>, StoreError> {
    let reading = |e| tantivy_error("reading a text index", e);
    let io = |e: std::io::Error| db("reading a text index", e);
    let mut frequencies = vec![0u64; terms.len()];
    for segment in searcher.segment_readers() {
        let index = segment.inverted_index(field).map_err(reading)?;
        let alive = segment.alive_bitset();
        for (text, frequency) in terms.iter().zip(&mut frequencies) {
            let term = Term::from_field_text(field, text);
            let Some(info) = index.get_term_info(&term).map_err(io)? else {
                continue;
            };
            let Some(alive) = alive else {
                *frequency += u64::from(info.doc_freq);
                continue;
            };
            let mut postings = index
                .read_postings_from_terminfo(&info, IndexRecordOption::Basic)
                .map_err(io)?;
            let mut doc = tantivy::DocSet::doc(&postings);
            while doc != tantivy::TERMINATED {
                if alive.is_alive(doc) {
                    *frequency += 1;
                }
                doc = tantivy::DocSet::advance(&mut postings);
            }
        }
    }
    Ok(frequencies)
}

/// The best `limit` documents holding any of `terms` in `field` that the segments' filters
/// admit, by tantivy's BM25, as the keys the filters give them, best first.
///
/// The words alone make a pure union of term queries, which tantivy searches with block-max
/// WAND (skipping blocks that cannot reach the top `limit`); `filter` builds each segment's
/// check (`None`: nothing in the segment can pass), run on fast fields as documents come, so
/// it never turns the search into scoring every match (a filter clause in the query would).
pub(super) fn pruned_top<F>(
    searcher: &tantivy::Searcher,
    field: Field,
    terms: &[String],
    limit: usize,
    mut filter: impl FnMut(&SegmentReader) -> Result<Option<F>, StoreError>,
) -> Result<Vec<i64>, StoreError>
where
    F: Fn(DocId) -> Option<i64>,
{
    if terms.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let reading = |e| tantivy_error("searching a text index", e);
    let words: Vec<(Occur, Box<dyn Query>)> = terms
        .iter()
        .map(|text| {
            let term = Term::from_field_text(field, text);
            let query: Box<dyn Query> =
                Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs));
            (Occur::Should, query)
        })
        .collect();
    let weight = BooleanQuery::new(words)
        .weight(EnableScoring::enabled_from_searcher(searcher))
        .map_err(reading)?;
    // The limit is the caller's candidate pool (bounded), never a page offset: a huge page
    // number cannot make the search allocate for it.
    let mut top = TopK::new(limit.min(memgpt_core::retrieval::MAX_CANDIDATES));
    for segment in searcher.segment_readers() {
        let Some(admits) = filter(segment)? else {
            continue;
        };
        let alive = segment.alive_bitset();
        // The score a document must beat to enter (tantivy skips what cannot).
        let threshold = |top: &TopK<i64>| top.threshold().unwrap_or(Score::MIN);
        weight
            .for_each_pruning(threshold(&top), segment, &mut |doc, score| {
                if alive.is_none_or(|a| a.is_alive(doc))
                    && let Some(key) = admits(doc)
                {
                    top.push(score, key);
                }
                threshold(&top)
            })
            .map_err(reading)?;
    }
    Ok(top.into_sorted().into_iter().map(|(_, key)| key).collect())
}

/// How many live documents holding any of `terms` in `field` the segments' filters admit
/// (all of them are visited: no pruning).
pub(super) fn count_matches<F>(
    searcher: &tantivy::Searcher,
    field: Field,
    terms: &[String],
    mut filter: impl FnMut(&SegmentReader) -> Result<Option<F>, StoreError>,
) -> Result<u64, StoreError>
where
    F: Fn(DocId) -> Option<i64>,
{
    if terms.is_empty() {
        return Ok(0);
    }
    let reading = |e| tantivy_error("searching a text index", e);
    let words: Vec<(Occur, Box<dyn Query>)> = terms
        .iter()
        .map(|text| {
            let term = Term::from_field_text(field, text);
            let query: Box<dyn Query> = Box::new(TermQuery::new(term, IndexRecordOption::Basic));
            (Occur::Should, query)
        })
        .collect();
    let weight = BooleanQuery::new(words)
        .weight(EnableScoring::disabled_from_searcher(searcher))
        .map_err(reading)?;
    let mut count = 0u64;
    for segment in searcher.segment_readers() {
        let Some(admits) = filter(segment)? else {
            continue;
        };
        let alive = segment.alive_bitset();
        weight
            .for_each_no_score(segment, &mut |docs| {
                for &doc in docs {
                    if alive.is_none_or(|a| a.is_alive(doc)) && admits(doc).is_some() {
                        count += 1;
                    }
                }
            })
            .map_err(reading)?;
    }
    Ok(count)
}
