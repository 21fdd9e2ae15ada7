//! Shared memory blocks (see [`BlockStore`]): one row per block, edited in transactions that
//! lock it (`SELECT ... FOR UPDATE`), so edits from any number of processes take turns.

use async_trait::async_trait;
use memgpt_core::ids::{AgentId, BlockId};
use memgpt_core::store::{AgentState, BlockStore, BlockUpdate, SharedBlock, StoreError};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::PgStore;
use crate::codec::db;
use crate::sql::{block_parts, blocks_in_order};

/// `SELECT` of the columns [`block_from_row`] decodes, then `$rest`.
macro_rules! select {
    ($rest:literal) => {
        concat!(
            "SELECT id, block::text AS block, version, scope, created_at, updated_at, updated_by ",
            $rest
        )
    };
}

fn block_from_row(row: &PgRow) -> Result<SharedBlock, StoreError> {
    let get = |e: sqlx::Error| db("reading a shared block", e);
    block_parts(
        row.try_get::<Uuid, _>("id").map_err(get)?,
        &row.try_get::<String, _>("block").map_err(get)?,
        row.try_get::<i64, _>("version").map_err(get)?,
        row.try_get("scope").map_err(get)?,
        row.try_get("created_at").map_err(get)?,
        row.try_get("updated_at").map_err(get)?,
        row.try_get::<Option<Uuid>, _>("updated_by").map_err(get)?,
    )
}

#[async_trait]
impl BlockStore for PgStore {
    async fn create_block(&self, block: &SharedBlock) -> Result<(), StoreError> {
        block.check_text()?;
        let result = sqlx::query(
            "INSERT INTO shared_blocks (id, block, version, scope, created_at, updated_at, updated_by) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(block.id.as_uuid())
        .bind(Json(&block.block))
        .bind(block.version as i64)
        .bind(block.scope.as_deref())
        .bind(block.created_at)
        .bind(block.updated_at)
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
        let uuids: Vec<Uuid> = ids.iter().map(|id| *id.as_uuid()).collect();
        let rows = sqlx::query(select!("FROM shared_blocks WHERE id = ANY($1)"))
            .bind(uuids)
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
        let rows = sqlx::query(select!(
            "FROM shared_blocks WHERE $1::text IS NULL OR scope = $1 \
             ORDER BY created_at, seq"
        ))
        .bind(scope)
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
        let mut tx = crate::sql::begin(&self.pool, None, "starting a shared block edit").await?;
        let row = sqlx::query(select!("FROM shared_blocks WHERE id = $1 FOR UPDATE"))
            .bind(id.as_uuid())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db("reading a shared block", e))?
            .ok_or(StoreError::BlockNotFound(id))?;
        let updated = block_from_row(&row)?.updated(update)?;
        updated.check_text()?;
        sqlx::query(
            "UPDATE shared_blocks SET block = $1, version = $2, updated_at = $3, updated_by = $4 WHERE id = $5",
        )
        .bind(Json(&updated.block))
        .bind(updated.version as i64)
        .bind(updated.updated_at)
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
        let mut tx =
            crate::sql::begin(&self.pool, None, "starting a shared block deletion").await?;
        // The row lock first: attachments committed meanwhile are then visible below (and
        // the foreign key refuses any that would come after).
        let exists = sqlx::query("SELECT 1 FROM shared_blocks WHERE id = $1 FOR UPDATE")
            .bind(id.as_uuid())
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| db("deleting a shared block", e))?
            .is_some();
        if !exists {
            return Ok(false);
        }
        let agents = attached(&mut tx, id).await?;
        if !agents.is_empty() {
            return Err(StoreError::BlockInUse { id, agents });
        }
        sqlx::query("DELETE FROM shared_blocks WHERE id = $1")
            .bind(id.as_uuid())
            .execute(&mut *tx)
            .await
            .map_err(|e| db("deleting a shared block", e))?;
        tx.commit()
            .await
            .map_err(|e| db("committing a shared block deletion", e))?;
        Ok(true)
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
async fn attached(conn: &mut PgConnection, id: BlockId) -> Result<Vec<AgentId>, StoreError> {
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "SELECT a.agent_id FROM block_attachments a JOIN agents g ON g.id = a.agent_id \
         WHERE a.block_id = $1 ORDER BY g.created_at, g.seq",
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
    conn: &mut PgConnection,
    state: &AgentState,
) -> Result<(), StoreError> {
    let ids: Vec<Uuid> = state
        .memory
        .shared_ids()
        .iter()
        .map(|id| *id.as_uuid())
        .collect();
    sqlx::query("DELETE FROM block_attachments WHERE agent_id = $1")
        .bind(state.id.as_uuid())
        .execute(&mut *conn)
        .await
        .map_err(|e| db("detaching shared blocks", e))?;
    if ids.is_empty() {
        return Ok(());
    }
    // FOR SHARE: a deletion of one of these blocks waits for this commit (and then sees the
    // attachment) instead of racing it.
    let found: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM shared_blocks WHERE id = ANY($1) FOR SHARE")
            .bind(&ids)
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| db("attaching shared blocks", e))?;
    if let Some(missing) = ids.iter().find(|id| !found.contains(id)) {
        return Err(StoreError::BlockNotFound(BlockId::from_uuid(*missing)));
    }
    sqlx::query(
        "INSERT INTO block_attachments (block_id, agent_id, position) \
         SELECT b, $2, (p - 1)::integer FROM unnest($1::uuid[]) WITH ORDINALITY AS t(b, p)",
    )
    .bind(&ids)
    .bind(state.id.as_uuid())
    .execute(&mut *conn)
    .await
    .map_err(|e| db("attaching shared blocks", e))?;
    Ok(())
}
