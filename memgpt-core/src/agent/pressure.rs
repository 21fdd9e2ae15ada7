//! Memory pressure during a step: the warning at the policy's warning level and the flush at
//! its flush level (see [`Pager`]).

use tracing::debug;

use super::run::StepRun;
use super::{Agent, StepProgress};
use crate::ids::MessageId;
use crate::message::{Message, MessageKind};
use crate::paging::Pager;
use crate::queue::Pressure;

impl Agent {
    /// The pager for this agent's parts.
    pub(super) fn pager(rt: &super::Services) -> Pager<'_> {
        Pager::new(&rt.manager, rt.summarizer.as_ref(), rt.embedder.as_deref())
    }

    /// The queue as the eviction policy sees it, what a flush would evict now, and where the
    /// policy warns and flushes (nothing changes).
    pub fn paging_preview(&self) -> crate::paging::PagingPreview {
        Self::pager(&self.rt).preview(&self.context)
    }

    /// Warns once at the policy's warning level; flushes at its flush level.
    pub(super) async fn relieve_pressure(&mut self, run: &mut StepRun, protected: &[MessageId]) {
        match Self::pager(&self.rt).pressure(&self.context) {
            Pressure::Flush => self.flush(run, protected, false).await,
            Pressure::Warn if !self.state.pressure_warned => {
                self.state.pressure_warned = true;
                run.pressure_warning = true;
                let fraction = self.context.stats().fraction;
                let mut text = format!(
                    "Memory pressure: your context is {:.0}% full. Older messages will soon be evicted: a summary is \
                     kept and the conversation stays searchable, but save anything you will need (including function \
                     results) to core memory or archival memory now.",
                    fraction * 100.0
                );
                // Loaded skills are not evicted: only the model can unload them.
                let loaded: Vec<&str> = self
                    .context
                    .memory()
                    .skills()
                    .all()
                    .iter()
                    .filter(|s| !s.loaded.is_empty())
                    .map(|s| s.name.as_str())
                    .collect();
                if !loaded.is_empty() {
                    text.push_str(&format!(
                        " Loaded skills take room too: unload those you no longer need ({}) with `skill`.",
                        loaded.join(", ")
                    ));
                }
                debug!(fraction, "memory-pressure warning");
                let now = run.now(self.rt.clock.as_ref());
                self.push(
                    run,
                    Message::new(self.id(), MessageKind::SystemAlert, text, now),
                );
            }
            _ => {}
        }
    }

    /// Pages out what the policy chooses (see [`Pager::flush`]).
    pub(super) async fn flush(&mut self, run: &mut StepRun, protected: &[MessageId], forced: bool) {
        let clock = self.rt.clock.as_ref();
        let fixed_time = run.fixed_time;
        let now = || fixed_time.unwrap_or_else(|| clock.now());
        let pager = Self::pager(&self.rt);
        if let Some(flush) = pager.flush(&mut self.context, protected, forced, now).await {
            run.timings.summarizer += flush.summarizer_time;
            self.state.pressure_warned = false;
            if let Some(observer) = &self.rt.observer {
                observer.observe(StepProgress::Flush(&flush.record));
            }
            run.flushes.push(flush.record);
        }
    }
}
