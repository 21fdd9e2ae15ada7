//! Shared memory blocks (see [`BlockStore`]): one row per block, edited under the writer
//! lock in `BEGIN IMMEDIATE` transactions, which SQLite serialises across processes too.

use async_trait::async_trait;
use memgpt_core::ids::{AgentId, BlockId};
use memgpt_core::store::{AgentState, BlockStore, BlockUpdate, SharedBlock, StoreError};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use crate::codec::{db, from_micros, micros};
use crate::sql::{block_json, block_parts, blocks_in_order};

const COLUMNS: &str = "id, block, version, scope, created_at, updated_at, updated_by";

fn block_from_row(row: &SqliteRow) -> Result<SharedBlock, StoreError> {
    let get = |e: sqlx::Error| db("reading a shared block", e);
    block_parts(
        row.try_get::<Uuid, _>("id").map_err(get)?,
        &row.try_get::<String, _>("block").map_err(get)?,
        row.try_get::<i64, _>("version").map_err(get)?,
        row.try_get("scope").map_err(get)?,
        from_micros(row.try_get("created_at").map_err(get)?)?,
        from_micros(row.try_get("updated_at").map_err(get)?)?,
        row.try_get::<Option<Uuid>, _>("updated_by").map_err(get)?,
    )
}

#[async_trait]
impl BlockStore for SqliteStore {
    async fn create_block(&self, block: &SharedBlock) -> Result<(), StoreError> {
        block.check_text()?;
        let _writer = self.writer.lock().await;
        let result = sqlx::query(
            "INSERT INTO shared_blocks (id, block, version, scope, created_at, updated_at, updated_by) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(block.id.as_uuid())
        .bind(block_json(block)?)
        .bind(block.version as i64)
        .bind(block.scope.as_deref())
        .bind(micros(block.created_at))
        .bind(micros(block.updated_at))
        .bind(block.updated_by.map(|a| *a.as_uuid()))
        .execute(&self.pool)
        .await;
        match result {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(StoreError::BlockExists(block.id))
            }
            Err(e) => Err(db("creating a shared block", e)),
        }
    }

    async fn get_blocks(&self, ids: &[BlockId]) -> Result<Vec<SharedBlock>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {COLUMNS} FROM shared_blocks WHERE id IN ("
        ));
        let mut list = sql.separated(", ");
        for id in ids {
            list.push_bind(*id.as_uuid());
        }
        sql.push(")");
        let rows = sql
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("reading shared blocks", e))?;
        let found = rows
            .iter()
            .map(block_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(blocks_in_order(found, ids))
    }

    async fn list_blocks(&self, scope: Option<&str>) -> Result<Vec<SharedBlock>, StoreError> {
        let mut sql = QueryBuilder::<Sqlite>::new(format!("SELECT {COLUMNS} FROM shared_blocks"));
        if let Some(scope) = scope {
            sql.push(" WHERE scope = ").push_bind(scope.to_owned());
        }
        sql.push(" ORDER BY created_at, rowid");
        let rows = sql
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| db("listing shared blocks", e))?;
        rows.iter().map(block_from_row).collect()
    }

    async fn update_block(
        &self,
        id: BlockId,
        update: &BlockUpdate<'_>,
    ) -> Result<SharedBlock, StoreError> {
        let (_writer, mut tx) = self.begin_commit().await?;
        let mut select =
            QueryBuilder::<Sqlite>::new(format!("SELECT {COLUMNS} FROM shared_blocks WHERE id = "));
        select.push_bind(*id.as_uuid());
        let row = select
            .build()
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db("reading a shared block", e))?
            .ok_or(StoreError::BlockNotFound(id))?;
        let updated = block_from_row(&row)?.updated(update)?;
        updated.check_text()?;
        sqlx::query(
            "UPDATE shared_blocks SET block = ?, version = ?, updated_at = ?, updated_by = ? WHERE id = ?",
        )
        .bind(block_json(&updated)?)
        .bind(updated.version as i64)
        .bind(micros(updated.updated_at))
        .bind(updated.updated_by.map(|a| *a.as_uuid()))
        .bind(id.as_uuid())
        .execute(&mut *tx)
        .await
        .map_err(|e| db("editing a shared block", e))?;
        tx.commit()
            .await
            .map_err(|e| db("committing a shared block edit", e))?;
        Ok(updated)
    }

    async fn delete_block(&self, id: BlockId) -> Result<bool, StoreError> {
        let (_writer, mut tx) = self.begin_commit().await?;
        let agents = attached(&mut tx, id).await?;
        if !agents.is_empty() {
            return Err(StoreError::BlockInUse { id, agents });
        }
        let deleted = sqlx::query("DELETE FROM shared_blocks WHERE id = ?")
            .bind(id.as_uuid())
            .execute(&mut *tx)
            .await
            .map_err(|e| db("deleting a shared block", e))?
            .rows_affected()
            > 0;
        tx.commit()
            .await
            .map_err(|e| db("committing a shared block deletion", e))?;
        Ok(deleted)
    }

    async fn block_agents(&self, id: BlockId) -> Result<Vec<AgentId>, StoreError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| db("reading a block's agents", e))?;
        attached(&mut conn, id).await
    }
}

/// The agents holding block `id`, oldest first.
async fn attached(conn: &mut SqliteConnection, id: BlockId) -> Result<Vec<AgentId>, StoreError> {
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT a.agent_id FROM block_attachments a JOIN agents g ON g.id = a.agent_id \
         WHERE a.block_id = ? ORDER BY g.created_at, g.rowid",
    )
    .bind(id.as_uuid())
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| db("reading a block's agents", e))?;
    Ok(ids.into_iter().map(AgentId::from_uuid).collect())
}

/// Records the shared blocks `state` holds as its agent's attachments (replacing the old
/// ones), in the caller's transaction. Fails with [`StoreError::BlockNotFound`] for a block
/// that does not exist.
pub(super) async fn write_attachments(
    conn: &mut SqliteConnection,
    state: &AgentState,
) -> Result<(), StoreError> {
    let ids = state.memory.shared_ids();
    sqlx::query("DELETE FROM block_attachments WHERE agent_id = ?")
        .bind(state.id.as_uuid())
        .execute(&mut *conn)
        .await
        .map_err(|e| db("detaching shared blocks", e))?;
    for (position, id) in ids.iter().enumerate() {
        let inserted = sqlx::query(
            "INSERT INTO block_attachments (block_id, agent_id, position) \
             SELECT id, ?, ? FROM shared_blocks WHERE id = ?",
        )
        .bind(state.id.as_uuid())
        .bind(position as i64)
        .bind(id.as_uuid())
        .execute(&mut *conn)
        .await
        .map_err(|e| db("attaching a shared block", e))?
        .rows_affected();
        if inserted == 0 {
            return Err(StoreError::BlockNotFound(*id));
        }
    }
    Ok(())
}
