//! Encodings shared by the SQL backends: times, vectors, ids and full-text queries.

// Most of these serve SQLite only; a postgres-only build leaves them unused.
#![cfg_attr(not(feature = "sqlite"), allow(dead_code))]

use chrono::{DateTime, Utc};
use memgpt_core::store::StoreError;

/// Microseconds since the Unix epoch.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// The time `micros` microseconds after the Unix epoch.
pub(crate) fn from_micros(micros: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| corrupt(format!("timestamp {micros} out of range")))
}

/// A vector as little-endian `f32` bytes.
pub(crate) fn vector_to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Decodes [`vector_to_blob`] into `out` (cleared first).
pub(crate) fn blob_to_vector_into(blob: &[u8], out: &mut Vec<f32>) -> Result<(), StoreError> {
    if !blob.len().is_multiple_of(4) {
        return Err(corrupt(format!("a vector blob of {} bytes", blob.len())));
    }
    out.clear();
    out.extend(
        blob.chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    );
    Ok(())
}

/// Decodes [`vector_to_blob`].
pub(crate) fn blob_to_vector(blob: &[u8]) -> Result<Vec<f32>, StoreError> {
    let mut out = Vec::with_capacity(blob.len() / 4);
    blob_to_vector_into(blob, &mut out)?;
    Ok(out)
}

/// A store-level inconsistency: data that cannot have been written by this crate.
pub(crate) fn corrupt(message: impl Into<String>) -> StoreError {
    StoreError::Corrupt(message.into())
}

/// Wraps a database error.
pub(crate) fn db(
    context: &str,
    error: impl std::error::Error + Send + Sync + 'static,
) -> StoreError {
    if is_transient(&error) {
        StoreError::transient(context.to_owned(), error)
    } else {
        StoreError::backend(context.to_owned(), error)
    }
}

/// Whether a database error may go away by retrying: a lost or exhausted connection, or a
/// busy/locked database (SQLite `SQLITE_BUSY`/`SQLITE_LOCKED`; PostgreSQL serialization
/// failures, deadlocks, and server shutdown or connection-class SQLSTATEs).
fn is_transient(error: &(dyn std::error::Error + 'static)) -> bool {
    let Some(error) = error.downcast_ref::<sqlx::Error>() else {
        return false;
    };
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(e) => e.code().is_some_and(|code| {
            // SQLite primary result codes 5 (BUSY) and 6 (LOCKED), with extended variants.
            let sqlite_busy = code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6));
            let postgres_retry =
                matches!(&*code, "40001" | "40P01" | "57P01" | "57P03") || code.starts_with("08");
            sqlite_busy || postgres_retry
        }),
        _ => false,
    }
}

/// An SQLite FTS5 query matching any of these analysed terms within one agent's rows, or `None`
/// when there are none. Every term is quoted (and holds no quote).
pub(crate) fn fts5_terms_query(agent_hex: &str, terms: &[String]) -> Option<String> {
    let any: Vec<String> = terms
        .iter()
        .map(|t| t.replace('"', ""))
        .filter(|t| !t.is_empty())
        .map(|t| format!("body:\"{t}\""))
        .collect();
    if any.is_empty() {
        return None;
    }
    Some(format!("agent:\"{agent_hex}\" AND ({})", any.join(" OR ")))
}

#[cfg(test)]
mod tests {
    use memgpt_core::ErrorKind;
    use memgpt_core::retrieval::query_terms;

    use super::*;

    #[test]
    fn lost_connections_are_transient_and_corruption_is_not() {
        assert_eq!(
            db("x", sqlx::Error::PoolTimedOut).kind(),
            ErrorKind::Unavailable
        );
        assert_eq!(db("x", sqlx::Error::RowNotFound).kind(), ErrorKind::Backend);
        assert_eq!(corrupt("a bad row").kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn vectors_round_trip() {
        let v = vec![0.5f32, -1.25, 3.0e-8, f32::MAX];
        assert_eq!(blob_to_vector(&vector_to_blob(&v)).unwrap(), v);
        assert!(blob_to_vector(&[1, 2, 3]).is_err());
    }

    #[test]
    fn fts_queries_quote_every_term() {
        let q = fts5_terms_query("ab12", &query_terms("NEAR(\"x\" AND y:z) OR *")).unwrap();
        // `and`/`or` are stop words; the rest is quoted, so NEAR is just a word.
        assert_eq!(
            q,
            "agent:\"ab12\" AND (body:\"near\" OR body:\"x\" OR body:\"y\" OR body:\"z\")"
        );
        assert_eq!(fts5_terms_query("ab12", &["\"".into()]), None);
        assert_eq!(
            fts5_terms_query("ab12", &query_terms("(( ::: \"\" ))")),
            None
        );
    }
}
