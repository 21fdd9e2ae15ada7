//! The `memgpt_meta` table: the store's small facts (embedding space, analyzer version,
//! counters) by key.

use memgpt_core::store::{EmbeddingSpace, StoreError};

use crate::codec::db;

/// A meta value.
pub(crate) async fn meta<'e, E: sqlx::SqliteExecutor<'e>>(
    executor: E,
    key: &str,
) -> Result<Option<String>, StoreError> {
    sqlx::query_scalar("SELECT value FROM memgpt_meta WHERE key = ?")
        .bind(key)
        .fetch_optional(executor)
        .await
        .map_err(|e| db("reading store metadata", e))
}

/// The store's embedding space, once fixed.
pub(crate) async fn embedding_space(
    conn: &mut sqlx::SqliteConnection,
) -> Result<Option<EmbeddingSpace>, StoreError> {
    let model = meta(&mut *conn, "embedding_model").await?;
    let dimension = meta(&mut *conn, "embedding_dimension").await?;
    crate::sql::space_from_meta(model, dimension)
}
