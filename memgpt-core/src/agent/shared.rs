//! The agent's side of shared memory blocks: attaching, detaching, editing, and seeing other
//! writers' edits (see [`store::blocks`](crate::store::BlockStore)).

use chrono::{DateTime, Utc};

use super::Agent;
use crate::error::Result;
use crate::ids::BlockId;
use crate::memory::{MemoryBlock, MemoryError};
use crate::store::{BlockUpdate, SharedBlock, StoreError, refresh_shared_blocks};

impl Agent {
    /// Attaches shared block `id` to this agent (after its other blocks) and commits the
    /// attachment: from now on the agent's prompt shows the block's current text. Fails with
    /// [`StoreError::BlockNotFound`], or [`MemoryError::DuplicateLabel`] when the agent
    /// already has a block of that label; the agent is unchanged then.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
    /// use std::sync::Arc;
    /// use memgpt_core::{Agent, MemoryBlock, store::{SharedBlock, Storage}, testing::ScriptedProvider};
    ///
    /// let (llm, storage) = (Arc::new(ScriptedProvider::new()), Storage::in_memory());
    /// let project = SharedBlock::new(MemoryBlock::new("project", "Launch: May 3"), chrono::Utc::now());
    /// storage.blocks.create_block(&project).await?;
    /// let mut a = Agent::builder().provider(llm.clone()).storage(storage.clone()).build().await?;
    /// let mut b = Agent::builder().provider(llm).storage(storage.clone()).build().await?;
    /// a.attach_block(project.id).await?;
    /// b.attach_block(project.id).await?;
    /// a.edit_block("project", |block| block.append("Owner: Ada")).await?;
    /// b.refresh_shared_blocks().await?;
    /// assert_eq!(b.memory().get("project").unwrap().value(), "Launch: May 3\nOwner: Ada");
    /// assert_eq!(storage.blocks.block_agents(project.id).await?, vec![a.id(), b.id()]);
    /// # Ok(()) }
    /// ```
    pub async fn attach_block(&mut self, id: BlockId) -> Result<()> {
        let block = self
            .rt
            .storage
            .blocks
            .get_blocks(&[id])
            .await?
            .pop()
            .ok_or(StoreError::BlockNotFound(id))?;
        self.update_memory(|memory| memory.add(block.attached()))
            .await
    }

    /// Detaches block `label` (shared or the agent's own) and commits; returns the block as
    /// the agent last had it. A shared block stays in the store for the agents still holding
    /// it.
    pub async fn detach_block(&mut self, label: &str) -> Result<MemoryBlock> {
        self.update_memory(|memory| memory.remove(label)).await
    }

    /// Edits block `label` directly (not through the LLM), shared or not, and returns it as
    /// edited. An agent's own block changes with a commit of the agent
    /// ([`Agent::update_memory`]); a shared block changes in the block store, in one
    /// transaction applied to its current text (the other agents see it on their next step),
    /// and this agent's copy follows. Limits and the read-only flag hold either way; a
    /// rejected edit changes nothing.
    pub async fn edit_block(
        &mut self,
        label: &str,
        edit: impl Fn(&mut MemoryBlock) -> std::result::Result<(), MemoryError> + Send + Sync,
    ) -> Result<MemoryBlock> {
        self.sync_with_store().await?;
        let Some(shared) = self.memory().block(label)?.shared() else {
            return self
                .update_memory(|memory| memory.edit_own(label, edit).cloned())
                .await;
        };
        let now = self.rt.clock.now();
        let updated = self
            .rt
            .storage
            .blocks
            .update_block(shared.id, &BlockUpdate::new(&edit, now))
            .await?;
        self.see_shared_block(&updated, now);
        Ok(updated.attached())
    }

    /// Brings this agent's copies of its shared blocks up to date (a step does this first);
    /// returns the labels of the blocks other writers had changed.
    pub async fn refresh_shared_blocks(&mut self) -> Result<Vec<String>> {
        let now = self.rt.clock.now();
        self.refresh_shared_blocks_at(now).await
    }

    pub(super) async fn refresh_shared_blocks_at(
        &mut self,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>> {
        let changed =
            refresh_shared_blocks(self.context.memory_mut(), self.rt.storage.blocks.as_ref())
                .await?;
        if !changed.is_empty() {
            self.context.memory_changed(now);
        }
        Ok(changed)
    }

    /// Puts a shared block as just stored in place of the agent's copy.
    fn see_shared_block(&mut self, block: &SharedBlock, now: DateTime<Utc>) {
        if self.context.memory_mut().refresh_shared(block.attached()) {
            self.context.memory_changed(now);
        }
    }
}
