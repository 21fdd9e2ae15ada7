//! [`FunctionContext`]: what a running function may read and change (memory, storage, settings,
//! extensions).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::FunctionError;
use crate::config::AgentConfig;
use crate::embed::Embedder;
use crate::ids::{AgentId, MessageId, PassageId};
use crate::memory::{MemoryBlock, MemoryError, WorkingContext};
use crate::message::Message;
use crate::messaging::{AgentMessage, AgentMessenger, Delivery, MAX_AGENT_HOPS};
use crate::passages::{PassageError, PassageWriter};
use crate::retrieval::RecallRanking;
use crate::store::{
    ArchivalQuery, BlockEdit, BlockUpdate, Page, Passage, PassageRetirement, RecallQuery,
    SearchMode, SearchPage, Storage, StoreError, TimeRange, Validity, search_passages_with,
};
use crate::tokens::TokenCounter;

/// Settings that built-in functions read: the part of [`AgentConfig`] they obey.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSettings {
    /// Results per page of every search function.
    pub page_size: usize,
    /// How `archival_memory_search` ranks passages (falls back to text with no embedder).
    pub archival_search: SearchMode,
    /// Maximum tokens per archival passage; longer inserts are split.
    pub passage_tokens: usize,
    /// Maximum bytes one archival insert may hold.
    pub max_document_bytes: usize,
    /// How recall text searches rank.
    pub recall_ranking: RecallRanking,
    /// Time to live of archival passages by tag, in days ([`AgentConfig::archival_ttl_days`]).
    pub archival_ttl_days: std::collections::BTreeMap<String, u32>,
    /// Whether `archival_memory_search` shows passage ids: when the agent is offered a function
    /// that takes one ([`FACT_FUNCTIONS`](crate::config::FACT_FUNCTIONS)); otherwise the ids
    /// would only cost tokens.
    pub show_passage_ids: bool,
}

impl FunctionSettings {
    /// How text becomes archival passages under these settings: the one construction shared
    /// by the agent (uploads, `Agent::insert_archival`) and functions.
    pub(crate) fn passage_writer<'a>(
        &'a self,
        counter: &'a dyn TokenCounter,
        embedder: Option<&'a dyn Embedder>,
    ) -> PassageWriter<'a> {
        PassageWriter {
            counter,
            embedder,
            passage_tokens: self.passage_tokens,
            max_bytes: self.max_document_bytes,
            ttl_days: &self.archival_ttl_days,
        }
    }
}

impl From<&AgentConfig> for FunctionSettings {
    /// The settings an agent with this configuration gives its functions.
    fn from(config: &AgentConfig) -> Self {
        Self {
            page_size: config.page_size,
            archival_search: config.archival_search,
            passage_tokens: config.passage_tokens,
            max_document_bytes: config.max_document_bytes,
            recall_ranking: config.recall_ranking,
            archival_ttl_days: config.archival_ttl_days.clone(),
            show_passage_ids: config
                .functions
                .iter()
                .any(|f| crate::config::FACT_FUNCTIONS.contains(&f.as_str())),
        }
    }
}

impl Default for FunctionSettings {
    /// The settings of [`AgentConfig::default`].
    fn default() -> Self {
        Self::from(&AgentConfig::default())
    }
}

/// One page of recall results, and how they were found.
#[derive(Clone, Debug, PartialEq)]
pub struct RecallResults {
    /// The page.
    pub page: SearchPage<Message>,
    /// Whether meaning (embedding similarity) ranked along with the words; `false` for
    /// listings, for agents without an embedder, and when embedding the query failed.
    pub semantic: bool,
    /// What the model should know about how the results were found (text-only ranking and
    /// why, messages not embedded yet), if anything.
    pub note: Option<String>,
    /// Why each hit on the page was found, in order: its own words, only the turns before it
    /// (it is context around a match), or its meaning. Empty for a listing.
    pub found_by: Vec<crate::retrieval::FoundBy>,
}

/// Typed values a user hands to their functions (database pools, HTTP clients, API keys...).
///
/// ```
/// use memgpt_core::function::Extensions;
///
/// struct WeatherApiKey(String);
/// let mut ext = Extensions::new();
/// ext.insert(WeatherApiKey("k".into()));
/// assert_eq!(ext.get::<WeatherApiKey>().unwrap().0, "k");
/// ```
#[derive(Clone, Default)]
pub struct Extensions {
    map: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Extensions {
    /// No extensions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the value of type `T`.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.map.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, if one was inserted.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.map.get(&TypeId::of::<T>())?.downcast_ref()
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.map.len())
            .finish()
    }
}

/// Writes a step makes that are committed together at its end.
#[derive(Debug, Default)]
pub(crate) struct StepWrites {
    /// Passages inserted by functions (searchable within the step through the overlay).
    pub(crate) passages: Vec<Passage>,
    /// Stored passages functions retired (updated or forgotten).
    pub(crate) retired: Vec<PassageRetirement>,
    /// Messages for the user (`send_message`).
    pub(crate) replies: Vec<String>,
    /// A new pause for timer events: `Some(until)` set, `Some(None)` cleared.
    pub(crate) pause_until: Option<Option<DateTime<Utc>>>,
    /// Messages the functions used (returned by a search, or marked): the queue records the
    /// use for recency-based eviction.
    pub(crate) used: Vec<MessageId>,
}

/// What a function call can see and change: working context, recall and archival storage, the
/// user-facing output and the agent's extensions.
///
/// Writes (archival inserts, memory edits, messages to the user) become durable with the step
/// that made them; a later call in the same step already sees them.
pub struct FunctionContext<'a> {
    pub(crate) agent_id: AgentId,
    pub(crate) now: DateTime<Utc>,
    pub(crate) memory: &'a mut WorkingContext,
    pub(crate) storage: &'a Storage,
    pub(crate) embedder: Option<&'a dyn Embedder>,
    pub(crate) counter: &'a dyn TokenCounter,
    pub(crate) writes: &'a mut StepWrites,
    pub(crate) settings: &'a FunctionSettings,
    pub(crate) extensions: &'a Extensions,
    /// Passages committed before this step.
    pub(crate) committed_passages: u64,
    /// Messages in recall storage, this step's included.
    pub(crate) recall_messages: u64,
    /// Whether some committed conversation messages may still lack their embeddings.
    pub(crate) embedding_backlog: bool,
    /// Where messages to other agents go, with this step's place in an exchange.
    pub(crate) messaging: Messaging<'a>,
    /// Tokens working context may come to take (see [`FunctionContext::memory_budget`]).
    pub(crate) memory_budget: usize,
}

/// What a function needs to write to another agent: the messenger, who is writing, and the
/// exchange the step is part of.
pub(crate) struct Messaging<'a> {
    pub(crate) messenger: Option<&'a dyn AgentMessenger>,
    pub(crate) name: &'a str,
    /// The hop of the agent message that started the step (0 for any other event).
    pub(crate) hops: u32,
    /// The agents waiting for this step's replies.
    pub(crate) waiting: &'a [AgentId],
}

impl fmt::Debug for FunctionContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionContext")
            .field("agent_id", &self.agent_id)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl<'a> FunctionContext<'a> {
    /// The agent running the call.
    pub fn agent_id(&self) -> AgentId {
        self.agent_id
    }

    /// The time of the call (from the agent's clock).
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// Working context.
    pub fn memory(&self) -> &WorkingContext {
        self.memory
    }

    /// Working context, for editing.
    pub fn memory_mut(&mut self) -> &mut WorkingContext {
        self.memory
    }

    /// Edits block `label` and returns it as edited: the agent's own block in working context
    /// (committed with the step), a shared block where it lives, in one transaction of the
    /// block store applied to its current text (so an edit by another agent meanwhile is
    /// kept, and the others see this one on their next step). Limits and the read-only flag
    /// hold either way; a refused edit changes nothing and says why.
    ///
    /// Functions editing memory use this rather than [`FunctionContext::memory_mut`], whose
    /// edits refuse shared blocks.
    pub async fn edit_block(
        &mut self,
        label: &str,
        edit: impl Fn(&mut MemoryBlock) -> Result<(), MemoryError> + Send + Sync,
    ) -> Result<&MemoryBlock, FunctionError> {
        self.edit_block_with(label, &edit, false).await
    }

    /// Replaces the whole text of block `label` with `value`, as a rewrite of what the agent
    /// read: for a shared block it is refused, with the current text, when another writer
    /// changed the block since this agent's copy (nothing is lost by rewriting over it).
    pub async fn rewrite_block(
        &mut self,
        label: &str,
        value: &str,
    ) -> Result<&MemoryBlock, FunctionError> {
        let edit = |block: &mut MemoryBlock| block.set(value.to_owned());
        self.edit_block_with(label, &edit, true).await
    }

    async fn edit_block_with(
        &mut self,
        label: &str,
        edit: BlockEdit<'_>,
        based_on_copy: bool,
    ) -> Result<&MemoryBlock, FunctionError> {
        match self.memory.block(label)?.shared() {
            None => {
                self.memory.edit_own(label, edit)?;
            }
            Some(shared) => {
                let mut update = BlockUpdate::new(edit, self.now).by(self.agent_id);
                if based_on_copy {
                    update = update.based_on(shared.version);
                }
                // A refusal reads as the memory error it holds.
                let stored = self.storage.blocks.update_block(shared.id, &update).await?;
                self.memory.refresh_shared(stored.attached());
            }
        }
        Ok(self.memory.block(label)?)
    }

    /// About how many tokens working context may take in this agent's window
    /// ([`AgentConfig::memory_budget`]): a change that grows memory past it (a new block at its
    /// character limit, a loaded skill) is refused with [`MemoryError::OverBudget`]. Counted on
    /// [`WorkingContext::chars`], about four characters a token.
    pub fn memory_budget(&self) -> usize {
        self.memory_budget
    }

    /// Makes `change` to working context, then undoes it with `undo` and refuses it if memory,
    /// with `headroom` more characters (what a new block may still grow by), grew past
    /// [`FunctionContext::memory_budget`]. A change that does not grow memory always stands.
    fn within_budget<T>(
        &mut self,
        headroom: usize,
        change: impl FnOnce(&mut WorkingContext) -> Result<T, MemoryError>,
        undo: impl FnOnce(&mut WorkingContext, &T),
    ) -> Result<T, FunctionError> {
        let before = self.memory.chars();
        let done = change(self.memory)?;
        let after = self.memory.chars() + headroom;
        let would_be = after.div_ceil(4);
        if after > before && would_be > self.memory_budget {
            undo(self.memory, &done);
            return Err(MemoryError::OverBudget {
                would_be,
                budget: self.memory_budget,
            }
            .into());
        }
        Ok(done)
    }

    /// Adds `block`, a new block of the agent's own, at the end of working context (committed
    /// with the step): its label must be free and valid ([`check_label`](crate::memory::check_label)),
    /// and memory must stay within [`FunctionContext::memory_budget`] with the new block at its
    /// limit.
    pub fn create_block(&mut self, block: MemoryBlock) -> Result<&MemoryBlock, FunctionError> {
        crate::memory::check_label(block.label())?;
        let label = block.label().to_owned();
        let headroom = block.limit().saturating_sub(block.chars());
        self.within_budget(
            headroom,
            |memory| memory.add(block),
            |memory, _| {
                let _ = memory.remove(&label);
            },
        )?;
        Ok(self.memory.block(&label)?)
    }

    /// Deletes block `label` from the agent's working context and returns it: an own block is
    /// gone with the step's commit; a shared block is detached from this agent only (the
    /// others keep it, and it stays in the block store). A read-only block is refused.
    pub fn delete_block(&mut self, label: &str) -> Result<MemoryBlock, FunctionError> {
        if self.memory.block(label)?.is_read_only() {
            return Err(MemoryError::ReadOnly {
                label: label.to_owned(),
            }
            .into());
        }
        Ok(self.memory.remove(label)?)
    }

    /// Renames the agent's own block `from` to `to` (a free, valid label). A shared block's
    /// label is every holder's, so renaming one is refused with [`MemoryError::Shared`].
    pub fn rename_block(&mut self, from: &str, to: &str) -> Result<&MemoryBlock, FunctionError> {
        Ok(self.memory.rename(from, to)?)
    }

    /// Sets the description of block `label` (`None` clears it), where the block lives, as
    /// [`FunctionContext::edit_block`] does; a read-only block is refused.
    pub async fn describe_block(
        &mut self,
        label: &str,
        description: Option<&str>,
    ) -> Result<&MemoryBlock, FunctionError> {
        let edit = |block: &mut MemoryBlock| {
            if block.is_read_only() {
                return Err(MemoryError::ReadOnly {
                    label: block.label().to_owned(),
                });
            }
            block.set_description(description.map(str::to_owned));
            Ok(())
        };
        self.edit_block_with(label, &edit, false).await
    }

    /// Loads `file` of skill `name` (its `SKILL.md` for `None`) into working context, within
    /// [`FunctionContext::memory_budget`]; returns the path loaded.
    pub fn load_skill(&mut self, name: &str, file: Option<&str>) -> Result<String, FunctionError> {
        let (path, _) = self.within_budget(
            0,
            |memory| {
                // Loading a loaded file changes nothing, so the revision says what to undo.
                let revision = memory.revision();
                let path = memory.load_skill(name, file)?;
                Ok((path, memory.revision() != revision))
            },
            |memory, (path, newly)| {
                if *newly {
                    let _ = memory.unload_skill(name, Some(path));
                }
            },
        )?;
        Ok(path)
    }

    /// Unloads `file` of skill `name` (every loaded file of it for `None`) from working
    /// context; returns the paths unloaded.
    pub fn unload_skill(
        &mut self,
        name: &str,
        file: Option<&str>,
    ) -> Result<Vec<String>, FunctionError> {
        Ok(self.memory.unload_skill(name, file)?)
    }

    /// Refreshes this agent's copies of its shared blocks from the block store, in one read
    /// ([`refresh_shared_blocks`](crate::store::refresh_shared_blocks)): after a function put
    /// working context back as it was, the edits it had written to shared blocks stand there.
    pub(crate) async fn refresh_shared_blocks(&mut self) -> Result<(), FunctionError> {
        crate::store::refresh_shared_blocks(self.memory, self.storage.blocks.as_ref()).await?;
        Ok(())
    }

    /// Settings for built-in functions.
    pub fn settings(&self) -> &FunctionSettings {
        self.settings
    }

    /// The extension of type `T` given to the agent, if any.
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }

    /// Sends a message to the user (it appears in the step's replies).
    pub fn send_message(&mut self, text: impl Into<String>) {
        self.writes.replies.push(text.into());
    }

    /// Ignores timer events until `until` (`None` resumes them).
    pub fn pause_timers_until(&mut self, until: Option<DateTime<Utc>>) {
        self.writes.pause_until = Some(until);
    }

    /// How many messages recall storage holds for this agent.
    pub fn recall_count(&self) -> u64 {
        self.recall_messages
    }

    /// How many passages archival storage holds for this agent, this step's inserts included.
    pub fn archival_count(&self) -> u64 {
        self.committed_passages + self.writes.passages.len() as u64
    }

    /// Whether the agent has an embedder (recall and archival searches rank by meaning too).
    pub fn has_embedder(&self) -> bool {
        self.embedder.is_some()
    }

    /// Searches recall storage (see [`retrieval`](crate::retrieval)), ranked as the agent is
    /// configured. A text query is hybrid when the agent has an embedder: the query is embedded
    /// (messages still waiting for their embeddings are matched by words, with a note; the
    /// agent embeds them before its next step). Messages of the step in progress are in the
    /// FIFO queue and become searchable when the step commits. Every hit counts as a *use* of that message (see
    /// [`FunctionContext::mark_used`]).
    ///
    /// An embedder failure never fails the search: it falls back to words alone and says so in
    /// [`RecallResults::note`].
    pub async fn search_recall_and_mark_used(
        &mut self,
        query: &RecallQuery,
    ) -> Result<RecallResults, FunctionError> {
        let results = search_recall_hybrid(
            self.storage,
            self.embedder,
            self.agent_id,
            self.settings.recall_ranking,
            self.embedding_backlog,
            query,
        )
        .await?;
        // Best hit last: it becomes the most recently used.
        self.writes
            .used
            .extend(results.page.hits.iter().rev().map(|h| h.item.id));
        Ok(results)
    }

    /// Records that the function used (referenced, re-read) a message: if it is still in the
    /// FIFO queue, its recency is refreshed, which recency-based eviction
    /// ([`LruPolicy`](crate::queue::LruPolicy)) takes into account.
    pub fn mark_used(&mut self, id: MessageId) {
        self.writes.used.push(id);
    }

    /// Stores `text` in archival storage, split into passages of at most
    /// [`FunctionSettings::passage_tokens`] tokens and embedded when the agent has an embedder.
    /// Returns the new passages' ids.
    pub async fn insert_archival(
        &mut self,
        text: &str,
        metadata: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Vec<PassageId>, FunctionError> {
        let passages = self
            .settings
            .passage_writer(self.counter, self.embedder)
            .write(self.agent_id, text, metadata, false, self.now)
            .await
            .map_err(|e| match e {
                PassageError::TooLarge { bytes, limit } => FunctionError::new(format!(
                    "the content is {bytes} bytes, over the limit of {limit} bytes: insert it in smaller parts"
                )),
                PassageError::Empty => FunctionError::new("nothing to insert: the content is empty"),
                PassageError::Embed(e) => e.into(),
            })?;
        let ids = passages.iter().map(|p| p.id).collect();
        self.writes.passages.extend(passages);
        Ok(ids)
    }

    /// Searches archival storage, this step's writes included, ranked by
    /// [`FunctionSettings::archival_search`]; only passages with one of `tags` (when any are given)
    /// stored in `range`, valid at `as_of` (default: the facts valid now).
    pub async fn search_archival(
        &self,
        text: &str,
        page: usize,
        tags: &[String],
        range: TimeRange,
        as_of: Option<DateTime<Utc>>,
    ) -> Result<SearchPage<Passage>, FunctionError> {
        let page = Page::new(page, self.settings.page_size);
        let query = archival_query(
            self.embedder,
            self.settings.archival_search,
            text,
            page,
            tags,
            range,
            Validity::AsOf(as_of.unwrap_or(self.now)),
        )
        .await?;
        // This step's inserts and retirements count as if already stored.
        Ok(search_passages_with(
            self.storage.archival.as_ref(),
            self.agent_id,
            &query,
            &self.writes.passages,
            &self.writes.retired,
        )
        .await?)
    }

    /// Sends `text` to another agent (by name or id) through the agent's messenger: with
    /// `wait`, the addressee steps now and its replies come back; without, it reads the message
    /// on a step of its own. Refused without a messenger, past [`MAX_AGENT_HOPS`], to the agent
    /// itself, and (by the messenger) waiting on an agent that waits on this exchange.
    pub async fn message_agent(
        &mut self,
        to: &str,
        text: &str,
        wait: bool,
    ) -> Result<Delivery, FunctionError> {
        let Some(messenger) = self.messaging.messenger else {
            return Err(FunctionError::new(
                "this agent cannot write to other agents (it has no messenger)",
            ));
        };
        let to = to.trim();
        if to == self.messaging.name || to == self.agent_id.to_string() {
            return Err(FunctionError::new(
                "that is you: write to another agent, or answer with send_message",
            ));
        }
        if self.messaging.hops >= MAX_AGENT_HOPS {
            return Err(FunctionError::new(format!(
                "this exchange between agents has taken {} hops, the most allowed: answer with send_message instead",
                self.messaging.hops
            )));
        }
        // A waited-for message joins the chain of steps waiting on each other; one read later
        // starts a chain of its own.
        let waiting = if wait {
            let mut waiting = self.messaging.waiting.to_vec();
            waiting.push(self.agent_id);
            waiting
        } else {
            Vec::new()
        };
        let message = AgentMessage {
            from: self.agent_id,
            from_name: self.messaging.name.to_owned(),
            to: to.to_owned(),
            text: text.to_owned(),
            wait,
            hops: self.messaging.hops + 1,
            waiting,
        };
        messenger
            .deliver(message)
            .await
            .map_err(|e| FunctionError::new(e.to_string()))
    }

    /// Replaces the fact in passage `id` with `text`: the new version is stored (split and
    /// embedded as [`FunctionContext::insert_archival`] does, with the old one's tags), true
    /// from now, and the old one stops being current now, superseded by it; searches as of an earlier time still
    /// find the old one. Returns the new passages' ids. Fails for an unknown passage or one
    /// that is no longer current.
    pub async fn update_archival(
        &mut self,
        id: PassageId,
        text: &str,
    ) -> Result<Vec<PassageId>, FunctionError> {
        let old = self.current_passage(id).await?;
        let first_new = self.writes.passages.len();
        let ids = self.insert_archival(text, old.metadata).await?;
        let retirement =
            PassageRetirement::superseded(id, &mut self.writes.passages[first_new..], self.now);
        self.retire_passage(retirement);
        Ok(ids)
    }

    /// Retires passage `id` at `at` (now, or later: a time to live), for `reason`: from then on
    /// it is no longer a current fact, and stays as the record of what was once believed
    /// (searches as of an earlier time find it). Fails for an unknown passage, one that is no
    /// longer current, or an `at` in the past.
    pub async fn forget_archival(
        &mut self,
        id: PassageId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), FunctionError> {
        if at < self.now {
            return Err(FunctionError::new(
                "a passage can only be forgotten from now on, not in the past",
            ));
        }
        self.current_passage(id).await?;
        self.retire_passage(PassageRetirement {
            id,
            at,
            superseded_by: None,
            reason: reason.to_owned(),
        });
        Ok(())
    }

    /// The agent's passage `id` (this step's inserts included), if it is current.
    async fn current_passage(&self, id: PassageId) -> Result<Passage, FunctionError> {
        let pending = self.writes.passages.iter().find(|p| p.id == id).cloned();
        let passage = match pending {
            Some(passage) => passage,
            None => self
                .storage
                .archival
                .get_passages(self.agent_id, &[id])
                .await?
                .pop()
                .ok_or_else(|| FunctionError::new(format!("there is no archival passage {id}")))?,
        };
        if let Some(retired) = self.writes.retired.iter().find(|r| r.id == id) {
            return Err(FunctionError::new(format!(
                "passage {id} was already retired in this step ({})",
                retired.reason
            )));
        }
        if let Some(why) = passage.not_valid_because(self.now) {
            return Err(FunctionError::new(format!(
                "passage {id} is not a current fact: {why}"
            )));
        }
        Ok(passage)
    }

    /// Records the retirement of a current passage: in place for one this step inserted, as a
    /// write of the step for a stored one.
    fn retire_passage(&mut self, retirement: PassageRetirement) {
        match self
            .writes
            .passages
            .iter_mut()
            .find(|p| p.id == retirement.id)
        {
            Some(pending) => pending.retire(&retirement),
            None => self.writes.retired.push(retirement),
        }
    }
}

/// The archival query for `text` ranked by `mode`: embedded when the mode uses meaning and
/// there is an embedder, otherwise by words alone ([`SearchMode::Text`]).
pub(crate) async fn archival_query(
    embedder: Option<&dyn Embedder>,
    mode: SearchMode,
    text: &str,
    page: Page,
    tags: &[String],
    range: TimeRange,
    validity: Validity,
) -> Result<ArchivalQuery, crate::embed::EmbedError> {
    let embedding = match (mode, embedder) {
        (SearchMode::Text, _) | (_, None) => None,
        (_, Some(embedder)) => Some(embedder.embed_one(text).await?),
    };
    let mode = if embedding.is_some() {
        mode
    } else {
        SearchMode::Text
    };
    Ok(ArchivalQuery {
        embedding,
        tags: tags.to_vec(),
        range,
        validity,
        ..ArchivalQuery::new(text, mode, page)
    })
}

/// Recall search as [`FunctionContext::search_recall_and_mark_used`] runs it, without recording
/// uses: the query ranked by `ranking`, hybrid when there is an embedder (the query embedded),
/// falling back to words alone with a note. It writes nothing: with `backlog` (committed
/// messages may still lack embeddings) the note says they were matched by words.
pub(crate) async fn search_recall_hybrid(
    storage: &Storage,
    embedder: Option<&dyn Embedder>,
    agent: AgentId,
    ranking: RecallRanking,
    backlog: bool,
    query: &RecallQuery,
) -> Result<RecallResults, StoreError> {
    let mut query = query.clone();
    query.ranking = ranking;
    let mut notes = Vec::new();
    if let (Some(text), Some(embedder)) = (query.text_query(), embedder) {
        if backlog {
            notes.push(
                "some older messages are not embedded yet and were matched by words only"
                    .to_owned(),
            );
        }
        match embedder.embed_one(text).await {
            Ok(embedding) => query.embedding = Some(embedding),
            Err(e) => {
                tracing::warn!(error = %e, "embedding a recall query failed; searching by words");
                notes.push(format!(
                    "ranked by words only: embedding the query failed ({e})"
                ));
            }
        }
    } else if query.text_query().is_some() {
        notes.push("ranked by words only (no embedding model is configured)".to_owned());
    }
    let semantic = query.embedding.is_some();
    let (page, found_by) =
        crate::store::search_messages_found_by(storage.recall.as_ref(), agent, &query).await?;
    Ok(RecallResults {
        page,
        semantic,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        found_by,
    })
}
