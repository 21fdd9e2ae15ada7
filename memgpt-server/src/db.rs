//! The server's own tables (tenants, keys, timers) in the agents' database: one pool, SQLite or
//! PostgreSQL, and the same SQL for both. Queries are built with `sqlx::QueryBuilder`, as the
//! stores in memgpt-backends build theirs, so each driver writes its own placeholders.

use chrono::{DateTime, Utc};

/// A connection pool to the database that holds the agents.
#[derive(Debug, Clone)]
pub enum Db {
    /// The data directory's SQLite database.
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::SqlitePool),
    /// A PostgreSQL database (the store's schema), shared by every server process.
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool),
}

/// Runs `$body` with `$p` bound to whichever pool `$db` holds: the same code for both drivers.
macro_rules! with_pool {
    ($db:expr, $p:ident => $body:expr) => {
        match $db {
            #[cfg(feature = "sqlite")]
            $crate::db::Db::Sqlite($p) => $body,
            #[cfg(feature = "postgres")]
            $crate::db::Db::Postgres($p) => $body,
        }
    };
}
pub(crate) use with_pool;

impl Db {
    /// Runs the `;`-separated statements of `schema` in one transaction.
    pub(crate) async fn migrate(&self, schema: &'static str) -> Result<(), sqlx::Error> {
        with_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            for statement in schema.split(';').map(str::trim).filter(|s| !s.is_empty()) {
                sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut *tx).await?;
            }
            tx.commit().await
        })
    }
}

/// A time as stored: milliseconds since the epoch.
pub(crate) fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// A stored time.
pub(crate) fn time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}
