//! The loop that fires due timers: every process of a deployment runs one.

use std::sync::Arc;

use chrono::Utc;
use memgpt_core::agent::Event;
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::consolidation::TIMER_REASON;
use crate::error::ErrorCode;
use crate::state::ServerState;
use crate::timers::ClaimedTimer;

/// Timers claimed per poll.
const BATCH: usize = 32;

/// Fires due timers until `stop` turns `true`: polls every
/// [`ServerConfig::timer_poll`](crate::ServerConfig::timer_poll), claims what is due, and steps
/// each agent with its timer event (in its own task, so a slow step delays no other timer).
pub(crate) async fn run_scheduler(state: Arc<ServerState>, mut stop: watch::Receiver<bool>) {
    let lease = chrono::Duration::from_std(state.config.timer_lease)
        .unwrap_or_else(|_| chrono::Duration::minutes(10));
    loop {
        match state.timers.claim_due(Utc::now(), lease, BATCH).await {
            Ok(claimed) => {
                for timer in claimed {
                    tokio::spawn(fire(state.clone(), timer));
                }
            }
            Err(e) => warn!(error = %e, "could not read due timers"),
        }
        tokio::select! {
            _ = tokio::time::sleep(state.config.timer_poll) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// Steps the timer's agent with its event, then completes the timer.
async fn fire(state: Arc<ServerState>, claimed: ClaimedTimer) {
    let timer = &claimed.timer;
    debug!(timer = %timer.id, agent = %timer.agent_id, "timer fired");
    let outcome = match state.hub.lock(timer.agent_id).await {
        // A consolidation companion's run (see `crate::consolidation`): over its primary's
        // messages since its last run; nothing to do is done at once.
        Ok(mut agent) if timer.reason == TIMER_REASON => {
            let started = std::time::Instant::now();
            let result = agent.consolidate().await;
            if let Ok(Some(record)) = &result {
                state.metrics.record(Some(record), started.elapsed());
            }
            result.map(|_| ()).map_err(crate::error::ApiError::from)
        }
        Ok(mut agent) => state
            .step(&mut agent, Event::timer(timer.reason.clone()))
            .await
            .map(|_| ())
            .map_err(crate::error::ApiError::from),
        Err(e) => Err(e),
    };
    match outcome {
        Ok(()) => {}
        // The agent is gone: so are its timers.
        Err(e) if e.code == ErrorCode::NotFound => {
            if let Err(e) = state.timers.remove_agent(timer.agent_id).await {
                warn!(agent = %timer.agent_id, error = %e, "could not remove a deleted agent's timers");
            }
            return;
        }
        // Left claimed: another attempt follows when the claim expires.
        Err(e) => {
            warn!(timer = %timer.id, agent = %timer.agent_id, error = %e.message, "a timer's step failed; it will be retried");
            return;
        }
    }
    if let Err(e) = state.timers.complete(&claimed, Utc::now()).await {
        warn!(timer = %timer.id, error = %e, "could not complete a fired timer");
    }
}
