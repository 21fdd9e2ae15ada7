//! [`StepRun`]: what a step (or a direct function call) accumulates before it commits.

use std::time::Instant;

use chrono::{DateTime, Utc};

use super::record::{FunctionCallRecord, StepTimings};
use crate::function::StepWrites;
use crate::llm::Usage;
use crate::message::Message;
use crate::paging::FlushRecord;
use crate::time::Clock;

/// What a step accumulates before it commits.
pub(super) struct StepRun {
    /// The event's time, if it was given (replays); otherwise the clock is read per message.
    pub(super) fixed_time: Option<DateTime<Utc>>,
    pub(super) started: Instant,
    pub(super) messages: Vec<Message>,
    pub(super) writes: StepWrites,
    pub(super) function_calls: Vec<FunctionCallRecord>,
    pub(super) llm_calls: usize,
    pub(super) usage: Usage,
    pub(super) pressure_warning: bool,
    pub(super) flushes: Vec<FlushRecord>,
    pub(super) timings: StepTimings,
    /// The hop of the agent message that started the step (0 for any other event).
    pub(super) hops: u32,
    /// The agents waiting for this step's replies (an agent message's sender chain).
    pub(super) waiting: Vec<crate::ids::AgentId>,
    /// Shared blocks other writers changed before the step (their labels).
    pub(super) shared_blocks_changed: Vec<String>,
}

impl StepRun {
    pub(super) fn new(fixed_time: Option<DateTime<Utc>>) -> Self {
        Self {
            fixed_time,
            started: Instant::now(),
            messages: Vec::new(),
            writes: StepWrites::default(),
            function_calls: Vec::new(),
            llm_calls: 0,
            usage: Usage::default(),
            pressure_warning: false,
            flushes: Vec::new(),
            timings: StepTimings::default(),
            hops: 0,
            waiting: Vec::new(),
            shared_blocks_changed: Vec::new(),
        }
    }

    pub(super) fn now(&self, clock: &dyn Clock) -> DateTime<Utc> {
        self.fixed_time.unwrap_or_else(|| clock.now())
    }
}
