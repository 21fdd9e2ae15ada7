//! Timers in the agents' database (table `memgpt_timers`), SQLite or PostgreSQL.

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use memgpt_core::ids::AgentId;
use sqlx::{QueryBuilder, Row};

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

/// Selects the columns `timer_of!` reads; conditions follow.
const SELECT_TIMERS: &str =
    "SELECT id, agent_id, reason, next_at, every_secs, created_at FROM memgpt_timers";

#[async_trait]
impl TimerStore for SqlTimers {
    async fn migrate(&self) -> Result<(), TimersError> {
        self.db.migrate(SCHEMA).await.map_err(db)
    }

    async fn add(&self, timer: &Timer) -> Result<(), TimersError> {
        let every = timer.every_seconds.and_then(|e| i64::try_from(e).ok());
        with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new(
                "INSERT INTO memgpt_timers (id, agent_id, reason, next_at, every_secs, created_at) ",
            );
            sql.push_values([timer], |mut row, timer| {
                row.push_bind(timer.id.to_string())
                    .push_bind(timer.agent_id.to_string())
                    .push_bind(timer.reason.clone())
                    .push_bind(millis(timer.next_at))
                    .push_bind(every)
                    .push_bind(millis(timer.created_at));
            });
            sql.build().execute(pool).await.map(|_| ()).map_err(db)
        })
    }

    async fn of_agent(&self, agent: AgentId) -> Result<Vec<Timer>, TimersError> {
        with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new(SELECT_TIMERS);
            sql.push(" WHERE agent_id = ")
                .push_bind(agent.to_string())
                .push(" ORDER BY next_at, id");
            let rows = sql.build().fetch_all(pool).await.map_err(db)?;
            let mut timers = Vec::with_capacity(rows.len());
            for row in &rows {
                timers.push(timer_of!(row));
            }
            Ok(timers)
        })
    }

    async fn remove(&self, agent: AgentId, id: TimerId) -> Result<bool, TimersError> {
        let deleted = with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new("DELETE FROM memgpt_timers WHERE agent_id = ");
            sql.push_bind(agent.to_string())
                .push(" AND id = ")
                .push_bind(id.to_string());
            sql.build().execute(pool).await.map_err(db)?.rows_affected()
        });
        Ok(deleted > 0)
    }

    async fn remove_agent(&self, agent: AgentId) -> Result<(), TimersError> {
        with_pool!(&self.db, pool => {
            let mut sql = QueryBuilder::new("DELETE FROM memgpt_timers WHERE agent_id = ");
            sql.push_bind(agent.to_string());
            sql.build().execute(pool).await.map(|_| ()).map_err(db)
        })
    }

    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedTimer>, TimersError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        with_pool!(&self.db, pool => {
            let mut due = QueryBuilder::new(SELECT_TIMERS);
            due.push(" WHERE next_at <= ")
                .push_bind(millis(now))
                .push(" AND (claimed_till IS NULL OR claimed_till < ")
                .push_bind(millis(now))
                .push(") ORDER BY next_at LIMIT ")
                .push_bind(limit);
            let rows = due.build().fetch_all(pool).await.map_err(db)?;
            let mut claimed = Vec::new();
            for row in &rows {
                let timer = timer_of!(row);
                let token = token();
                // Of two processes that read the same due timer, the second one's update
                // matches no row.
                let mut claim = QueryBuilder::new("UPDATE memgpt_timers SET claim_token = ");
                claim
                    .push_bind(token.clone())
                    .push(", claimed_till = ")
                    .push_bind(millis(now + lease))
                    .push(" WHERE id = ")
                    .push_bind(timer.id.to_string())
                    .push(" AND next_at = ")
                    .push_bind(millis(timer.next_at))
                    .push(" AND (claimed_till IS NULL OR claimed_till < ")
                    .push_bind(millis(now))
                    .push(")");
                let won = claim.build().execute(pool).await.map_err(db)?.rows_affected();
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
        let next = claimed.timer.following(now);
        with_pool!(&self.db, pool => {
            let mut sql = match next {
                Some(next) => {
                    let mut sql = QueryBuilder::new("UPDATE memgpt_timers SET next_at = ");
                    sql.push_bind(millis(next))
                        .push(", claim_token = NULL, claimed_till = NULL");
                    sql
                }
                None => QueryBuilder::new("DELETE FROM memgpt_timers"),
            };
            sql.push(" WHERE id = ")
                .push_bind(claimed.timer.id.to_string())
                .push(" AND claim_token = ")
                .push_bind(claimed.token.clone());
            sql.build().execute(pool).await.map(|_| ()).map_err(db)
        })
    }
}
