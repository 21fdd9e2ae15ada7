//! Timer events: one-off or repeating, stored next to the agents so they survive restarts, and
//! fired by exactly one process when several serve the same database.
//!
//! A process *claims* a due timer (a conditional update: only one claimant wins), steps the
//! agent with a timer event, then *completes* it: a one-off timer is deleted, a repeating one
//! moves to its next time. A process that dies between claim and completion leaves the claim to
//! expire ([`ServerConfig::timer_lease`](crate::ServerConfig::timer_lease)), after which another
//! process fires the timer: a timer is never lost, and fires twice only if its step committed and
//! the process died in the instant before completing it.

mod memory;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;

use std::fmt;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use memgpt_core::ids::AgentId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use memory::MemoryTimers;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use sql::SqlTimers;

/// A timer's id.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct TimerId(pub Uuid);

impl TimerId {
    /// A new, time-ordered id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }
}

impl Default for TimerId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for TimerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A scheduled timer event of one agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Timer {
    /// Its id.
    pub id: TimerId,
    /// The agent it wakes.
    #[schemars(with = "String")]
    pub agent_id: AgentId,
    /// Why: the text of the timer event the agent receives.
    pub reason: String,
    /// When it fires next.
    pub next_at: DateTime<Utc>,
    /// For a repeating timer, seconds between firings.
    pub every_seconds: Option<u64>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

impl Timer {
    /// The time after `now` this timer fires next once it has fired (`None`: it is done).
    pub fn following(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let every = Duration::seconds(i64::try_from(self.every_seconds?).ok()?.max(1));
        let mut next = self.next_at + every;
        if next <= now {
            // Missed firings (the server was down) are skipped, not replayed in a burst.
            let behind = (now - next).num_milliseconds() / every.num_milliseconds().max(1) + 1;
            next += every * i32::try_from(behind).unwrap_or(i32::MAX);
        }
        Some(next)
    }
}

/// A timer a process has claimed; only its holder can complete it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedTimer {
    /// The timer.
    pub timer: Timer,
    /// The claim's token.
    pub token: String,
}

/// Errors of a [`TimerStore`].
#[derive(Debug, thiserror::Error)]
pub enum TimersError {
    /// The database failed.
    #[error("timer store: {0}")]
    Database(String),
}

/// Timers, shared by every server process of a deployment.
#[async_trait]
pub trait TimerStore: Send + Sync + fmt::Debug {
    /// Creates the store's tables if needed.
    async fn migrate(&self) -> Result<(), TimersError>;

    /// Stores a new timer.
    async fn add(&self, timer: &Timer) -> Result<(), TimersError>;

    /// The timers of `agent`, soonest first.
    async fn of_agent(&self, agent: AgentId) -> Result<Vec<Timer>, TimersError>;

    /// Deletes a timer of `agent`; `false` if it has no such timer.
    async fn remove(&self, agent: AgentId, id: TimerId) -> Result<bool, TimersError>;

    /// Deletes every timer of a deleted agent.
    async fn remove_agent(&self, agent: AgentId) -> Result<(), TimersError>;

    /// Claims up to `limit` timers due at `now` that nobody holds (or whose claim expired),
    /// each until `now + lease`. Two processes never both claim the same firing.
    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedTimer>, TimersError>;

    /// Completes a fired timer: deleted if one-off, moved to its next time if repeating. A
    /// claim that expired and was taken over completes nothing.
    async fn complete(&self, claimed: &ClaimedTimer, now: DateTime<Utc>)
    -> Result<(), TimersError>;
}

/// A claim token (74 random bits besides the time): two claims never share one.
fn token() -> String {
    Uuid::now_v7().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timer(every: Option<u64>) -> Timer {
        let t0 = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        Timer {
            id: TimerId::new(),
            agent_id: AgentId::new(),
            reason: "check in".into(),
            next_at: t0,
            every_seconds: every,
            created_at: t0,
        }
    }

    #[test]
    fn repeating_timers_skip_missed_firings() {
        let t = timer(Some(60));
        assert_eq!(
            t.following(t.next_at),
            Some(t.next_at + Duration::seconds(60))
        );
        // Down for an hour and a bit: the next firing is the next minute boundary after now.
        let now = t.next_at + Duration::seconds(3_630);
        assert_eq!(t.following(now), Some(t.next_at + Duration::seconds(3_660)));
        assert_eq!(timer(None).following(now), None);
    }
}
