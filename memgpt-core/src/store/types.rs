//! The stores' shared types: pages of hits, queries, passages, time ranges.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::StoreError;
use crate::config::AgentConfig;
use crate::embed::Embedding;
use crate::ids::{AgentId, MessageId, PassageId};
use crate::memory::WorkingContext;
use crate::message::{Message, MessageKind};
use crate::retrieval::{CandidateKey, PassageDocument, RecallRanking, SearchMode};

/// Which page of results to return. Pages are numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// The page number, from 0.
    pub number: usize,
    /// Results per page (at least 1).
    pub size: usize,
}

impl Page {
    /// Page `number` of `size` results.
    pub fn new(number: usize, size: usize) -> Self {
        Self {
            number,
            size: size.max(1),
        }
    }

    /// The first page of `size` results.
    pub fn first(size: usize) -> Self {
        Self::new(0, size)
    }

    /// Index of the first result on this page (saturating: any page number is safe).
    pub fn offset(&self) -> usize {
        self.number.saturating_mul(self.size)
    }

    /// How many results the pages up to and including this one hold (saturating).
    pub fn depth(&self) -> usize {
        self.offset().saturating_add(self.size)
    }

    /// Cuts this page out of a full, ordered result list.
    pub fn slice<T>(&self, all: Vec<T>) -> Vec<T> {
        all.into_iter()
            .skip(self.offset())
            .take(self.size)
            .collect()
    }
}

/// One search result with its score (higher is better; meaning depends on the search).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit<T> {
    /// The item found.
    pub item: T,
    /// Its relevance score.
    pub score: f32,
}

/// One page of search results and how many there are in all.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchPage<T> {
    /// The hits on this page, best (or oldest, for listings) first.
    pub hits: Vec<Hit<T>>,
    /// Which page this is.
    pub page: Page,
    /// How many results match in all pages together.
    pub total: usize,
}

impl<T> SearchPage<T> {
    /// An empty result.
    pub fn empty(page: Page) -> Self {
        Self {
            hits: Vec::new(),
            page,
            total: 0,
        }
    }

    /// The `page` of a full ranking, best first: every entry counts towards
    /// [`total`](SearchPage::total), and `hit` turns the page's entries into hits.
    ///
    /// ```
    /// use memgpt_core::store::{Hit, Page, SearchPage};
    ///
    /// let ranking = vec![("a", 0.9), ("b", 0.5), ("c", 0.1)];
    /// let page = SearchPage::from_ranking(Page::new(1, 2), ranking, |(item, score)| Hit { item, score });
    /// assert_eq!((page.hits.len(), page.hits[0].item, page.total), (1, "c", 3));
    /// ```
    pub fn from_ranking<R>(page: Page, ranking: Vec<R>, hit: impl FnMut(R) -> Hit<T>) -> Self {
        let total = ranking.len();
        let hits = page.slice(ranking).into_iter().map(hit).collect();
        Self { hits, page, total }
    }

    /// How many pages the results span.
    pub fn page_count(&self) -> usize {
        self.total.div_ceil(self.page.size)
    }

    /// Whether a later page has more results.
    pub fn has_more(&self) -> bool {
        self.page.number + 1 < self.page_count()
    }
}

/// A time interval: `start` inclusive, `end` exclusive; either side may be open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    /// Earliest time included.
    pub start: Option<DateTime<Utc>>,
    /// First time excluded.
    pub end: Option<DateTime<Utc>>,
}

impl TimeRange {
    /// Whether `t` falls in the range.
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.start.is_none_or(|s| t >= s) && self.end.is_none_or(|e| t < e)
    }

    /// Whether the range is unbounded on both sides.
    pub fn is_unbounded(&self) -> bool {
        self.start.is_none() && self.end.is_none()
    }
}

/// A recall-storage query.
///
/// With text it is a hybrid search ([`search_messages`](crate::store::search_messages)): BM25
/// over the message documents, plus embedding similarity when [`RecallQuery::embedding`] is
/// given; without text it lists messages chronologically. The kind and time filters apply to
/// both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecallQuery {
    /// Words to search for; `None` (or blank) lists messages chronologically.
    pub text: Option<String>,
    /// The embedding of the text (same model as the store's), for hybrid ranking.
    #[serde(default)]
    pub embedding: Option<Embedding>,
    /// Only messages created in this range.
    pub range: TimeRange,
    /// Only messages of these kinds; empty means every kind.
    pub kinds: Vec<MessageKind>,
    /// Which page.
    pub page: Page,
    /// How text searches rank.
    #[serde(default)]
    pub ranking: RecallRanking,
}

impl RecallQuery {
    /// A text search over the conversation (user and assistant messages).
    pub fn text(text: impl Into<String>, page: Page) -> Self {
        Self {
            text: Some(text.into()),
            embedding: None,
            range: TimeRange::default(),
            kinds: MessageKind::CONVERSATION.to_vec(),
            page,
            ranking: RecallRanking::default(),
        }
    }

    /// The conversation (user and assistant messages) in a time range, oldest first.
    pub fn range(range: TimeRange, page: Page) -> Self {
        Self {
            text: None,
            embedding: None,
            range,
            kinds: MessageKind::CONVERSATION.to_vec(),
            page,
            ranking: RecallRanking::default(),
        }
    }

    /// Messages of these kinds (any text, any time), oldest first.
    pub fn kinds(kinds: impl IntoIterator<Item = MessageKind>, page: Page) -> Self {
        Self {
            kinds: kinds.into_iter().collect(),
            ..Self::range(TimeRange::default(), page)
        }
    }

    /// The same query ranked with the help of the text's embedding.
    pub fn with_embedding(mut self, embedding: Embedding) -> Self {
        self.embedding = Some(embedding);
        self
    }

    /// The query text if it has any non-whitespace content.
    pub fn text_query(&self) -> Option<&str> {
        self.text
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }

    /// Whether a message passes the kind and range filters (not the text).
    pub fn admits(&self, message: &Message) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&message.kind))
            && self.range.contains(message.created_at)
    }
}

/// An archival-storage query.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchivalQuery {
    /// The query text.
    pub text: String,
    /// The query's embedding (needed for vector and hybrid search).
    pub embedding: Option<Embedding>,
    /// How to rank.
    pub mode: SearchMode,
    /// Which page.
    pub page: Page,
    /// Only passages carrying at least one of these tags (see [`Passage::tags`]); empty means
    /// any passage.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Only passages stored in this range.
    #[serde(default)]
    pub range: TimeRange,
    /// Which facts: the ones valid now (the default), at a past instant, or every version.
    #[serde(default)]
    pub validity: Validity,
}

/// Which versions of archival facts a search sees (see [`Passage::valid_at`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validity {
    /// The passages valid now: not retired, superseded or expired.
    #[default]
    Current,
    /// The passages that were valid at this instant.
    AsOf(DateTime<Utc>),
    /// Every passage, retired and superseded ones included.
    Any,
}

impl Validity {
    /// The instant passages must be valid at (`Current` is now), or `None` for any passage.
    pub fn instant(self) -> Option<DateTime<Utc>> {
        match self {
            Validity::Current => Some(Utc::now()),
            Validity::AsOf(at) => Some(at),
            Validity::Any => None,
        }
    }

    /// `Current` fixed to the present instant, so that every part of one search agrees on it.
    pub fn resolved(self) -> Self {
        match self.instant() {
            Some(at) => Validity::AsOf(at),
            None => Validity::Any,
        }
    }
}

impl ArchivalQuery {
    /// A query of `text` ranked by `mode`, without filters: it sees the facts valid now.
    pub fn new(text: impl Into<String>, mode: SearchMode, page: Page) -> Self {
        Self {
            text: text.into(),
            embedding: None,
            mode,
            page,
            tags: Vec::new(),
            range: TimeRange::default(),
            validity: Validity::Current,
        }
    }

    /// The same query over the facts valid at `at` instead of now.
    pub fn as_of(mut self, at: DateTime<Utc>) -> Self {
        self.validity = Validity::AsOf(at);
        self
    }

    /// The same query with the text's embedding.
    pub fn with_embedding(mut self, embedding: Embedding) -> Self {
        self.embedding = Some(embedding);
        self
    }

    /// Whether a passage passes the tag, time and validity filters (a `Current` query is
    /// checked against this instant: [`Validity::resolved`] fixes it for a whole search).
    pub fn admits(&self, passage: &Passage) -> bool {
        self.range.contains(passage.created_at)
            && (self.tags.is_empty() || passage.tags().iter().any(|t| self.tags.contains(t)))
            && self
                .validity
                .instant()
                .is_none_or(|at| passage.valid_at(at))
    }
}

/// The metadata key under which a passage's tags are kept (a JSON array of strings).
pub const TAGS_KEY: &str = "tags";

/// One passage of archival storage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Passage {
    /// Its id.
    pub id: PassageId,
    /// The agent it belongs to.
    pub agent_id: AgentId,
    /// The text.
    pub text: String,
    /// Its embedding, with the model that produced it.
    pub embedding: Option<Embedding>,
    /// Free-form metadata (source document, chunk index...).
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// When it was stored.
    pub created_at: DateTime<Utc>,
    /// When the fact became true, where memory knows it: a newer version of a fact holds from
    /// when it replaced the old one. `None`: true for as long as memory can tell (searches as
    /// of any earlier time find it, unless it was retired by then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<DateTime<Utc>>,
    /// When the fact stopped (or stops) being true: it was forgotten, superseded by a newer
    /// version, or its time to live ends then. `None`: true until retired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
    /// The passage that replaced it (`archival_memory_update`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<PassageId>,
    /// Why it was retired (`archival_memory_forget`, or "superseded").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_reason: Option<String>,
}

impl Passage {
    /// Whether the fact was true at `at`: from [`Passage::valid_from`] (when known) up to,
    /// not including, [`Passage::valid_to`].
    pub fn valid_at(&self, at: DateTime<Utc>) -> bool {
        self.valid_from.is_none_or(|from| from <= at) && self.valid_to.is_none_or(|to| at < to)
    }

    /// Why the passage is not a current fact at `at` (superseded, forgotten, expired or not
    /// yet true), or `None` when it is.
    pub fn not_valid_because(&self, at: DateTime<Utc>) -> Option<String> {
        if self.valid_at(at) {
            return None;
        }
        Some(
            match (&self.superseded_by, &self.retired_reason, self.valid_to) {
                (Some(newer), _, _) => format!("it was superseded by passage {newer}"),
                (None, Some(reason), _) => format!("it was forgotten: {reason}"),
                (None, None, Some(to)) if to <= at => format!("it expired at {to}"),
                _ => "it is not true yet".to_owned(),
            },
        )
    }

    /// The passage's tags: the strings of its `tags` metadata array.
    pub fn tags(&self) -> Vec<String> {
        match self.metadata.get(TAGS_KEY) {
            Some(serde_json::Value::Array(values)) => values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A passage with no embedding and no metadata.
    pub fn new(agent_id: AgentId, text: impl Into<String>, at: DateTime<Utc>) -> Self {
        Self {
            id: PassageId::new(),
            agent_id,
            text: text.into(),
            embedding: None,
            metadata: serde_json::Map::new(),
            created_at: at,
            valid_from: None,
            valid_to: None,
            superseded_by: None,
            retired_reason: None,
        }
    }

    /// Applies a retirement as every store does: the passage stops being true at
    /// `retired.at`, or keeps an earlier end it already had (its replacement and reason are
    /// then kept too).
    pub fn retire(&mut self, retired: &PassageRetirement) {
        if self.valid_to.is_some_and(|to| to <= retired.at) {
            return;
        }
        self.valid_to = Some(retired.at);
        self.superseded_by = retired.superseded_by;
        self.retired_reason = Some(retired.reason.clone());
    }

    /// The same passage, true until `until` (a time to live).
    pub fn valid_until(mut self, until: DateTime<Utc>) -> Self {
        self.valid_to = Some(until);
        self
    }
}

/// Retiring a stored passage: from `at` it is no longer a current fact (searches as of an
/// earlier instant still find it). A passage already retired earlier keeps its earlier end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassageRetirement {
    /// The passage.
    pub id: PassageId,
    /// When it stops being true.
    pub at: DateTime<Utc>,
    /// The passage replacing it, if it was updated.
    pub superseded_by: Option<PassageId>,
    /// Why.
    pub reason: String,
}

/// The retirement reason of a passage replaced by a newer version.
const SUPERSEDED: &str = "superseded";

impl PassageRetirement {
    /// Passage `old` replaced at `at` by `versions`, the passages of its new text in order:
    /// each holds from `at`, and `old` is superseded by the first. The one rule of an update,
    /// for the function and the agent's API alike.
    pub(crate) fn superseded(old: PassageId, versions: &mut [Passage], at: DateTime<Utc>) -> Self {
        for version in versions.iter_mut() {
            version.valid_from = Some(at);
        }
        Self {
            id: old,
            at,
            superseded_by: versions.first().map(|p| p.id),
            reason: SUPERSEDED.to_owned(),
        }
    }
}

/// One passage an archival search ranks: the store's key for it and the passage.
#[derive(Clone, Debug, PartialEq)]
pub struct PassageCandidate {
    /// The store's key for it.
    pub key: CandidateKey,
    /// The passage, with its embedding.
    pub passage: Passage,
}

impl PassageCandidate {
    /// What the ranking reads of it.
    pub fn document(&self) -> PassageDocument<'_> {
        PassageDocument {
            key: self.key,
            text: &self.passage.text,
            embedding: self.passage.embedding.as_ref().map(|e| e.vector.as_slice()),
            created_at: self.passage.created_at,
        }
    }
}

/// The recursive summary: the first entry of the FIFO queue, standing for every evicted message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The summary text (empty before the first flush).
    pub text: String,
    /// How many messages it stands for.
    pub evicted_messages: u64,
    /// When it was last rewritten.
    pub updated_at: Option<DateTime<Utc>>,
    /// The latest flushes, oldest first (at most [`Summary::HISTORY_LIMIT`]): what each one
    /// evicted and the summary it left. States saved before the history existed load with none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<SummaryRevision>,
}

impl Summary {
    /// How many flushes [`Summary::history`] remembers; older ones are dropped (their messages
    /// stay in recall storage, and the current text still stands for them).
    pub const HISTORY_LIMIT: usize = 16;

    /// Records a flush in the history, dropping the oldest beyond [`Summary::HISTORY_LIMIT`].
    ///
    /// ```
    /// use chrono::Utc;
    /// use memgpt_core::store::{Summary, SummaryRevision};
    ///
    /// let mut summary = Summary::default();
    /// for i in 0..20 {
    ///     let now = Utc::now();
    ///     summary.record(SummaryRevision {
    ///         at: now,
    ///         evicted_messages: i,
    ///         evicted_tokens: 10 * i,
    ///         evicted_from: now,
    ///         evicted_until: now,
    ///         forced: false,
    ///         summary_updated: true,
    ///         text: format!("after flush {i}"),
    ///     });
    /// }
    /// assert_eq!(summary.history.len(), Summary::HISTORY_LIMIT);
    /// assert_eq!(summary.history[0].text, "after flush 4");
    /// assert_eq!(summary.history.last().unwrap().text, "after flush 19");
    /// ```
    pub fn record(&mut self, revision: SummaryRevision) {
        self.history.push(revision);
        let excess = self.history.len().saturating_sub(Self::HISTORY_LIMIT);
        self.history.drain(..excess);
    }
}

/// One flush as the summary remembers it: which stretch of the conversation it evicted and the
/// summary it left behind. The evicted messages themselves stay in recall storage: list the
/// range [`evicted_range`](Self::evicted_range) (under a clock that stamps several messages
/// with the same instant, it may also hold kept messages stamped like the newest evicted one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryRevision {
    /// When the flush happened.
    pub at: DateTime<Utc>,
    /// Messages evicted.
    pub evicted_messages: u64,
    /// Tokens those messages took in the prompt.
    pub evicted_tokens: u64,
    /// Creation time of the oldest evicted message.
    pub evicted_from: DateTime<Utc>,
    /// Just after the creation time of the newest evicted message (the next microsecond, the
    /// precision stores keep: the end of a [`TimeRange`] is exclusive).
    pub evicted_until: DateTime<Utc>,
    /// Whether a provider's context-overflow error forced it.
    pub forced: bool,
    /// Whether the summarizer rewrote the summary (false: it failed and the text was kept).
    pub summary_updated: bool,
    /// The summary text after the flush.
    pub text: String,
}

impl SummaryRevision {
    /// The stretch of time the evicted messages were created in, for a recall listing.
    pub fn evicted_range(&self) -> TimeRange {
        TimeRange {
            start: Some(self.evicted_from),
            end: Some(self.evicted_until),
        }
    }
}

/// Everything needed to bring an agent back: what the [`AgentStore`](super::AgentStore) keeps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    /// The agent's id.
    pub id: AgentId,
    /// A human-readable name.
    pub name: String,
    /// Bumped by every commit (optimistic concurrency).
    pub version: u64,
    /// Configuration.
    pub config: AgentConfig,
    /// The read-only system instructions.
    pub system: String,
    /// Working context.
    pub memory: WorkingContext,
    /// The recursive summary.
    pub summary: Summary,
    /// The FIFO queue: ids of the messages in context, oldest first. (Stores may keep it as
    /// rows of its own, changed by [`Commit::queue`]: a [`StateRecord`](super::StateRecord)
    /// is the state without it.)
    #[serde(default)]
    pub fifo: Vec<MessageId>,
    /// Queued messages that are never evicted.
    #[serde(default)]
    pub pinned: Vec<MessageId>,
    /// Whether the memory-pressure warning was given and no flush has happened since.
    pub pressure_warned: bool,
    /// Timer events are ignored until then (`pause_heartbeats`).
    pub heartbeats_paused_until: Option<DateTime<Utc>>,
    /// When working context last changed.
    pub memory_updated_at: DateTime<Utc>,
    /// When the agent was created.
    pub created_at: DateTime<Utc>,
    /// When the agent was last committed.
    pub updated_at: DateTime<Utc>,
    /// A function call waiting for a person's approval, if the last step paused for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_approval: Option<PendingApproval>,
    /// For a memory-consolidation companion ([`crate::consolidation`]): the end of the stretch
    /// of its primary's conversation it has consolidated (exclusive), advanced by the step
    /// that consolidated it, in the same commit. `None`: nothing yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidated_until: Option<DateTime<Utc>>,
}

/// A step paused on a call that needs approval
/// ([`ToolRule::RequiresApproval`](crate::rules::ToolRule::RequiresApproval)): what it needs to
/// go on exactly where it stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The call, as the model sent it (its assistant message is committed, its result is not).
    pub call: crate::message::ToolCall,
    /// The assistant message holding the call.
    pub message: MessageId,
    /// LLM calls the step had made (they count against the chain limit).
    pub llm_calls: usize,
    /// Where the step stood under its tool rules.
    pub rules: crate::rules::RulesProgress,
}

/// Fails with [`StoreError::NulCharacter`] (naming `what`) if `text` holds U+0000.
pub fn storable(text: &str, what: impl FnOnce() -> String) -> Result<(), StoreError> {
    if text.contains('\0') {
        return Err(StoreError::NulCharacter(what()));
    }
    Ok(())
}

/// Whether any string (or key) in `value` holds a NUL character.
pub(crate) fn json_holds_nul(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(items) => items.iter().any(json_holds_nul),
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.contains('\0') || json_holds_nul(v)),
        _ => false,
    }
}

fn json_storable(value: &serde_json::Value, what: &dyn Fn() -> String) -> Result<(), StoreError> {
    if json_holds_nul(value) {
        return Err(StoreError::NulCharacter(what()));
    }
    Ok(())
}

fn message_text(message: &Message) -> Result<(), StoreError> {
    let what = || format!("message {}", message.id);
    storable(&message.text, what)?;
    if let Some(name) = &message.name {
        storable(name, what)?;
    }
    if let Some(id) = &message.tool_call_id {
        storable(id, what)?;
    }
    for call in &message.tool_calls {
        storable(&call.id, what)?;
        storable(&call.name, what)?;
        storable(&call.arguments, what)?;
    }
    Ok(())
}

impl AgentState {
    /// Refuses a state holding U+0000 anywhere (see [`Commit::check_text`]).
    pub fn check_text(&self) -> Result<(), StoreError> {
        storable(&self.name, || "the agent's name".into())?;
        storable(&self.system, || "the system prompt".into())?;
        storable(&self.summary.text, || "the recursive summary".into())?;
        for revision in &self.summary.history {
            storable(&revision.text, || "the recursive summary's history".into())?;
        }
        for block in self.memory.blocks() {
            let what = || format!("memory block \"{}\"", block.label().replace('\0', "\\0"));
            storable(block.label(), what)?;
            storable(block.value(), what)?;
            if let Some(description) = block.description() {
                storable(description, what)?;
            }
        }
        Ok(())
    }
}

/// One atomic write: the outcome of one agent step.
#[derive(Clone, Debug, PartialEq)]
pub struct Commit {
    /// The agent's new state; `state.version` is the version being written.
    pub state: AgentState,
    /// Messages to append to recall storage.
    pub messages: Vec<Message>,
    /// Embeddings of some of these messages (conversation messages embedded during the step).
    pub message_embeddings: Vec<MessageEmbedding>,
    /// Passages to add to archival storage.
    pub passages: Vec<Passage>,
    /// Passages to delete from archival storage.
    pub deleted_passages: Vec<PassageId>,
    /// Stored passages to retire (they stay, as the record of what was once true).
    pub retired_passages: Vec<PassageRetirement>,
    /// The state's shared blocks differ from the last commit's (a block was attached or
    /// detached): the store records the agent's attachments anew from
    /// [`WorkingContext::shared_ids`]. Creating an agent always records them.
    pub attachments_changed: bool,
    /// How the commit changes the FIFO queue the agent's last commit left
    /// ([`QueueChange::between`](super::QueueChange::between) of the two `fifo`s), for stores
    /// that keep the queue as rows; `None`: rewrite the whole queue from `state.fifo`. Stores
    /// that keep `state` whole may ignore it.
    pub queue: Option<super::QueueChange>,
}

impl Commit {
    /// A commit of `state` with nothing else.
    pub fn state(state: AgentState) -> Self {
        Self {
            state,
            messages: Vec::new(),
            message_embeddings: Vec::new(),
            passages: Vec::new(),
            deleted_passages: Vec::new(),
            retired_passages: Vec::new(),
            attachments_changed: false,
            queue: None,
        }
    }

    /// The optimistic version check every store runs before writing: the commit applies only
    /// to the version it was built on (`state.version - 1`), and version 0 is never committed
    /// (it is the created agent). Fails with [`StoreError::Conflict`] otherwise.
    pub fn check_version(&self, stored: u64) -> Result<(), StoreError> {
        let expected = self.state.version.saturating_sub(1);
        if stored != expected || self.state.version == 0 {
            return Err(StoreError::Conflict {
                agent: self.state.id,
                expected,
                found: stored,
            });
        }
        Ok(())
    }

    /// Refuses text no store can hold: a NUL character (U+0000) anywhere in the state,
    /// messages or passages ([`StoreError::NulCharacter`], naming the field). Every store calls
    /// this before writing, so all of them accept and refuse the same commits.
    pub fn check_text(&self) -> Result<(), StoreError> {
        self.state.check_text()?;
        for message in &self.messages {
            message_text(message)?;
        }
        for passage in &self.passages {
            storable(&passage.text, || format!("passage {}", passage.id))?;
            json_storable(
                &serde_json::Value::Object(passage.metadata.clone()),
                &|| format!("the metadata of passage {}", passage.id),
            )?;
            if let Some(reason) = &passage.retired_reason {
                storable(reason, || {
                    format!("the retirement reason of passage {}", passage.id)
                })?;
            }
        }
        for retired in &self.retired_passages {
            storable(&retired.reason, || {
                format!("the retirement reason of passage {}", retired.id)
            })?;
        }
        Ok(())
    }

    /// Every embedding the commit writes: its passages', then its messages'.
    pub fn embeddings(&self) -> impl Iterator<Item = &Embedding> {
        self.passages
            .iter()
            .filter_map(|p| p.embedding.as_ref())
            .chain(self.message_embeddings.iter().map(|e| &e.embedding))
    }
}

/// The embedding of one archival passage, stored after the passage itself (re-embedding with
/// another model: [`AgentStore::store_passage_embeddings`](super::AgentStore::store_passage_embeddings)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassageEmbedding {
    /// The passage.
    pub passage: PassageId,
    /// Its embedding.
    pub embedding: Embedding,
}

/// The most windows of one message recall storage keeps embeddings of (windows 0 to 31); later
/// windows of a longer message are not embedded (its words are all still indexed).
pub const MAX_MESSAGE_WINDOWS: u32 = 32;

/// The embedding of one window of a conversation message, which recall search compares with
/// the query's.
///
/// Only conversation messages (user and assistant) are embedded; what is embedded is
/// [`document_text`](crate::retrieval::document_text). A message longer than the embedder's
/// window has one embedding per window ([`Embedder::embed_windows`](crate::embed::Embedder::embed_windows)),
/// numbered from 0, all stored together; search scores the message by its best window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageEmbedding {
    /// The message.
    pub message: MessageId,
    /// Which window of the message (0 for the first, and for a message of one window); below
    /// [`MAX_MESSAGE_WINDOWS`] (stores ignore others).
    #[serde(default)]
    pub window: u32,
    /// Its embedding.
    pub embedding: Embedding,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_know_their_extent() {
        let p = SearchPage::<()> {
            hits: vec![],
            page: Page::new(1, 5),
            total: 12,
        };
        assert_eq!(p.page_count(), 3);
        assert!(p.has_more());
        let last = SearchPage::<()> {
            hits: vec![],
            page: Page::new(2, 5),
            total: 12,
        };
        assert!(!last.has_more());
        assert_eq!(Page::new(2, 5).slice((0..12).collect()), vec![10, 11]);
        assert_eq!(Page::new(0, 0).size, 1);
    }

    #[test]
    fn time_ranges_are_half_open() {
        use chrono::TimeZone;
        let a = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
        let b = Utc.with_ymd_and_hms(2024, 1, 2, 0, 0, 0).unwrap();
        let r = TimeRange {
            start: Some(a),
            end: Some(b),
        };
        assert!(r.contains(a));
        assert!(!r.contains(b));
        assert!(TimeRange::default().contains(b));
    }
}
