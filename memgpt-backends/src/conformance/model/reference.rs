//! The reference: what a store holds after a sequence of operations, in plain collections,
//! and what each search must return, written from the storage traits' documented contracts
//! (not from any store's code). It knows nothing of ranking: it says which items a search must
//! find, in which order where the contract fixes one (listings), and how many there are.

use std::collections::{BTreeSet, HashMap};

use memgpt_core::backend::DocumentBuilder;
use memgpt_core::ids::{AgentId, BlockId, MessageId, PassageId};
use memgpt_core::message::{Message, MessageKind};
use memgpt_core::retrieval::{document_terms, query_terms};
use memgpt_core::store::{
    AgentState, ArchivalQuery, Passage, PassageRetirement, RecallQuery, SearchMode, SharedBlock,
};

/// A message as the reference keeps it.
#[derive(Clone, Debug)]
pub(super) struct StoredMessage {
    pub(super) message: Message,
    /// Its search document's terms (its own, with those of the conversation turns before it:
    /// [`DocumentBuilder`], the documented way every store builds them, in append order).
    pub(super) terms: BTreeSet<String>,
    /// Whether its embedding is stored.
    pub(super) embedded: bool,
}

/// An agent and everything it owns.
#[derive(Clone, Debug)]
pub(super) struct AgentModel {
    /// The state as last committed.
    pub(super) state: AgentState,
    /// Every message, in append order.
    pub(super) messages: Vec<StoredMessage>,
    /// Every passage, in insertion order, as it is now (embedding, lifetime).
    pub(super) passages: Vec<Passage>,
    builder: DocumentBuilder,
}

impl AgentModel {
    /// A new agent with this state (version 0).
    pub(super) fn new(state: AgentState) -> Self {
        Self {
            state,
            messages: Vec::new(),
            passages: Vec::new(),
            builder: DocumentBuilder::new(std::iter::empty(), 0),
        }
    }

    pub(super) fn id(&self) -> AgentId {
        self.state.id
    }

    /// Applies a committed step: messages appended (embedded or not), passages deleted,
    /// added, then retired.
    pub(super) fn commit(
        &mut self,
        state: AgentState,
        messages: &[Message],
        embedded: &BTreeSet<MessageId>,
        added: &[Passage],
        deleted: &[PassageId],
        retired: &[PassageRetirement],
    ) {
        self.state = state;
        for message in messages {
            let document = self.builder.add(message);
            self.messages.push(StoredMessage {
                message: message.clone(),
                terms: document.terms().iter().cloned().collect(),
                embedded: embedded.contains(&message.id),
            });
        }
        self.passages.retain(|p| !deleted.contains(&p.id));
        self.passages.extend(added.iter().cloned());
        for retirement in retired {
            if let Some(p) = self.passages.iter_mut().find(|p| p.id == retirement.id) {
                p.retire(retirement);
            }
        }
    }

    /// The messages a recall search must find: those the filters admit whose document holds
    /// a query term, or that are embedded when the query has an embedding. `None` for a
    /// listing (no words): then [`AgentModel::listing`].
    pub(super) fn recall_matches(&self, query: &RecallQuery) -> Option<BTreeSet<MessageId>> {
        let text = query.text_query()?;
        let terms = query_terms(text);
        Some(
            self.messages
                .iter()
                .filter(|m| query.admits(&m.message))
                .filter(|m| {
                    terms.iter().any(|t| m.terms.contains(t))
                        || (query.embedding.is_some() && m.embedded)
                })
                .map(|m| m.message.id)
                .collect(),
        )
    }

    /// A listing: the admitted messages, oldest first, equal times in append order.
    pub(super) fn listing(&self, query: &RecallQuery) -> Vec<MessageId> {
        let mut admitted: Vec<&StoredMessage> = self
            .messages
            .iter()
            .filter(|m| query.admits(&m.message))
            .collect();
        admitted.sort_by_key(|m| m.message.created_at);
        admitted.iter().map(|m| m.message.id).collect()
    }

    /// The passages an archival search must find, by mode: the admitted passages holding a
    /// query term (text), embedded (vector), or either (hybrid; text alone without a query
    /// embedding).
    pub(super) fn archival_matches(&self, query: &ArchivalQuery) -> BTreeSet<PassageId> {
        let terms = query_terms(&query.text);
        let by_vector = query.embedding.is_some();
        self.passages
            .iter()
            .filter(|p| query.admits(p))
            .filter(|p| {
                let words = || {
                    let document = document_terms(&p.text);
                    terms.iter().any(|t| document.contains(t))
                };
                let embedded = p.embedding.is_some();
                match query.mode {
                    SearchMode::Vector => embedded,
                    SearchMode::Text => words(),
                    SearchMode::Hybrid => words() || (by_vector && embedded),
                }
            })
            .map(|p| p.id)
            .collect()
    }

    /// The conversation messages without an embedding, oldest first.
    pub(super) fn unembedded_messages(&self) -> Vec<&Message> {
        self.messages
            .iter()
            .filter(|m| !m.embedded && MessageKind::CONVERSATION.contains(&m.message.kind))
            .map(|m| &m.message)
            .collect()
    }
}

/// A shared block and the agents holding it.
#[derive(Clone, Debug)]
pub(super) struct BlockModel {
    pub(super) block: SharedBlock,
    pub(super) holders: Vec<AgentId>,
}

/// Everything the store holds.
#[derive(Debug, Default)]
pub(super) struct Reference {
    /// Live agents, oldest first.
    pub(super) agents: Vec<AgentModel>,
    /// Deleted agents (their searches find nothing).
    pub(super) deleted: Vec<AgentId>,
    /// Live shared blocks, oldest first.
    pub(super) blocks: Vec<BlockModel>,
    /// Blocks ever created (each has a label of its own).
    pub(super) blocks_created: usize,
}

impl Reference {
    /// The agent in slot `slot` (slots wrap around the live agents).
    pub(super) fn agent(&self, slot: usize) -> Option<usize> {
        (!self.agents.is_empty()).then(|| slot % self.agents.len())
    }

    /// The block in slot `slot`.
    pub(super) fn block(&self, slot: usize) -> Option<usize> {
        (!self.blocks.is_empty()).then(|| slot % self.blocks.len())
    }

    /// Which agents hold which block.
    pub(super) fn holders(&self) -> HashMap<BlockId, Vec<AgentId>> {
        self.blocks
            .iter()
            .map(|b| (b.block.id, b.holders.clone()))
            .collect()
    }
}
