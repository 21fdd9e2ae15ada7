//! Timers in the agents' database (table `memgpt_timers`), SQLite or PostgreSQL.

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use memgpt_core::ids::AgentId;
use sqlx::Row;

use super::{ClaimedTimer, Timer, TimerId, TimerStore, TimersError, token};
use crate::db::{Db, millis, time, with_pool};

/// A [`TimerStore`] in the database that holds the agents.
#[derive(Debug, Clone)]
pub struct SqlTimers {
    db: Db,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memgpt_timers (
    id           TEXT PRIMARY KEY,
    agent_id     TEXT NOT NULL,
    reason       TEXT NOT NULL,
    next_at      BIGINT NOT NULL,
    every_secs   BIGINT,
    created_at   BIGINT NOT NULL,
    claim_token  TEXT,
    claimed_till BIGINT
);
CREATE INDEX IF NOT EXISTS memgpt_timers_due ON memgpt_timers (next_at);
CREATE INDEX IF NOT EXISTS memgpt_timers_by_agent ON memgpt_timers (agent_id, next_at);
";

/// Claims one due timer; of two processes that read the same due timer, the second one's
/// update matches no row.
const CLAIM: &str = "UPDATE memgpt_timers SET claim_token = $1, claimed_till = $2 \
     WHERE id = $3 AND next_at = $4 AND (claimed_till IS NULL OR claimed_till < $5)";

impl SqlTimers {
    /// Timers in `db` (call [`TimerStore::migrate`] before use).
    pub fn new(db: Db) -> Self {
        Self { db }
    }
}

fn db(e: sqlx::Error) -> TimersError {
    TimersError::Database(e.to_string())
}

fn corrupt(what: &str, text: &str) -> TimersError {
    TimersError::Database(format!("a stored {what} `{text}` is not valid"))
}

/// A timer from a row holding its columns.
macro_rules! timer_of {
    ($row:expr) => {{
        let row = $row;
        let id: String = row.try_get("id").map_err(db)?;
        let agent: String = row.try_get("agent_id").map_err(db)?;
        let every: Option<i64> = row.try_get("every_secs").map_err(db)?;
        Timer {
            id: TimerId(id.parse().map_err(|_| corrupt("timer id", &id))?),
            agent_id: agent.parse().map_err(|_| corrupt("agent id", &agent))?,
            reason: row.try_get("reason").map_err(db)?,
            next_at: time(row.try_get("next_at").map_err(db)?),
            every_seconds: every.and_then(|e| u64::try_from(e).ok()),
            created_at: time(row.try_get("created_at").map_err(db)?),
        }
    }};
}

#[async_trait]
impl TimerStore for SqlTimers {
    async fn migrate(&self) -> Result<(), TimersError> {
        self.db.migrate(SCHEMA).await.map_err(db)
    }

    async fn add(&self, timer: &Timer) -> Result<(), TimersError> {
        let sql = self.db.sql(
            "INSERT INTO memgpt_timers (id, agent_id, reason, next_at, every_secs, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        );
        let every = timer.every_seconds.and_then(|e| i64::try_from(e).ok());
        with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(timer.id.to_string())
            .bind(timer.agent_id.to_string())
            .bind(&timer.reason)
            .bind(millis(timer.next_at))
            .bind(every)
            .bind(millis(timer.created_at))
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(db))
    }

    async fn of_agent(&self, agent: AgentId) -> Result<Vec<Timer>, TimersError> {
        let sql = self.db.sql(
            "SELECT id, agent_id, reason, next_at, every_secs, created_at FROM memgpt_timers \
             WHERE agent_id = $1 ORDER BY next_at, id",
        );
        with_pool!(&self.db, pool => {
            let rows = sqlx::query(sql)
                .bind(agent.to_string())
                .fetch_all(pool)
                .await
                .map_err(db)?;
            let mut timers = Vec::with_capacity(rows.len());
            for row in &rows {
                timers.push(timer_of!(row));
            }
            Ok(timers)
        })
    }

    async fn remove(&self, agent: AgentId, id: TimerId) -> Result<bool, TimersError> {
        let sql = self
            .db
            .sql("DELETE FROM memgpt_timers WHERE agent_id = $1 AND id = $2");
        let deleted = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(agent.to_string())
            .bind(id.to_string())
            .execute(pool)
            .await
            .map_err(db)?
            .rows_affected());
        Ok(deleted > 0)
    }

    async fn remove_agent(&self, agent: AgentId) -> Result<(), TimersError> {
        let sql = self.db.sql("DELETE FROM memgpt_timers WHERE agent_id = $1");
        with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(agent.to_string())
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(db))
    }

    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedTimer>, TimersError> {
        let due = self.db.sql(
            "SELECT id, agent_id, reason, next_at, every_secs, created_at FROM memgpt_timers \
             WHERE next_at <= $1 AND (claimed_till IS NULL OR claimed_till < $1) \
             ORDER BY next_at LIMIT $2",
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        with_pool!(&self.db, pool => {
            let rows = sqlx::query(due)
                .bind(millis(now))
                .bind(limit)
                .fetch_all(pool)
                .await
                .map_err(db)?;
            let mut claimed = Vec::new();
            for row in &rows {
                let timer = timer_of!(row);
                let token = token();
                let won = sqlx::query(self.db.sql(CLAIM))
                    .bind(&token)
                    .bind(millis(now + lease))
                    .bind(timer.id.to_string())
                    .bind(millis(timer.next_at))
                    .bind(millis(now))
                    .execute(pool)
                    .await
                    .map_err(db)?
                    .rows_affected();
                if won == 1 {
                    claimed.push(ClaimedTimer { timer, token });
                }
            }
            Ok(claimed)
        })
    }

    async fn complete(
        &self,
        claimed: &ClaimedTimer,
        now: DateTime<Utc>,
    ) -> Result<(), TimersError> {
        match claimed.timer.following(now) {
            Some(next) => {
                let sql = self.db.sql(
                    "UPDATE memgpt_timers SET next_at = $1, claim_token = NULL, claimed_till = NULL \
                     WHERE id = $2 AND claim_token = $3",
                );
                with_pool!(&self.db, pool => sqlx::query(sql)
                    .bind(millis(next))
                    .bind(claimed.timer.id.to_string())
                    .bind(&claimed.token)
                    .execute(pool)
                    .await
                    .map(|_| ())
                    .map_err(db))
            }
            None => {
                let sql = self
                    .db
                    .sql("DELETE FROM memgpt_timers WHERE id = $1 AND claim_token = $2");
                with_pool!(&self.db, pool => sqlx::query(sql)
                    .bind(claimed.timer.id.to_string())
                    .bind(&claimed.token)
                    .execute(pool)
                    .await
                    .map(|_| ())
                    .map_err(db))
            }
        }
    }
}
