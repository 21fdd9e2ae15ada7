//! The approval gate: while a call waits for a person's approval, only its approval or denial
//! may step the agent; the decision resumes the paused step with that call.

use tracing::debug;

use super::calls::{Decision, Turn};
use super::run::StepRun;
use super::{Agent, Event, EventKind, StopReason};
use crate::error::{Error, Result};
use crate::ids::MessageId;
use crate::rules::{StepRules, ToolRule};

impl Agent {
    /// While a call waits for approval, only its approval or denial may step the agent: a
    /// timer is skipped (the returned stop reason), anything else is refused. An approval
    /// when nothing waits, or of another call, is refused too.
    pub(super) fn check_approval_gate(&self, event: &Event) -> Result<Option<StopReason>> {
        let pending = self.state.pending_approval.as_ref();
        match (&event.kind, pending) {
            (EventKind::Approval { call_id, .. }, Some(p)) if *call_id == p.call.id => Ok(None),
            (EventKind::Approval { call_id, .. }, _) => Err(Error::NoPendingApproval {
                call_id: call_id.clone(),
            }),
            (EventKind::Timer { .. }, Some(p)) => {
                debug!(function = %p.call.name, "timer skipped: a call waits for approval");
                Ok(Some(StopReason::AwaitingApproval {
                    call_id: p.call.id.clone(),
                    function: p.call.name.clone(),
                    arguments: p.call.arguments.clone(),
                }))
            }
            (_, Some(p)) => Err(Error::ApprovalPending {
                call_id: p.call.id.clone(),
                function: p.call.name.clone(),
            }),
            (_, None) => Ok(None),
        }
    }

    /// Resumes the paused step: the decided call first, under the rules it paused with (the
    /// gate checked that this call is the one waiting). Returns the message holding the call,
    /// the rules, the model responses the step had made, and what the call asks of the loop.
    pub(super) async fn resume<'r>(
        &mut self,
        run: &mut StepRun,
        tool_rules: &'r [ToolRule],
        call_id: &str,
        decision: Decision,
    ) -> Result<(MessageId, StepRules<'r>, usize, Turn)> {
        let pending =
            self.state
                .pending_approval
                .take()
                .ok_or_else(|| Error::NoPendingApproval {
                    call_id: call_id.to_owned(),
                })?;
        let mut rules = StepRules::resume(tool_rules, pending.rules);
        let calls = [pending.call];
        let turn = self
            .run_calls(run, &mut rules, &calls, Some(decision))
            .await;
        Ok((pending.message, rules, pending.llm_calls, turn))
    }
}
