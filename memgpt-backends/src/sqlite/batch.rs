//! Statements sent to SQLite together: one round trip to the connection's worker thread for
//! many writes.
//!
//! sqlx runs every SQLite connection on its own thread, so each statement costs a channel round
//! trip and a thread wake-up, more than most of the statements themselves. A step's commit
//! writes a dozen rows; [`Batch`] collects their statements into one multi-statement query
//! (sqlx prepares each statement and hands it the next `?` arguments in order) and sends it when
//! it holds [`Batch::LIMIT`] statements or when the commit is done. Batches of the same shape
//! have the same text, so the prepared statements are cached like any other query's.

use sqlx::query_builder::Separated;
use sqlx::sqlite::SqliteRow;
use sqlx::{Encode, QueryBuilder, Sqlite, SqliteConnection, Type};

use crate::codec::db;
use memgpt_core::store::StoreError;

/// A multi-statement write being built (see the module documentation).
pub(crate) struct Batch {
    sql: QueryBuilder<Sqlite>,
    statements: usize,
    /// Names the writes in errors.
    context: &'static str,
    /// The batch holds a query whose rows the next send keeps.
    query_first: bool,
    /// Those rows, once sent.
    rows: Option<Vec<SqliteRow>>,
}

impl Batch {
    /// Statements sent in one query at most: bounds the text and keeps the number of distinct
    /// shapes (each prepared once and cached) small.
    pub(crate) const LIMIT: usize = 48;

    pub(crate) fn new(context: &'static str) -> Self {
        Self {
            sql: QueryBuilder::new(""),
            statements: 0,
            context,
            query_first: false,
            rows: None,
        }
    }

    /// Starts the batch's query (a `SELECT`, continued like [`Batch::statement`]): the next
    /// send keeps its rows for [`Batch::take_rows`]. The other statements of that send must
    /// return no rows.
    pub(crate) fn query(&mut self, sql: &str) -> &mut Self {
        debug_assert!(!self.query_first, "one query per send");
        self.query_first = true;
        self.statement(sql)
    }

    /// The rows of the leading query, once the batch was sent without an error.
    pub(crate) fn take_rows(&mut self) -> Option<Vec<SqliteRow>> {
        self.rows.take()
    }

    /// Starts a statement with `sql`; continue it with [`Batch::bind`] and [`Batch::sql`].
    pub(crate) fn statement(&mut self, sql: &str) -> &mut Self {
        if self.statements > 0 {
            self.sql.push(";\n");
        }
        self.statements += 1;
        self.sql.push(sql);
        self
    }

    /// Starts a statement with `sql` and returns the list its values are bound into, separated
    /// by commas (`push_bind` each; close it with `push_unseparated(")")`).
    pub(crate) fn values(&mut self, sql: &str) -> Separated<'_, Sqlite, &'static str> {
        self.statement(sql);
        self.sql.separated(", ")
    }

    /// Appends SQL text to the current statement.
    pub(crate) fn sql(&mut self, sql: &str) -> &mut Self {
        self.sql.push(sql);
        self
    }

    /// Appends a `?` bound to `value` to the current statement.
    pub(crate) fn bind<'t, T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'t, Sqlite> + Type<Sqlite>,
    {
        self.sql.push_bind(value);
        self
    }

    /// Sends the statements when [`Batch::LIMIT`] are waiting.
    pub(crate) async fn send_if_full(
        &mut self,
        tx: &mut SqliteConnection,
    ) -> Result<(), StoreError> {
        if self.statements >= Self::LIMIT {
            self.send(tx).await?;
        }
        Ok(())
    }

    /// Sends the waiting statements (if any) in one query.
    pub(crate) async fn send(&mut self, tx: &mut SqliteConnection) -> Result<(), StoreError> {
        if self.statements == 0 {
            return Ok(());
        }
        self.statements = 0;
        let result = if std::mem::take(&mut self.query_first) {
            let rows = self.sql.build().fetch_all(&mut *tx).await;
            rows.map(|rows| self.rows = Some(rows))
        } else {
            let done = self.sql.build().execute(&mut *tx).await;
            done.map(|_| ())
        };
        self.sql.reset();
        result.map_err(|e| db(self.context, e))
    }
}

#[cfg(test)]
mod tests {
    use sqlx::Connection;

    use super::*;

    #[tokio::test]
    async fn statements_run_in_order_with_their_arguments() {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
            .execute(&mut conn)
            .await
            .unwrap();
        let mut batch = Batch::new("testing");
        for i in 0..(Batch::LIMIT + 5) {
            batch
                .statement("INSERT INTO t (v) VALUES (")
                .bind(format!("row {i}"))
                .sql(")");
            // A statement may use what the previous one wrote.
            batch
                .statement("UPDATE t SET v = v || ")
                .bind("!")
                .sql(" WHERE id = last_insert_rowid()");
            batch.send_if_full(&mut conn).await.unwrap();
        }
        batch.send(&mut conn).await.unwrap();
        let rows: Vec<(i64, String)> = sqlx::query_as("SELECT id, v FROM t ORDER BY id")
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(rows.len(), Batch::LIMIT + 5);
        for (i, (id, v)) in rows.iter().enumerate() {
            assert_eq!(
                (*id, v.as_str()),
                (i as i64 + 1, format!("row {i}!").as_str())
            );
        }
        // A failing statement fails the batch with the batch's context.
        let mut batch = Batch::new("testing a failure");
        batch.statement("INSERT INTO t (id, v) VALUES (1, 'dup')");
        let e = batch.send(&mut conn).await.unwrap_err();
        assert!(e.to_string().contains("testing a failure"), "{e}");
    }
}
