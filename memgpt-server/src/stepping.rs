//! How the server runs a step, wherever it comes from (a route, a timer, another agent's
//! message): counted in the metrics, then followed by the agent's consolidation companion.

use std::sync::Arc;

use crate::state::ServerState;

impl ServerState {
    /// Runs one step of `agent` as every route and the scheduler do: counted in the metrics,
    /// and followed (in a task of its own) by scheduling the agent's consolidation companion,
    /// if it has one.
    pub(crate) async fn step(
        self: &Arc<Self>,
        agent: &mut memgpt_core::Agent,
        event: memgpt_core::Event,
    ) -> memgpt_core::Result<memgpt_core::StepRecord> {
        let record = self.metrics.step(agent, event).await?;
        crate::consolidation::after_step(self, agent.id(), agent.config(), &record);
        Ok(record)
    }
}
