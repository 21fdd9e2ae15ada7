//! The agent's side of memory consolidation ([`crate::consolidation`]): making a companion,
//! sharing blocks with it, and running it.

use chrono::Duration;

use super::{Agent, AgentBuilder, Event, Rollback, StepRecord};
use crate::consolidation::{Consolidation, MAX_MESSAGES, Transcript};
use crate::error::{Error, Result};
use crate::message::Message;
use crate::store::{Page, RecallQuery, SharedBlock, StoreError, TimeRange};

impl Agent {
    /// Makes block `label`, one of the agent's own, a shared block (in the store's
    /// [`BlockStore`](crate::store::BlockStore), owned by `scope`) and commits the agent holding
    /// it; returns it. A block already shared is returned as it is stored.
    pub async fn share_block(&mut self, label: &str, scope: Option<&str>) -> Result<SharedBlock> {
        self.sync_with_store().await?;
        let block = self.memory().block(label)?.clone();
        if let Some(shared) = block.shared() {
            return self
                .rt
                .storage
                .blocks
                .get_blocks(&[shared.id])
                .await?
                .pop()
                .ok_or_else(|| StoreError::BlockNotFound(shared.id).into());
        }
        let mut shared = SharedBlock::new(block, self.rt.clock.now());
        shared.scope = scope.map(str::to_owned);
        self.rt.storage.blocks.create_block(&shared).await?;
        if let Err(e) = self
            .update_memory(|memory| memory.replace_with_shared(shared.attached()))
            .await
        {
            if let Err(undo) = self.rt.storage.blocks.delete_block(shared.id).await {
                tracing::warn!(block = %shared.id, error = %undo, "could not remove the block of a failed share");
            }
            return Err(e);
        }
        Ok(shared)
    }

    /// Makes a consolidation companion for this agent (Letta's sleep-time agent), built by
    /// `builder` (its provider, and any setting to override the companion's defaults:
    /// instructions [`DEFAULT_COMPANION_PROMPT`](crate::consolidation::DEFAULT_COMPANION_PROMPT)
    /// and functions [`COMPANION_FUNCTIONS`](crate::config::COMPANION_FUNCTIONS)). The agent's
    /// own blocks become shared blocks (owned by `scope`) that both hold (the companion's id
    /// is the builder's, if it sets one); the companion runs
    /// after every `every_steps` user messages of this agent, or `idle` after its last step
    /// when [`memgpt serve`] runs it, or whenever [`Agent::consolidate`] is called. Both agents
    /// record the relation (an [`AgentGroup`](crate::config::AgentGroup) of kind
    /// [`SLEEPTIME`](crate::consolidation::SLEEPTIME)), so agent files carry it as Letta's do.
    ///
    /// [`memgpt serve`]: https://docs.rs/memgpt
    pub async fn add_companion(
        &mut self,
        mut builder: AgentBuilder,
        every_steps: u32,
        idle: Option<Duration>,
        scope: Option<&str>,
    ) -> Result<Agent> {
        if Consolidation::of(self.id(), &self.state.config).is_some() {
            return Err(Error::Config(format!(
                "agent {} already has a consolidation companion (or is one)",
                self.name()
            )));
        }
        let labels: Vec<String> = self
            .memory()
            .blocks()
            .iter()
            .map(|b| b.label().to_owned())
            .collect();
        for label in &labels {
            self.share_block(label, scope).await?;
        }
        let shared = self.memory().blocks().to_vec();
        let companion_id = builder.id_or_new();
        let consolidation = Consolidation {
            primary: self.id(),
            companion: companion_id,
            every_steps: every_steps.max(1),
            idle,
        };
        let group = consolidation.group();
        let name = format!("{}-companion", self.name());
        let companion = builder
            .companion(shared, group.clone(), &self.rt.storage)
            .name_if_unset(name)
            .build()
            .await?;
        let guard = Rollback::new(self);
        guard.agent.state.config.group = Some(group);
        let now = guard.agent.rt.clock.now();
        guard
            .agent
            .commit(now, Vec::new(), Vec::new(), Vec::new())
            .await?;
        guard.keep();
        Ok(companion)
    }

    /// Runs one consolidation step of this agent, a companion, over its primary's conversation
    /// since its last run (at most [`MAX_MESSAGES`] messages; the rest wait for the next run).
    /// `None` when there is nothing new. The step is recorded like any other, and moves the
    /// companion's cursor in its commit: a run that fails reads the same messages next time.
    pub async fn consolidate(&mut self) -> Result<Option<StepRecord>> {
        self.sync_with_store().await?;
        let Some(transcript) = self.pending_consolidation().await? else {
            return Ok(None);
        };
        let primary = self.companion_of()?.primary;
        self.step(Event::consolidation(primary, transcript))
            .await
            .map(Some)
    }

    /// Whether this companion's run is due: as many user messages of its primary wait as its
    /// [`Consolidation::every_steps`] says.
    pub async fn consolidation_due(&self) -> Result<bool> {
        let consolidation = self.companion_of()?;
        let waiting = crate::consolidation::waiting(
            &self.rt.storage,
            consolidation.primary,
            self.state.consolidated_until,
        )
        .await?;
        Ok(waiting >= consolidation.every_steps as usize)
    }

    /// The transcript the next [`Agent::consolidate`] would read, if any.
    pub async fn pending_consolidation(&self) -> Result<Option<Transcript>> {
        let consolidation = self.companion_of()?;
        let storage = &self.rt.storage;
        let primary = storage
            .agents
            .load_agent(consolidation.primary)
            .await?
            .ok_or(StoreError::AgentNotFound(consolidation.primary))?;
        let range = TimeRange {
            start: self.state.consolidated_until,
            end: None,
        };
        let page = storage
            .recall
            .list_messages(
                primary.id,
                &RecallQuery::range(range, Page::first(MAX_MESSAGES)),
            )
            .await?;
        let messages: Vec<Message> = page.hits.into_iter().map(|hit| hit.item).collect();
        Ok(Transcript::of(&primary.name, &messages))
    }
}

impl Agent {
    /// The consolidation this agent runs as companion; a configuration error otherwise.
    fn companion_of(&self) -> Result<Consolidation> {
        Consolidation::of(self.id(), &self.state.config)
            .filter(|c| c.companion == self.id())
            .ok_or_else(|| {
                Error::Config(format!(
                    "agent {} is not a consolidation companion (see Agent::add_companion)",
                    self.name()
                ))
            })
    }
}
