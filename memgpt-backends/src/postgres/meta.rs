//! The `memgpt_meta` table: the store's small facts (embedding space, analyzer version) by
//! key.

use memgpt_core::store::StoreError;

use crate::codec::db;

/// A meta value.
pub(super) async fn meta<'e, E: sqlx::PgExecutor<'e>>(
    executor: E,
    key: &str,
) -> Result<Option<String>, StoreError> {
    sqlx::query_scalar("SELECT value FROM memgpt_meta WHERE key = $1")
        .bind(key)
        .fetch_optional(executor)
        .await
        .map_err(|e| db("reading store metadata", e))
}
