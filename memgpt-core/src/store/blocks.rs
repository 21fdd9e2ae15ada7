//! Shared memory blocks: one block attached to several agents, kept once in a [`BlockStore`].
//!
//! An agent's [`WorkingContext`] holds a copy of each shared block it is attached to (marked
//! with a [`SharedRef`](crate::memory::SharedRef)); the block store holds the block itself.
//! An edit is one transaction on the store ([`BlockStore::update_block`]): the store applies
//! it to the block's *current* text (an append or a replacement by one agent never erases
//! another's), and a whole-text rewrite based on an older version is refused with
//! [`MemoryError::Changed`]. Limits and the read-only flag are the block's own, so they hold
//! for every writer. The other agents see the edit on their next step
//! ([`refresh_shared_blocks`]), which refreshes their prompt and names the block in
//! [`StepRecord::shared_blocks_changed`](crate::StepRecord::shared_blocks_changed).
//!
//! Which agents a block is attached to is part of each agent's state: attaching and
//! detaching are commits of the agent ([`Commit::attachments_changed`](super::Commit)).

use std::fmt;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::ids::{AgentId, BlockId};
use crate::memory::{MemoryBlock, MemoryError, WorkingContext};

/// One block shared by several agents, as the [`BlockStore`] keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedBlock {
    /// Its id.
    pub id: BlockId,
    /// The label, text, limit, description and read-only flag.
    pub block: MemoryBlock,
    /// Bumped by every edit (1 when created).
    pub version: u64,
    /// Whom the block belongs to where one store serves several owners: `memgpt serve` puts
    /// the tenant's id here and attaches a block only to that tenant's agents. `None`: no
    /// owner (a local store).
    pub scope: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was last edited.
    pub updated_at: DateTime<Utc>,
    /// The agent that made the last edit; `None` for a person (the API, the CLI) or creation.
    pub updated_by: Option<AgentId>,
}

impl SharedBlock {
    /// A new shared block holding `block`, at version 1.
    pub fn new(block: MemoryBlock, at: DateTime<Utc>) -> Self {
        Self {
            id: BlockId::new(),
            block: block.unshared(),
            version: 1,
            scope: None,
            created_at: at,
            updated_at: at,
            updated_by: None,
        }
    }

    /// The same block owned by `scope` (see [`SharedBlock::scope`]).
    pub fn in_scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Refuses a block holding U+0000 anywhere (see [`storable`](super::storable)).
    pub fn check_text(&self) -> Result<(), StoreError> {
        let b = &self.block;
        let what = || format!("shared block \"{}\"", b.label().replace('\0', "\\0"));
        super::storable(b.label(), what)?;
        super::storable(b.value(), what)?;
        if let Some(description) = b.description() {
            super::storable(description, what)?;
        }
        if let Some(scope) = &self.scope {
            super::storable(scope, what)?;
        }
        Ok(())
    }

    /// An agent's copy of the block at this version.
    pub fn attached(&self) -> MemoryBlock {
        self.block.clone().sharing(self.id, self.version)
    }

    /// The block after `update`, as every store computes it: the edit applied to the current
    /// block under its limit and read-only flag, after the version check of a rewrite; the
    /// version moves by one. The block is unchanged when this fails.
    pub fn updated(&self, update: &BlockUpdate<'_>) -> Result<SharedBlock, StoreError> {
        if update.based_on.is_some_and(|v| v != self.version) {
            return Err(StoreError::BlockRefused(MemoryError::Changed {
                label: self.block.label().to_owned(),
                current: self.block.value().to_owned(),
            }));
        }
        let mut block = self.block.clone();
        (update.edit)(&mut block).map_err(StoreError::BlockRefused)?;
        if block.label() != self.block.label() {
            return Err(StoreError::InvalidQuery(
                "an edit cannot change a shared block's label".into(),
            ));
        }
        Ok(SharedBlock {
            block: block.unshared(),
            version: self.version + 1,
            updated_at: update.at,
            updated_by: update.by,
            ..self.clone()
        })
    }
}

/// An edit of a block: it changes the block or says why not (see [`MemoryBlock`]'s methods).
pub type BlockEdit<'a> = &'a (dyn Fn(&mut MemoryBlock) -> Result<(), MemoryError> + Send + Sync);

/// One edit of a shared block ([`BlockStore::update_block`]).
#[derive(Clone, Copy)]
pub struct BlockUpdate<'a> {
    /// The change, applied to the block's current text.
    pub edit: BlockEdit<'a>,
    /// The version the edit was based on, for a change that rewrites what its writer read
    /// (`memory_rethink`, a person's replacement): refused with [`MemoryError::Changed`] if
    /// the block moved on. `None` for edits that apply to any version (an append, a
    /// replacement of a given text).
    pub based_on: Option<u64>,
    /// The agent editing; `None` for a person.
    pub by: Option<AgentId>,
    /// When.
    pub at: DateTime<Utc>,
}

impl<'a> BlockUpdate<'a> {
    /// An edit by a person (the API, the CLI) at `at` that applies to any version.
    pub fn new(edit: BlockEdit<'a>, at: DateTime<Utc>) -> Self {
        Self {
            edit,
            based_on: None,
            by: None,
            at,
        }
    }

    /// The same edit, refused unless the block is still at `version`.
    pub fn based_on(mut self, version: u64) -> Self {
        self.based_on = Some(version);
        self
    }

    /// The same edit, made by agent `agent`.
    pub fn by(mut self, agent: AgentId) -> Self {
        self.by = Some(agent);
        self
    }
}

impl fmt::Debug for BlockUpdate<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockUpdate")
            .field("based_on", &self.based_on)
            .field("by", &self.by)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

/// Where shared memory blocks live, next to the agents attached to them.
///
/// Attachments are written by the agents' commits ([`AgentStore`](super::AgentStore)): a
/// commit whose state holds a shared block that does not exist fails with
/// [`StoreError::BlockNotFound`] and writes nothing.
#[async_trait]
pub trait BlockStore: Send + Sync + fmt::Debug {
    /// Stores a new block. Fails with [`StoreError::BlockExists`] if the id is taken.
    async fn create_block(&self, block: &SharedBlock) -> Result<(), StoreError>;

    /// The blocks with these ids, in the order asked (unknown ids skipped).
    async fn get_blocks(&self, ids: &[BlockId]) -> Result<Vec<SharedBlock>, StoreError>;

    /// The blocks of `scope` (every block for `None`), oldest first.
    async fn list_blocks(&self, scope: Option<&str>) -> Result<Vec<SharedBlock>, StoreError>;

    /// Applies one edit in one transaction ([`SharedBlock::updated`]) and returns the block
    /// as stored. Concurrent edits, from any process, are serialised: none is lost. Fails with
    /// [`StoreError::BlockNotFound`], or [`StoreError::BlockRefused`] with nothing changed.
    async fn update_block(
        &self,
        id: BlockId,
        update: &BlockUpdate<'_>,
    ) -> Result<SharedBlock, StoreError>;

    /// Deletes a block no agent is attached to; returns whether it existed. Fails with
    /// [`StoreError::BlockInUse`] while agents hold it (detach it first).
    async fn delete_block(&self, id: BlockId) -> Result<bool, StoreError>;

    /// The agents attached to a block, oldest first.
    async fn block_agents(&self, id: BlockId) -> Result<Vec<AgentId>, StoreError>;
}

/// The block store of a composition without shared blocks (a custom store): it holds none
/// and refuses to create any.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSharedBlocks;

#[async_trait]
impl BlockStore for NoSharedBlocks {
    async fn create_block(&self, _block: &SharedBlock) -> Result<(), StoreError> {
        Err(StoreError::Unsupported("shared memory blocks".into()))
    }

    async fn get_blocks(&self, _ids: &[BlockId]) -> Result<Vec<SharedBlock>, StoreError> {
        Ok(Vec::new())
    }

    async fn list_blocks(&self, _scope: Option<&str>) -> Result<Vec<SharedBlock>, StoreError> {
        Ok(Vec::new())
    }

    async fn update_block(
        &self,
        id: BlockId,
        _update: &BlockUpdate<'_>,
    ) -> Result<SharedBlock, StoreError> {
        Err(StoreError::BlockNotFound(id))
    }

    async fn delete_block(&self, _id: BlockId) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn block_agents(&self, _id: BlockId) -> Result<Vec<AgentId>, StoreError> {
        Ok(Vec::new())
    }
}

/// Brings the copies of shared blocks in `memory` up to their stored versions; returns the
/// labels of the blocks that had changed. One read of the store, none for an agent without
/// shared blocks. A block missing from the store keeps its copy (with a warning).
pub async fn refresh_shared_blocks(
    memory: &mut WorkingContext,
    blocks: &dyn BlockStore,
) -> Result<Vec<String>, StoreError> {
    let ids = memory.shared_ids();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let stored = blocks.get_blocks(&ids).await?;
    if stored.len() != ids.len() {
        tracing::warn!(
            missing = ids.len() - stored.len(),
            "shared blocks missing from the block store: their copies stay as they were"
        );
    }
    let mut changed = Vec::new();
    for block in &stored {
        if memory.refresh_shared(block.attached()) {
            changed.push(block.block.label().to_owned());
        }
    }
    Ok(changed)
}
