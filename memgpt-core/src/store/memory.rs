//! The in-memory reference implementation of every storage seam.

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;

use super::{
    AgentState, AgentStore, ArchivalQuery, ArchivalStore, BlockStore, BlockUpdate, Commit,
    EmbeddingSpace, Hit, MAX_MESSAGE_WINDOWS, MessageEmbedding, Page, Passage, PassageCandidate,
    PassageEmbedding, RecallQuery, RecallStore, SearchPage, SharedBlock, StoreError,
};
use crate::embed::Embedding;
use crate::ids::{AgentId, BlockId, MessageId, PassageId};
use crate::message::Message;
use crate::retrieval::{
    CandidateKey, DocumentBuilder, NearestPassages, PassageMatches, RecallCandidate,
    TermStatistics, TextCandidates, count_terms, document_terms, is_conversation,
};

/// Every storage role in process memory: exact, simple, and the reference the SQL and index
/// backends are checked against. Nothing survives the process.
///
/// Search is exhaustive: every message whose document matches is a text candidate, and every
/// embedded message a vector candidate (exact cosine), so its rankings are what
/// [`search_messages`](crate::store::search_messages) gives with unlimited pools.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The space of every stored vector, fixed by the first one.
    embedding: Option<EmbeddingSpace>,
    agents: HashMap<AgentId, AgentState>,
    /// Creation order of agents.
    order: Vec<AgentId>,
    recall: HashMap<AgentId, AgentRecall>,
    archival: HashMap<AgentId, AgentArchival>,
    /// Statistics of every message document (all agents), for BM25.
    terms: Collection,
    /// Statistics of every passage's words (all agents), for BM25.
    passage_terms: Collection,
    /// The candidate key of the next passage stored (keys never repeat, so a search's keys
    /// stay valid while commits come and go).
    next_passage_key: CandidateKey,
    /// Shared memory blocks, oldest first.
    blocks: Vec<SharedBlock>,
}

impl Inner {
    /// Fails with [`StoreError::BlockNotFound`] unless every shared block `state` holds exists.
    fn check_attachments(&self, state: &AgentState) -> Result<(), StoreError> {
        match state
            .memory
            .shared_ids()
            .into_iter()
            .find(|id| !self.blocks.iter().any(|b| b.id == *id))
        {
            Some(missing) => Err(StoreError::BlockNotFound(missing)),
            None => Ok(()),
        }
    }
}

/// Document statistics of a collection.
#[derive(Debug, Default)]
struct Collection {
    documents: u64,
    total_terms: u64,
    document_frequency: HashMap<String, u64>,
}

impl Collection {
    fn add(&mut self, terms: &[String]) {
        self.documents += 1;
        self.total_terms += terms.len() as u64;
        let mut distinct: Vec<&String> = terms.iter().collect();
        distinct.sort_unstable();
        distinct.dedup();
        for term in distinct {
            *self.document_frequency.entry(term.clone()).or_default() += 1;
        }
    }

    fn remove(&mut self, document: &str) {
        let terms: Vec<String> = document
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        self.documents = self.documents.saturating_sub(1);
        self.total_terms = self.total_terms.saturating_sub(terms.len() as u64);
        let mut distinct = terms;
        distinct.sort_unstable();
        distinct.dedup();
        for term in distinct {
            if let Some(df) = self.document_frequency.get_mut(&term) {
                *df = df.saturating_sub(1);
                if *df == 0 {
                    self.document_frequency.remove(&term);
                }
            }
        }
    }

    fn statistics(&self, terms: &[String]) -> TermStatistics {
        TermStatistics {
            documents: self.documents,
            total_terms: self.total_terms,
            document_frequency: terms
                .iter()
                .map(|t| self.document_frequency.get(t).copied().unwrap_or(0))
                .collect(),
        }
    }
}

#[derive(Debug)]
struct AgentRecall {
    messages: Vec<Message>,
    /// Each message's search document (terms joined by spaces).
    documents: Vec<String>,
    /// Each message's embeddings, one per window (conversation messages only; empty until
    /// embedded).
    embeddings: Vec<Vec<Vec<f32>>>,
    by_id: HashMap<MessageId, usize>,
    builder: DocumentBuilder,
}

impl Default for AgentRecall {
    fn default() -> Self {
        Self {
            messages: Vec::new(),
            documents: Vec::new(),
            embeddings: Vec::new(),
            by_id: HashMap::new(),
            builder: DocumentBuilder::new([], 0),
        }
    }
}

#[derive(Debug, Default)]
struct AgentArchival {
    passages: Vec<Passage>,
    /// Each passage's candidate key.
    keys: Vec<CandidateKey>,
    /// Each passage's words (terms joined by spaces).
    documents: Vec<String>,
}

impl AgentArchival {
    /// Adds a passage: its words join the collection statistics.
    fn push(&mut self, passage: Passage, key: CandidateKey, collection: &mut Collection) {
        let terms = document_terms(&passage.text);
        collection.add(&terms);
        self.documents.push(terms.join(" "));
        self.keys.push(key);
        self.passages.push(passage);
    }

    /// Removes the passages `gone` holds, and their words from the collection statistics.
    fn remove(&mut self, gone: impl Fn(&Passage) -> bool, collection: &mut Collection) {
        let mut i = 0;
        while i < self.passages.len() {
            if gone(&self.passages[i]) {
                self.passages.remove(i);
                self.keys.remove(i);
                collection.remove(&self.documents.remove(i));
            } else {
                i += 1;
            }
        }
    }

    /// The indices of the passages `query` admits.
    fn admitted<'a>(&'a self, query: &'a ArchivalQuery) -> impl Iterator<Item = usize> + 'a {
        (0..self.passages.len()).filter(|&i| query.admits(&self.passages[i]))
    }
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // Writers never leave `Inner` half-updated (they validate first), so a poisoned lock
        // still guards consistent data.
        self.inner
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl BlockStore for InMemoryStore {
    async fn create_block(&self, block: &SharedBlock) -> Result<(), StoreError> {
        block.check_text()?;
        let mut inner = self.write();
        if inner.blocks.iter().any(|b| b.id == block.id) {
            return Err(StoreError::BlockExists(block.id));
        }
        inner.blocks.push(block.clone());
        Ok(())
    }

    async fn get_blocks(&self, ids: &[BlockId]) -> Result<Vec<SharedBlock>, StoreError> {
        let inner = self.read();
        Ok(ids
            .iter()
            .filter_map(|id| inner.blocks.iter().find(|b| b.id == *id).cloned())
            .collect())
    }

    async fn list_blocks(&self, scope: Option<&str>) -> Result<Vec<SharedBlock>, StoreError> {
        Ok(self
            .read()
            .blocks
            .iter()
            .filter(|b| scope.is_none() || b.scope.as_deref() == scope)
            .cloned()
            .collect())
    }

    async fn update_block(
        &self,
        id: BlockId,
        update: &BlockUpdate<'_>,
    ) -> Result<SharedBlock, StoreError> {
        let mut inner = self.write();
        let stored = inner
            .blocks
            .iter_mut()
            .find(|b| b.id == id)
            .ok_or(StoreError::BlockNotFound(id))?;
        let updated = stored.updated(update)?;
        updated.check_text()?;
        *stored = updated.clone();
        Ok(updated)
    }

    async fn delete_block(&self, id: BlockId) -> Result<bool, StoreError> {
        let mut inner = self.write();
        let agents = attached_agents(&inner, id);
        if !agents.is_empty() {
            return Err(StoreError::BlockInUse { id, agents });
        }
        let before = inner.blocks.len();
        inner.blocks.retain(|b| b.id != id);
        Ok(inner.blocks.len() < before)
    }

    async fn block_agents(&self, id: BlockId) -> Result<Vec<AgentId>, StoreError> {
        Ok(attached_agents(&self.read(), id))
    }
}

/// The agents whose state holds shared block `id`, oldest first.
fn attached_agents(inner: &Inner, id: BlockId) -> Vec<AgentId> {
    inner
        .order
        .iter()
        .filter(|a| {
            inner
                .agents
                .get(a)
                .is_some_and(|state| state.memory.shared_ids().contains(&id))
        })
        .copied()
        .collect()
}

#[async_trait]
impl AgentStore for InMemoryStore {
    async fn create_agent(&self, state: &AgentState) -> Result<(), StoreError> {
        state.check_text()?;
        let mut inner = self.write();
        if inner.agents.contains_key(&state.id) {
            return Err(StoreError::AgentExists(state.id));
        }
        inner.check_attachments(state)?;
        inner.agents.insert(state.id, state.clone());
        inner.order.push(state.id);
        Ok(())
    }

    async fn load_agent(&self, id: AgentId) -> Result<Option<AgentState>, StoreError> {
        Ok(self.read().agents.get(&id).cloned())
    }

    async fn agent_version(&self, id: AgentId) -> Result<Option<u64>, StoreError> {
        Ok(self.read().agents.get(&id).map(|state| state.version))
    }

    async fn list_agents(&self) -> Result<Vec<AgentState>, StoreError> {
        let inner = self.read();
        Ok(inner
            .order
            .iter()
            .filter_map(|id| inner.agents.get(id).cloned())
            .collect())
    }

    async fn delete_agent(&self, id: AgentId) -> Result<bool, StoreError> {
        let mut inner = self.write();
        if let Some(recall) = inner.recall.remove(&id) {
            for document in &recall.documents {
                inner.terms.remove(document);
            }
        }
        if let Some(archival) = inner.archival.remove(&id) {
            for document in &archival.documents {
                inner.passage_terms.remove(document);
            }
        }
        inner.order.retain(|a| *a != id);
        Ok(inner.agents.remove(&id).is_some())
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        commit.check_text()?;
        let id = commit.state.id;
        let mut inner = self.write();
        // Validate everything before changing anything: the commit is all or nothing.
        let current = inner.agents.get(&id).ok_or(StoreError::AgentNotFound(id))?;
        commit.check_version(current.version)?;
        if commit.attachments_changed {
            inner.check_attachments(&commit.state)?;
        }
        let fixed = EmbeddingSpace::settle(inner.embedding.clone(), commit.embeddings())?;

        inner.embedding = fixed;
        let Inner {
            archival,
            passage_terms,
            next_passage_key,
            ..
        } = &mut *inner;
        let archival = archival.entry(id).or_default();
        if !commit.deleted_passages.is_empty() {
            archival.remove(|p| commit.deleted_passages.contains(&p.id), passage_terms);
        }
        for passage in &commit.passages {
            archival.push(passage.clone(), *next_passage_key, passage_terms);
            *next_passage_key += 1;
        }
        for retired in &commit.retired_passages {
            if let Some(passage) = archival.passages.iter_mut().find(|p| p.id == retired.id) {
                passage.retire(retired);
            }
        }
        let Inner { recall, terms, .. } = &mut *inner;
        let recall = recall.entry(id).or_default();
        for message in &commit.messages {
            let document = recall.builder.add(message);
            terms.add(document.terms());
            recall.by_id.insert(message.id, recall.messages.len());
            recall.messages.push(message.clone());
            recall.documents.push(document.text());
            recall.embeddings.push(Vec::new());
        }
        set_embeddings(recall, &commit.message_embeddings);
        inner.agents.insert(id, commit.state.clone());
        Ok(())
    }

    async fn store_message_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[MessageEmbedding],
    ) -> Result<(), StoreError> {
        let mut inner = self.write();
        let fixed = EmbeddingSpace::settle(
            inner.embedding.clone(),
            embeddings.iter().map(|e| &e.embedding),
        )?;
        inner.embedding = fixed;
        if let Some(recall) = inner.recall.get_mut(&agent) {
            set_embeddings(recall, embeddings);
        }
        Ok(())
    }

    async fn embedding_space(&self) -> Result<Option<EmbeddingSpace>, StoreError> {
        Ok(self.read().embedding.clone())
    }

    async fn store_passage_embeddings(
        &self,
        agent: AgentId,
        embeddings: &[PassageEmbedding],
    ) -> Result<(), StoreError> {
        let mut inner = self.write();
        let fixed = EmbeddingSpace::settle(
            inner.embedding.clone(),
            embeddings.iter().map(|e| &e.embedding),
        )?;
        inner.embedding = fixed;
        if let Some(archival) = inner.archival.get_mut(&agent) {
            for e in embeddings {
                if let Some(p) = archival
                    .passages
                    .iter_mut()
                    .find(|p| p.id == e.passage && p.embedding.is_none())
                {
                    p.embedding = Some(e.embedding.clone());
                }
            }
        }
        Ok(())
    }

    async fn clear_embeddings(&self) -> Result<(), StoreError> {
        let mut inner = self.write();
        inner.embedding = None;
        for recall in inner.recall.values_mut() {
            recall.embeddings.iter_mut().for_each(Vec::clear);
        }
        for archival in inner.archival.values_mut() {
            archival
                .passages
                .iter_mut()
                .for_each(|p| p.embedding = None);
        }
        Ok(())
    }
}

/// Attaches embeddings to the agent's conversation messages (others are ignored; a window
/// already stored is kept).
fn set_embeddings(recall: &mut AgentRecall, embeddings: &[MessageEmbedding]) {
    for e in embeddings {
        if let Some(&i) = recall.by_id.get(&e.message)
            && is_conversation(recall.messages[i].kind)
            && e.window < MAX_MESSAGE_WINDOWS
        {
            let windows = &mut recall.embeddings[i];
            let w = e.window as usize;
            if windows.len() <= w {
                windows.resize(w + 1, Vec::new());
            }
            if windows[w].is_empty() {
                windows[w] = e.embedding.vector.clone();
            }
        }
    }
}

#[async_trait]
impl RecallStore for InMemoryStore {
    async fn list_messages(
        &self,
        agent: AgentId,
        query: &RecallQuery,
    ) -> Result<SearchPage<Message>, StoreError> {
        let inner = self.read();
        let Some(recall) = inner.recall.get(&agent) else {
            return Ok(SearchPage::empty(query.page));
        };
        let mut matching: Vec<&Message> =
            recall.messages.iter().filter(|m| query.admits(m)).collect();
        // Oldest first; equal times stay in append order (the sort is stable).
        matching.sort_by_key(|m| m.created_at);
        let total = matching.len();
        let hits = query
            .page
            .slice(matching)
            .into_iter()
            .map(|m| Hit {
                item: m.clone(),
                score: 0.0,
            })
            .collect();
        Ok(SearchPage {
            hits,
            page: query.page,
            total,
        })
    }

    async fn text_candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &RecallQuery,
        _limit: usize,
    ) -> Result<TextCandidates, StoreError> {
        let inner = self.read();
        let statistics = inner.terms.statistics(terms);
        let keys = inner
            .recall
            .get(&agent)
            .map(|recall| {
                recall
                    .messages
                    .iter()
                    .enumerate()
                    .filter(|(i, m)| {
                        query.admits(m)
                            && count_terms(&recall.documents[*i], terms)
                                .0
                                .iter()
                                .any(|f| *f > 0)
                    })
                    .map(|(i, _)| i as CandidateKey)
                    .collect()
            })
            .unwrap_or_default();
        Ok(TextCandidates { keys, statistics })
    }

    async fn vector_candidates(
        &self,
        agent: AgentId,
        embedding: &Embedding,
        query: &RecallQuery,
        _limit: usize,
    ) -> Result<Vec<CandidateKey>, StoreError> {
        let inner = self.read();
        if let Some(space) = &inner.embedding {
            space.check(embedding)?;
        }
        Ok(inner
            .recall
            .get(&agent)
            .map(|recall| {
                recall
                    .messages
                    .iter()
                    .enumerate()
                    .filter(|(i, m)| !recall.embeddings[*i].is_empty() && query.admits(m))
                    .map(|(i, _)| i as CandidateKey)
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn candidates(
        &self,
        agent: AgentId,
        keys: &[CandidateKey],
    ) -> Result<Vec<RecallCandidate>, StoreError> {
        let inner = self.read();
        let Some(recall) = inner.recall.get(&agent) else {
            return Ok(Vec::new());
        };
        Ok(keys
            .iter()
            .filter_map(|&key| {
                let i = usize::try_from(key).ok()?;
                Some(RecallCandidate {
                    key,
                    message: recall.messages.get(i)?.clone(),
                    document: recall.documents[i].clone(),
                    embeddings: recall.embeddings[i]
                        .iter()
                        .filter(|v| !v.is_empty())
                        .cloned()
                        .collect(),
                })
            })
            .collect())
    }

    async fn get_messages(
        &self,
        agent: AgentId,
        ids: &[MessageId],
    ) -> Result<Vec<Message>, StoreError> {
        let inner = self.read();
        let Some(recall) = inner.recall.get(&agent) else {
            return Ok(Vec::new());
        };
        Ok(ids
            .iter()
            .filter_map(|id| recall.by_id.get(id).map(|&i| recall.messages[i].clone()))
            .collect())
    }

    async fn count_messages(&self, agent: AgentId) -> Result<u64, StoreError> {
        Ok(self
            .read()
            .recall
            .get(&agent)
            .map_or(0, |r| r.messages.len() as u64))
    }

    async fn unembedded_messages(
        &self,
        agent: AgentId,
        limit: usize,
    ) -> Result<Vec<Message>, StoreError> {
        let inner = self.read();
        let Some(recall) = inner.recall.get(&agent) else {
            return Ok(Vec::new());
        };
        Ok(recall
            .messages
            .iter()
            .zip(&recall.embeddings)
            .filter(|(m, e)| e.is_empty() && is_conversation(m.kind))
            .map(|(m, _)| m.clone())
            .take(limit)
            .collect())
    }
}

#[async_trait]
impl ArchivalStore for InMemoryStore {
    async fn text_candidates(
        &self,
        agent: AgentId,
        terms: &[String],
        query: &ArchivalQuery,
        _limit: usize,
    ) -> Result<PassageMatches, StoreError> {
        let inner = self.read();
        let statistics = inner.passage_terms.statistics(terms);
        let Some(archival) = inner.archival.get(&agent) else {
            return Ok(PassageMatches {
                statistics,
                ..PassageMatches::default()
            });
        };
        // Exhaustive: every admitted passage holding a term is a candidate.
        let mut matches = PassageMatches {
            statistics,
            ..PassageMatches::default()
        };
        for i in archival.admitted(query) {
            if archival.documents[i]
                .split(' ')
                .any(|word| terms.iter().any(|t| t == word))
            {
                matches.keys.push(archival.keys[i]);
                matches.total += 1;
                matches.unembedded += u64::from(archival.passages[i].embedding.is_none());
            }
        }
        Ok(matches)
    }

    async fn vector_candidates(
        &self,
        agent: AgentId,
        embedding: &Embedding,
        query: &ArchivalQuery,
        _limit: usize,
    ) -> Result<NearestPassages, StoreError> {
        let inner = self.read();
        if let Some(space) = &inner.embedding {
            space.check(embedding)?;
        }
        let Some(archival) = inner.archival.get(&agent) else {
            return Ok(NearestPassages::default());
        };
        // Exhaustive: every admitted embedded passage is a candidate (the ranking orders them).
        let keys: Vec<CandidateKey> = archival
            .admitted(query)
            .filter(|&i| archival.passages[i].embedding.is_some())
            .map(|i| archival.keys[i])
            .collect();
        Ok(NearestPassages {
            total: keys.len() as u64,
            keys,
        })
    }

    async fn passage_candidates(
        &self,
        agent: AgentId,
        keys: &[CandidateKey],
    ) -> Result<Vec<PassageCandidate>, StoreError> {
        let inner = self.read();
        let Some(archival) = inner.archival.get(&agent) else {
            return Ok(Vec::new());
        };
        let wanted: std::collections::HashSet<CandidateKey> = keys.iter().copied().collect();
        Ok(archival
            .keys
            .iter()
            .zip(&archival.passages)
            .filter(|(key, _)| wanted.contains(key))
            .map(|(key, passage)| PassageCandidate {
                key: *key,
                passage: passage.clone(),
            })
            .collect())
    }

    async fn get_passages(
        &self,
        agent: AgentId,
        ids: &[PassageId],
    ) -> Result<Vec<Passage>, StoreError> {
        let inner = self.read();
        let Some(archival) = inner.archival.get(&agent) else {
            return Ok(Vec::new());
        };
        Ok(ids
            .iter()
            .filter_map(|id| archival.passages.iter().find(|p| p.id == *id).cloned())
            .collect())
    }

    async fn list_passages(
        &self,
        agent: AgentId,
        page: Page,
    ) -> Result<SearchPage<Passage>, StoreError> {
        let inner = self.read();
        let passages = inner
            .archival
            .get(&agent)
            .map(|a| a.passages.as_slice())
            .unwrap_or_default();
        Ok(SearchPage {
            total: passages.len(),
            hits: page
                .slice(passages.iter().collect())
                .into_iter()
                .map(|p| Hit {
                    item: p.clone(),
                    score: 0.0,
                })
                .collect(),
            page,
        })
    }

    async fn count_passages(&self, agent: AgentId) -> Result<u64, StoreError> {
        Ok(self
            .read()
            .archival
            .get(&agent)
            .map_or(0, |a| a.passages.len() as u64))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use chrono::{Duration, TimeZone, Utc};

    use super::*;
    use crate::config::AgentConfig;
    use crate::embed::HashingEmbedder;
    use crate::message::MessageKind;
    use crate::store::{SearchMode, Summary, TimeRange};

    /// A fresh agent's state, for tests.
    pub(crate) fn state(id: AgentId) -> AgentState {
        let t = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
        AgentState {
            id,
            name: "a".into(),
            version: 0,
            config: AgentConfig::default(),
            system: String::new(),
            memory: Default::default(),
            summary: Summary::default(),
            fifo: Vec::new(),
            pinned: Vec::new(),
            pressure_warned: false,
            heartbeats_paused_until: None,
            memory_updated_at: t,
            created_at: t,
            updated_at: t,
            pending_approval: None,
            consolidated_until: None,
        }
    }

    fn commit(state: &AgentState, messages: Vec<Message>, passages: Vec<Passage>) -> Commit {
        let mut next = state.clone();
        next.version += 1;
        Commit {
            state: next,
            messages,
            message_embeddings: Vec::new(),
            passages,
            deleted_passages: Vec::new(),
            retired_passages: Vec::new(),
            attachments_changed: false,
            queue: None,
        }
    }

    #[tokio::test]
    async fn commits_are_versioned_and_all_or_nothing() {
        let store = InMemoryStore::new();
        let id = AgentId::new();
        let s0 = state(id);
        store.create_agent(&s0).await.unwrap();
        assert!(matches!(
            store.create_agent(&s0).await,
            Err(StoreError::AgentExists(_))
        ));

        let t = s0.created_at;
        let e = HashingEmbedder::new(8);
        let mut good = Passage::new(id, "x", t);
        good.embedding = Some(Embedding {
            model: "m".into(),
            vector: e.vector("x"),
        });
        let c1 = commit(
            &s0,
            vec![Message::new(id, MessageKind::User, "hi", t)],
            vec![good],
        );
        store.commit(&c1).await.unwrap();

        // A stale writer conflicts.
        let stale = commit(
            &s0,
            vec![Message::new(id, MessageKind::User, "lost?", t)],
            vec![],
        );
        assert!(matches!(
            store.commit(&stale).await,
            Err(StoreError::Conflict {
                expected: 0,
                found: 1,
                ..
            })
        ));

        // A mismatched embedding rejects the whole commit, messages included.
        let mut bad = Passage::new(id, "y", t);
        bad.embedding = Some(Embedding {
            model: "other".into(),
            vector: vec![1.0; 8],
        });
        let c2 = commit(
            &c1.state,
            vec![Message::new(id, MessageKind::User, "also lost", t)],
            vec![bad],
        );
        assert!(matches!(
            store.commit(&c2).await,
            Err(StoreError::EmbeddingMismatch { .. })
        ));
        assert_eq!(store.count_messages(id).await.unwrap(), 1);
        assert_eq!(store.count_passages(id).await.unwrap(), 1);
        assert_eq!(store.load_agent(id).await.unwrap().unwrap().version, 1);
    }

    #[tokio::test]
    async fn recall_search_ranks_text_and_lists_ranges_chronologically() {
        let store = InMemoryStore::new();
        let id = AgentId::new();
        let s0 = state(id);
        store.create_agent(&s0).await.unwrap();
        let t0 = s0.created_at;
        let texts = ["my cat is Mochi", "weather talk", "Mochi ate tuna", "bye"];
        let messages: Vec<Message> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Message::new(id, MessageKind::User, *t, t0 + Duration::days(i as i64)))
            .collect();
        store
            .commit(&commit(&s0, messages.clone(), vec![]))
            .await
            .unwrap();

        let page = RecallStore::search(&store, id, &RecallQuery::text("mochi", Page::first(1)))
            .await
            .unwrap();
        assert_eq!(page.total, 2);
        assert_eq!(page.hits.len(), 1);
        assert!(page.has_more());

        let range = TimeRange {
            start: Some(t0 + Duration::days(1)),
            end: Some(t0 + Duration::days(3)),
        };
        let page = RecallStore::search(&store, id, &RecallQuery::range(range, Page::first(10)))
            .await
            .unwrap();
        let got: Vec<&str> = page.hits.iter().map(|h| h.item.text.as_str()).collect();
        assert_eq!(got, ["weather talk", "Mochi ate tuna"]);

        let ids = [messages[3].id, messages[0].id];
        let got = store.get_messages(id, &ids).await.unwrap();
        assert_eq!(got.iter().map(|m| m.id).collect::<Vec<_>>(), ids);
    }

    #[tokio::test]
    async fn archival_search_modes() {
        let store = InMemoryStore::new();
        let id = AgentId::new();
        let s0 = state(id);
        store.create_agent(&s0).await.unwrap();
        let e = HashingEmbedder::new(128);
        let passages: Vec<Passage> = [
            "the launch code is 4242",
            "apples are red",
            "bananas are yellow",
        ]
        .iter()
        .map(|t| {
            let mut p = Passage::new(id, *t, s0.created_at);
            p.embedding = Some(Embedding {
                model: e.model_name(),
                vector: e.vector(t),
            });
            p
        })
        .collect();
        store.commit(&commit(&s0, vec![], passages)).await.unwrap();

        let q = |mode, text: &str, with_vector: bool| ArchivalQuery {
            embedding: with_vector.then(|| Embedding {
                model: e.model_name(),
                vector: e.vector(text),
            }),
            ..ArchivalQuery::new(text, mode, Page::first(5))
        };
        for mode in [SearchMode::Vector, SearchMode::Text, SearchMode::Hybrid] {
            let page = ArchivalStore::search(&store, id, &q(mode, "launch code", true))
                .await
                .unwrap();
            assert_eq!(
                page.hits[0].item.text, "the launch code is 4242",
                "{mode:?}"
            );
        }
        assert!(matches!(
            ArchivalStore::search(&store, id, &q(SearchMode::Vector, "x", false)).await,
            Err(StoreError::InvalidQuery(_))
        ));
        let wrong = ArchivalQuery {
            embedding: Some(Embedding {
                model: "other".into(),
                vector: vec![0.0; 3],
            }),
            ..q(SearchMode::Vector, "x", false)
        };
        assert!(matches!(
            ArchivalStore::search(&store, id, &wrong).await,
            Err(StoreError::EmbeddingMismatch { .. })
        ));
    }

    impl HashingEmbedder {
        fn model_name(&self) -> String {
            crate::embed::Embedder::model(self).to_owned()
        }
    }
}
