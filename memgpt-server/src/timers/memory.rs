//! Timers in process memory, for `memory://` stores and tests.

use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use memgpt_core::ids::AgentId;

use super::{ClaimedTimer, Timer, TimerId, TimerStore, TimersError, token};

/// A [`TimerStore`] in process memory.
#[derive(Debug, Default)]
pub struct MemoryTimers {
    timers: Mutex<Vec<Entry>>,
}

#[derive(Debug)]
struct Entry {
    timer: Timer,
    claim: Option<(String, DateTime<Utc>)>,
}

impl MemoryTimers {
    /// No timers.
    pub fn new() -> Self {
        Self::default()
    }

    fn timers(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.timers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl TimerStore for MemoryTimers {
    async fn migrate(&self) -> Result<(), TimersError> {
        Ok(())
    }

    async fn add(&self, timer: &Timer) -> Result<(), TimersError> {
        self.timers().push(Entry {
            timer: timer.clone(),
            claim: None,
        });
        Ok(())
    }

    async fn of_agent(&self, agent: AgentId) -> Result<Vec<Timer>, TimersError> {
        let mut out: Vec<Timer> = self
            .timers()
            .iter()
            .filter(|e| e.timer.agent_id == agent)
            .map(|e| e.timer.clone())
            .collect();
        out.sort_by_key(|t| (t.next_at, t.id));
        Ok(out)
    }

    async fn remove(&self, agent: AgentId, id: TimerId) -> Result<bool, TimersError> {
        let mut timers = self.timers();
        let before = timers.len();
        timers.retain(|e| !(e.timer.agent_id == agent && e.timer.id == id));
        Ok(timers.len() < before)
    }

    async fn remove_agent(&self, agent: AgentId) -> Result<(), TimersError> {
        self.timers().retain(|e| e.timer.agent_id != agent);
        Ok(())
    }

    async fn claim_due(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<ClaimedTimer>, TimersError> {
        let mut timers = self.timers();
        let mut claimed = Vec::new();
        for entry in timers.iter_mut() {
            if claimed.len() >= limit {
                break;
            }
            let free = entry.claim.as_ref().is_none_or(|(_, until)| *until < now);
            if entry.timer.next_at <= now && free {
                let token = token();
                entry.claim = Some((token.clone(), now + lease));
                claimed.push(ClaimedTimer {
                    timer: entry.timer.clone(),
                    token,
                });
            }
        }
        Ok(claimed)
    }

    async fn complete(
        &self,
        claimed: &ClaimedTimer,
        now: DateTime<Utc>,
    ) -> Result<(), TimersError> {
        let mut timers = self.timers();
        let Some(index) = timers.iter().position(|e| {
            e.timer.id == claimed.timer.id
                && e.claim.as_ref().is_some_and(|(t, _)| *t == claimed.token)
        }) else {
            return Ok(());
        };
        match claimed.timer.following(now) {
            Some(next) => {
                timers[index].timer.next_at = next;
                timers[index].claim = None;
            }
            None => {
                timers.remove(index);
            }
        }
        Ok(())
    }
}
