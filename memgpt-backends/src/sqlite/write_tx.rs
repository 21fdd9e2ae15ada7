//! A step's write transaction, its `BEGIN` and `COMMIT` sent with its statements.
//!
//! sqlx's [`sqlx::Transaction`] sends `BEGIN` and `COMMIT` to the connection's worker thread
//! as commands of their own, each a round trip (a channel message and two thread wake-ups,
//! about a tenth of a millisecond each on a busy machine: more than most statements). A step's
//! commit instead puts `BEGIN IMMEDIATE` at the head of its first [`Batch`] and `COMMIT` at the
//! tail of its last, so a step whose writes fit one batch is one round trip.
//!
//! The price is that sqlx no longer knows a transaction is open, so this type ends it on every
//! path: [`WriteTransaction::commit`] or [`WriteTransaction::rollback`], and a transaction
//! dropped before either (a failed write, a cancelled commit) takes its connection with it:
//! closing a SQLite connection rolls back what it left open, and the pool opens another.

use sqlx::pool::PoolConnection;
use sqlx::{Sqlite, SqliteConnection};
use tokio::sync::MutexGuard;

use super::SqliteStore;
use super::batch::Batch;
use crate::codec::db;
use memgpt_core::store::StoreError;

/// A write transaction of this process (see the module documentation).
pub(super) struct WriteTransaction<'s> {
    conn: PoolConnection<Sqlite>,
    /// This process's writers queue on the store's lock, in order, instead of in SQLite's busy
    /// handler; held until the transaction ends.
    _writer: MutexGuard<'s, ()>,
    /// Committed or rolled back: the connection may go back to the pool.
    ended: bool,
}

impl<'s> WriteTransaction<'s> {
    /// Starts a transaction whose `BEGIN IMMEDIATE` (the write lock taken up front, so checks
    /// and writes cannot interleave with another process's writer) goes first in `batch`, with
    /// the statements after it. `batch` must be empty.
    pub(super) async fn begin(
        store: &'s SqliteStore,
        batch: &mut Batch,
    ) -> Result<Self, StoreError> {
        let writer = store.writer.lock().await;
        let conn = store
            .pool
            .acquire()
            .await
            .map_err(|e| db("starting a commit", e))?;
        batch.statement("BEGIN IMMEDIATE");
        Ok(Self {
            conn,
            _writer: writer,
            ended: false,
        })
    }

    /// The transaction's connection, for statements and batches.
    pub(super) fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.conn
    }

    /// Sends what `batch` holds with `COMMIT` after it (between the crash campaign's two
    /// failpoints). A failure rolls everything back.
    pub(super) async fn commit(mut self, batch: &mut Batch) -> Result<(), StoreError> {
        memgpt_core::failpoint::hit("commit.before");
        batch.statement("COMMIT");
        if let Err(e) = batch.send(&mut self.conn).await {
            self.rollback().await;
            return Err(e);
        }
        self.ended = true;
        memgpt_core::failpoint::hit("commit.after");
        Ok(())
    }

    /// Rolls back whatever the transaction wrote; it may have ended already (a statement that
    /// failed with `RAISE(ROLLBACK)` ends it). Should the rollback itself fail, the connection
    /// is closed instead of going back to the pool.
    pub(super) async fn rollback(mut self) {
        match sqlx::query("ROLLBACK").execute(&mut *self.conn).await {
            Ok(_) => self.ended = true,
            Err(sqlx::Error::Database(e)) if e.message().contains("no transaction is active") => {
                self.ended = true;
            }
            Err(e) => tracing::warn!(error = %e, "a rollback failed; closing its connection"),
        }
    }
}

impl Drop for WriteTransaction<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // The transaction may still be open: the connection must not serve anyone else.
            self.conn.close_on_drop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::SqliteOptions;

    async fn store(dir: &tempfile::TempDir) -> SqliteStore {
        SqliteStore::open(SqliteOptions::new(dir.path()))
            .await
            .unwrap()
    }

    async fn meta(store: &SqliteStore, key: &str) -> Option<String> {
        sqlx::query_scalar("SELECT value FROM memgpt_meta WHERE key = ?")
            .bind(key)
            .fetch_optional(&store.pool)
            .await
            .unwrap()
    }

    /// Writes `key` after a guard that passes when `ok`, all in one send.
    async fn guarded_write(store: &SqliteStore, key: &str, ok: bool) -> Result<(), StoreError> {
        let mut batch = Batch::new("testing");
        let tx = WriteTransaction::begin(store, &mut batch).await?;
        batch
            .statement("INSERT INTO commit_guard (ok) VALUES (")
            .bind(ok)
            .sql(")");
        batch
            .statement("INSERT INTO memgpt_meta (key, value) VALUES (")
            .bind(key)
            .sql(", 'written')");
        tx.commit(&mut batch).await
    }

    /// The store's next transaction starts and commits: nothing was left open.
    async fn writes_again(store: &SqliteStore) {
        guarded_write(store, "after", true).await.unwrap();
        assert_eq!(meta(store, "after").await.as_deref(), Some("written"));
    }

    #[tokio::test]
    async fn a_passing_guard_writes_nothing_and_the_writes_after_it_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        guarded_write(&store, "passed", true).await.unwrap();
        assert_eq!(meta(&store, "passed").await.as_deref(), Some("written"));
        let guards: i64 = sqlx::query_scalar("SELECT count(*) FROM commit_guard")
            .fetch_one(&store.pool)
            .await
            .unwrap();
        assert_eq!(guards, 0, "the guard's insert is ignored");
    }

    #[tokio::test]
    async fn a_failing_guard_ends_the_transaction_before_the_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        let error = guarded_write(&store, "failed", false).await.unwrap_err();
        let cause = std::error::Error::source(&error).map(ToString::to_string);
        assert!(
            cause.unwrap_or_default().contains("changed since"),
            "{error:?}"
        );
        assert_eq!(meta(&store, "failed").await, None);
        writes_again(&store).await;
    }

    #[tokio::test]
    async fn a_transaction_dropped_while_open_rolls_back_and_leaves_the_pool_usable() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        {
            let mut batch = Batch::new("testing");
            let mut tx = WriteTransaction::begin(&store, &mut batch).await.unwrap();
            batch.statement("INSERT INTO memgpt_meta (key, value) VALUES ('dropped', 'x')");
            batch.send(tx.conn()).await.unwrap();
            // Dropped here, open: as a cancelled commit would be.
        }
        assert_eq!(meta(&store, "dropped").await, None);
        writes_again(&store).await;
    }

    #[tokio::test]
    async fn a_failed_write_rolls_back_what_went_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        let mut batch = Batch::new("testing");
        let tx = WriteTransaction::begin(&store, &mut batch).await.unwrap();
        batch.statement("INSERT INTO memgpt_meta (key, value) VALUES ('first', 'x')");
        batch.statement("INSERT INTO no_such_table VALUES (1)");
        assert!(tx.commit(&mut batch).await.is_err());
        assert_eq!(meta(&store, "first").await, None);
        writes_again(&store).await;
    }
}
