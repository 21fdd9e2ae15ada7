//! Consolidation companions on the server ([`memgpt_core::consolidation`]): after each step of
//! an agent that has one, the companion's run is put on the persisted timers (now, once
//! `every_steps` user messages wait; otherwise `idle` later, if the group says so), and the
//! scheduler runs it like any timer: in its own task, by exactly one process, after a restart
//! too. The primary never waits for it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use memgpt_core::consolidation::{self, Consolidation};
use memgpt_core::ids::AgentId;
use memgpt_core::{AgentConfig, StepRecord};
use tracing::{debug, warn};

use crate::state::ServerState;
use crate::timers::{Timer, TimerId};

/// The reason of a timer that runs a companion's consolidation (instead of a timer event).
pub(crate) const TIMER_REASON: &str = "memgpt: consolidate memory";

/// Schedules the companion of `agent` (if it has one) after one of its steps, in a task of its
/// own so the step's caller does not wait for it.
pub(crate) fn after_step(
    state: &Arc<ServerState>,
    agent: AgentId,
    config: &AgentConfig,
    record: &StepRecord,
) {
    if record.event == "consolidation" {
        return;
    }
    let Some(consolidation) = Consolidation::of(agent, config) else {
        return;
    };
    if consolidation.primary != agent {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        if let Err(e) = schedule(&state, &consolidation).await {
            warn!(agent = %consolidation.primary, error = %e, "could not schedule a consolidation");
        }
    });
}

/// When the companion's run is due after a step of its primary at `now`, with `waiting` user
/// messages not consolidated yet: now once there are `every_steps`; otherwise, with an idle
/// time, that long after this step (a later step moves it); never with nothing to read.
fn due_at(c: &Consolidation, waiting: usize, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if waiting >= c.every_steps as usize {
        Some(now)
    } else if waiting > 0 {
        c.idle.map(|idle| now + idle)
    } else {
        None
    }
}

/// Replaces the companion's consolidation timer by one at the time it is due.
async fn schedule(state: &ServerState, c: &Consolidation) -> Result<(), String> {
    let storage = state.hub.storage();
    let Some(companion) = storage
        .agents
        .load_agent(c.companion)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(());
    };
    let waiting = consolidation::waiting(storage, c.primary, companion.consolidated_until)
        .await
        .map_err(|e| e.to_string())?;
    let now = Utc::now();
    let at = due_at(c, waiting, now);
    for timer in state
        .timers
        .of_agent(c.companion)
        .await
        .map_err(|e| e.to_string())?
    {
        if timer.reason == TIMER_REASON {
            state
                .timers
                .remove(c.companion, timer.id)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    if let Some(at) = at {
        debug!(companion = %c.companion, waiting, at = %at, "consolidation scheduled");
        state
            .timers
            .add(&Timer {
                id: TimerId::new(),
                agent_id: c.companion,
                reason: TIMER_REASON.to_owned(),
                next_at: at,
                every_seconds: None,
                created_at: now,
            })
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    #[test]
    fn a_run_is_due_after_enough_messages_or_an_idle_while() {
        let now = Utc::now();
        let mut c = Consolidation {
            primary: AgentId::new(),
            companion: AgentId::new(),
            every_steps: 3,
            idle: None,
        };
        assert_eq!(due_at(&c, 0, now), None);
        assert_eq!(due_at(&c, 2, now), None);
        assert_eq!(due_at(&c, 3, now), Some(now));
        assert_eq!(due_at(&c, 7, now), Some(now));
        c.idle = Some(Duration::minutes(20));
        assert_eq!(due_at(&c, 0, now), None);
        assert_eq!(due_at(&c, 1, now), Some(now + Duration::minutes(20)));
        assert_eq!(due_at(&c, 3, now), Some(now));
    }
}
