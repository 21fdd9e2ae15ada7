//! [`AgentBuilder`]: building a new agent, or loading a stored one, with its services.

use std::sync::Arc;

use super::services::{load_queue, main_context};
use super::{Agent, AgentConfig, Services, StepObserver, prompt};
use crate::config::LoopStyle;
use crate::context::MemoryCounts;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::function::{Extensions, FunctionRegistry, FunctionSettings};
use crate::ids::AgentId;
use crate::llm::LlmProvider;
use crate::memory::{MemoryBlock, WorkingContext};
use crate::messaging::AgentMessenger;
use crate::queue::{EvictionPolicy, QueueManager, policy_by_name};
use crate::store::{AgentState, SearchMode, Storage, StoreError, refresh_shared_blocks};
use crate::summarizer::{LlmSummarizer, Summarizer};
use crate::time::{Clock, SystemClock};
use crate::tokens::{TiktokenCounter, TokenCounter};

/// One configuration setting made on the builder, applied to a new agent's default
/// configuration by [`AgentBuilder::build`] or to a stored one by [`AgentBuilder::load`].
type ConfigEdit = Box<dyn FnOnce(&mut AgentConfig) + Send>;

/// Builds a new [`Agent`] or loads a stored one.
///
/// Only the provider is required; everything else has a MemGPT default: in-memory storage, the
/// paper's eviction policy, an LLM summarizer on the same provider, tiktoken counting, the
/// eight built-in functions, `persona` and `human` blocks of 2,000 characters.
///
/// Configuration setters ([`model`](Self::model), [`context_window`](Self::context_window),
/// [`functions`](Self::functions), [`page_size`](Self::page_size)...) apply in order, to the defaults
/// when building and to the stored configuration when loading. Memory settings
/// ([`persona`](Self::persona), [`block`](Self::block)...) and the system prompt only shape new
/// agents: a loaded agent keeps what it stored.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn demo(provider: std::sync::Arc<dyn memgpt_core::llm::LlmProvider>) -> memgpt_core::Result<()> {
/// use memgpt_core::Agent;
///
/// let mut agent = Agent::builder()
///     .provider(provider)
///     .persona("I am Ada, a patient maths tutor.")
///     .human("Name: Sam. Learning calculus.")
///     .build()
///     .await?;
/// let step = agent.step("Can we revisit limits?").await?;
/// println!("{}", step.reply());
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct AgentBuilder {
    name: Option<String>,
    edits: Vec<ConfigEdit>,
    provider: Option<Arc<dyn LlmProvider>>,
    summarizer: Option<Arc<dyn Summarizer>>,
    embedder: Option<Arc<dyn Embedder>>,
    counter: Option<Arc<dyn TokenCounter>>,
    policy: Option<Arc<dyn EvictionPolicy>>,
    storage: Option<Storage>,
    registry: Option<FunctionRegistry>,
    clock: Option<Arc<dyn Clock>>,
    extensions: Extensions,
    system: Option<String>,
    blocks: Vec<MemoryBlock>,
    skills: Vec<crate::memory::Skill>,
    persona: Option<String>,
    human: Option<String>,
    block_limit: Option<usize>,
    id: Option<AgentId>,
    observer: Option<Arc<dyn StepObserver>>,
    messenger: Option<Arc<dyn AgentMessenger>>,
    without_model: bool,
    /// A consolidation companion: no `persona`/`human` blocks of its own (it holds its
    /// primary's shared blocks).
    companion: bool,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("name", &self.name)
            .field("config_edits", &self.edits.len())
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// A builder with every default.
    pub fn new() -> Self {
        Self::default()
    }

    fn edit(mut self, edit: impl FnOnce(&mut AgentConfig) + Send + 'static) -> Self {
        self.edits.push(Box::new(edit));
        self
    }

    /// Watches every step as it runs (messages as they join the queue, flushes); see
    /// [`StepObserver`].
    pub fn observer(mut self, observer: impl StepObserver + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// The agent's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The new agent's id: the one given, or a fresh one from now on.
    pub(super) fn id_or_new(&mut self) -> AgentId {
        *self.id.get_or_insert_with(AgentId::new)
    }

    /// The agent's name, unless one was given.
    pub(super) fn name_if_unset(mut self, name: String) -> Self {
        self.name.get_or_insert(name);
        self
    }

    /// A fixed id for a new agent (default: a fresh one).
    pub fn id(mut self, id: AgentId) -> Self {
        self.id = Some(id);
        self
    }

    /// The chat provider (required).
    pub fn provider(mut self, provider: Arc<dyn LlmProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Opens the agent without a chat model, for what needs none: reading its context and
    /// memory ([`Agent::prompt`], [`Agent::stats`]), exporting it, adding archival passages,
    /// running its functions with [`Agent::call`]. [`Agent::step`] fails with
    /// [`Error::Config`](crate::Error::Config), before anything is stored. A
    /// [`provider`](Self::provider) given as well is ignored.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
    /// use memgpt_core::Agent;
    ///
    /// let mut agent = Agent::builder().without_model().build().await?;
    /// assert!(agent.prompt().len() > 0);
    /// assert!(matches!(agent.step("hi").await, Err(memgpt_core::Error::Config(_))));
    /// # Ok(()) }
    /// ```
    pub fn without_model(mut self) -> Self {
        self.without_model = true;
        self
    }

    /// The chat model, if not the provider's default.
    pub fn model(self, model: impl Into<String>) -> Self {
        let model = model.into();
        self.edit(move |c| c.model = model)
    }

    /// The model's context window in tokens (default: the provider's or the model's known
    /// window, else 8,192). Part of it is kept for the completion
    /// ([`AgentConfig::completion_reserve`]).
    pub fn context_window(self, tokens: usize) -> Self {
        self.edit(move |c| c.context_window = tokens)
    }

    /// Replaces the whole configuration (later setters adjust it).
    pub fn config(self, config: AgentConfig) -> Self {
        self.edit(move |c| *c = config)
    }

    /// The most LLM calls one event may trigger through heartbeats (default 10).
    pub fn max_chain_length(self, calls: usize) -> Self {
        self.edit(move |c| c.max_chain_length = calls.max(1))
    }

    /// Results per page of the search functions (default 5).
    pub fn page_size(self, size: usize) -> Self {
        self.edit(move |c| c.page_size = size.max(1))
    }

    /// Selects a registered eviction policy by name (built in: `paper`, `lru`, `attention`;
    /// yours with [`register_policy!`](crate::register_policy); see [`policy_by_name`]). [`AgentBuilder::policy`] takes any policy object instead.
    pub fn policy_named(self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.edit(move |c| c.policy = name)
    }

    /// How `conversation_search` ranks (see [`RecallRanking`](crate::retrieval::RecallRanking)).
    pub fn recall_ranking(self, ranking: crate::retrieval::RecallRanking) -> Self {
        self.edit(move |c| c.recall_ranking = ranking)
    }

    /// Commit steps without waiting for the embedder (see
    /// [`AgentConfig::defer_message_embeddings`]).
    pub fn defer_message_embeddings(self, defer: bool) -> Self {
        self.edit(move |c| c.defer_message_embeddings = defer)
    }

    /// How `archival_memory_search` ranks passages (default [`SearchMode::Hybrid`]; it falls
    /// back to text when the agent has no embedder). [`SearchMode::Text`] suits exact
    /// identifiers such as UUIDs, which embeddings do not tell apart.
    pub fn archival_search(self, mode: SearchMode) -> Self {
        self.edit(move |c| c.archival_search = mode)
    }

    /// The functions offered, replacing the current list.
    pub fn functions<S: Into<String>>(self, names: impl IntoIterator<Item = S>) -> Self {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        self.edit(move |c| c.functions = names)
    }

    /// Adds a tool rule ([`crate::rules::ToolRule`]): which functions the model may call when.
    /// Rules must name the agent's functions (checked when the agent is built or loaded).
    pub fn tool_rule(self, rule: crate::rules::ToolRule) -> Self {
        self.edit(move |c| c.tool_rules.push(rule))
    }

    /// How a step goes on after a function call (default [`LoopStyle::Heartbeat`], the
    /// paper's). An agent on the default system instructions gets those of the style.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
    /// use std::sync::Arc;
    /// use memgpt_core::{Agent, LoopStyle, testing::ScriptedProvider};
    ///
    /// let agent = Agent::builder()
    ///     .provider(Arc::new(ScriptedProvider::new()))
    ///     .loop_style(LoopStyle::UntilReply)
    ///     .build()
    ///     .await?;
    /// let request = agent.request();
    /// assert!(request.tools.iter().all(|t| t.parameters["properties"].get("request_heartbeat").is_none()));
    /// # Ok(()) }
    /// ```
    pub fn loop_style(self, style: LoopStyle) -> Self {
        self.edit(move |c| c.loop_style = style)
    }

    /// The tool rules, replacing the current ones.
    pub fn tool_rules(self, rules: Vec<crate::rules::ToolRule>) -> Self {
        self.edit(move |c| c.tool_rules = rules)
    }

    /// Adds one function to those offered.
    pub fn function(self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.edit(move |c| c.functions.push(name))
    }

    /// Where state, recall and archival storage live (default: in memory).
    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = Some(storage);
        self
    }

    /// The embedder (default: none). It embeds archival passages and conversation messages, so
    /// `archival_memory_search` and `conversation_search` rank by meaning as well as by words;
    /// without one both are lexical. It must produce vectors of the store's model and dimension
    /// (checked when the agent is built or loaded).
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Where `send_message_to_agent` delivers the agent's messages to other agents (see
    /// [`crate::messaging`]); without one, the function tells the model it cannot.
    pub fn messenger(mut self, messenger: Arc<dyn AgentMessenger>) -> Self {
        self.messenger = Some(messenger);
        self
    }

    /// The summarizer (default: an [`LlmSummarizer`] on the chat provider, its input sized to
    /// the context window).
    pub fn summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = Some(summarizer);
        self
    }

    /// The page-replacement policy object (default: the one named in the config, see
    /// [`AgentBuilder::policy_named`]; [`PaperPolicy`](crate::queue::PaperPolicy) unless changed).
    pub fn policy(mut self, policy: Arc<dyn EvictionPolicy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// The token counter (default: tiktoken for the model).
    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = Some(counter);
        self
    }

    /// The clock (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Where functions are looked up (default: [`FunctionRegistry::linked`]).
    pub fn registry(mut self, registry: FunctionRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Adds a value functions can read with [`FunctionContext::extension`](crate::function::FunctionContext::extension).
    pub fn extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Replaces the system instructions of a new agent.
    pub fn system_prompt(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// The `persona` block's text for a new agent.
    pub fn persona(mut self, text: impl Into<String>) -> Self {
        self.persona = Some(text.into());
        self
    }

    /// The `human` block's text for a new agent.
    pub fn human(mut self, text: impl Into<String>) -> Self {
        self.human = Some(text.into());
        self
    }

    /// The character limit of a new agent's `persona` and `human` blocks (default 2,000).
    pub fn block_limit(mut self, chars: usize) -> Self {
        self.block_limit = Some(chars);
        self
    }

    /// Makes the new agent the consolidation companion `group` describes, holding `shared`
    /// (its primary's shared blocks) instead of blocks of its own, on `storage` unless the
    /// builder has one; the companion's defaults (instructions, functions) come before the
    /// builder's own settings, which win.
    pub(super) fn companion(
        mut self,
        shared: Vec<MemoryBlock>,
        group: crate::config::AgentGroup,
        storage: &Storage,
    ) -> Self {
        self.companion = true;
        self.blocks.splice(0..0, shared);
        self.storage.get_or_insert_with(|| storage.clone());
        self.system
            .get_or_insert_with(|| crate::consolidation::DEFAULT_COMPANION_PROMPT.to_owned());
        let defaults: ConfigEdit = Box::new(move |c: &mut AgentConfig| {
            c.functions = crate::config::COMPANION_FUNCTIONS
                .iter()
                .map(|f| (*f).to_owned())
                .collect();
        });
        self.edits.insert(0, defaults);
        self.edit(move |c| c.group = Some(group))
    }

    /// Adds a working-context block to a new agent (after `persona` and `human`).
    pub fn block(mut self, block: MemoryBlock) -> Self {
        self.blocks.push(block);
        self
    }

    /// Gives a new agent a skill (procedural memory: listed in its context, loaded with the
    /// `skill` function, which the agent is then offered).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
    /// use memgpt_core::memory::Skill;
    /// use memgpt_core::testing::ScriptedProvider;
    /// use std::sync::Arc;
    ///
    /// let pdf = Skill::from_files(
    ///     "pdf",
    ///     [("SKILL.md".into(), "---\nname: pdf\ndescription: Fill PDF forms.\n---\nUse pdftk.".into())].into(),
    ///     None,
    /// );
    /// let agent = memgpt_core::Agent::builder()
    ///     .provider(Arc::new(ScriptedProvider::new()))
    ///     .skill(pdf)
    ///     .build()
    ///     .await?;
    /// assert!(agent.config().functions.iter().any(|f| f == "skill"));
    /// assert!(agent.context().system_message().content.contains("- pdf: Fill PDF forms."));
    /// # Ok(()) }
    /// ```
    pub fn skill(mut self, skill: crate::memory::Skill) -> Self {
        self.skills.push(skill);
        self
    }

    /// Attaches shared block `block` (stored in the agent's
    /// [`BlockStore`](crate::store::BlockStore)) to a new agent, after its other blocks: the
    /// agent is created holding it, and sees other writers' edits on every step.
    pub fn shared_block(mut self, block: &crate::store::SharedBlock) -> Self {
        self.blocks.push(block.attached());
        self
    }

    /// Creates the agent and stores it.
    pub async fn build(mut self) -> Result<Agent> {
        let now = self.resolved_clock().now();
        let limit = self
            .block_limit
            .unwrap_or(crate::memory::DEFAULT_BLOCK_LIMIT);
        let persona = self
            .persona
            .take()
            .unwrap_or_else(|| prompt::DEFAULT_PERSONA.to_owned());
        let human = self
            .human
            .take()
            .unwrap_or_else(|| prompt::DEFAULT_HUMAN.to_owned());
        let mut blocks = if self.companion {
            Vec::new()
        } else {
            vec![
                MemoryBlock::new("persona", persona).with_limit(limit),
                MemoryBlock::new("human", human).with_limit(limit),
            ]
        };
        blocks.append(&mut self.blocks);
        for block in &blocks {
            if block.chars() > block.limit() {
                return Err(Error::Config(format!(
                    "block `{}` starts with {} characters, over its limit of {}",
                    block.label(),
                    block.chars(),
                    block.limit()
                )));
            }
        }
        let mut memory = WorkingContext::from_blocks(blocks)?;
        for skill in std::mem::take(&mut self.skills) {
            memory.add_skill(skill)?;
        }
        let mut config = AgentConfig {
            context_window: 0,
            ..AgentConfig::default()
        };
        for edit in self.edits.drain(..) {
            edit(&mut config);
        }
        if !memory.skills().is_empty() && !config.functions.iter().any(|f| f == "skill") {
            config.functions.push("skill".to_owned());
        }
        if config.context_window == 0 {
            config.context_window = self.default_window();
        }
        // The agent records the model it runs on, so that what it says and exports is true.
        if config.model.is_empty()
            && let Some(provider) = &self.provider
        {
            config.model = provider.model().to_owned();
        }
        let system = self
            .system
            .take()
            .unwrap_or_else(|| prompt::default_system_prompt(config.loop_style).to_owned());
        let state = AgentState {
            id: self.id.unwrap_or_default(),
            name: self.name.clone().unwrap_or_else(|| "agent".to_owned()),
            version: 0,
            config,
            system,
            memory,
            summary: Default::default(),
            fifo: Vec::new(),
            pinned: Vec::new(),
            pressure_warned: false,
            heartbeats_paused_until: None,
            memory_updated_at: now,
            created_at: now,
            updated_at: now,
            pending_approval: None,
            consolidated_until: None,
        };
        let (services, state) = self.services(state)?;
        check_fixed_prompt(&services, &state)?;
        check_embedding_space(&services).await?;
        services.storage.agents.create_agent(&state).await?;
        Agent::assemble(services, state, Vec::new(), MemoryCounts::default())
    }

    /// Loads the stored agent `id` (its memory, queue, summary and configuration), applies this
    /// builder's configuration setters, and attaches its provider, storage, policy and other
    /// services.
    pub async fn load(mut self, id: AgentId) -> Result<Agent> {
        let storage = self.storage.get_or_insert_with(Storage::in_memory).clone();
        let mut state = storage
            .agents
            .load_agent(id)
            .await?
            .ok_or(StoreError::AgentNotFound(id))?;
        for edit in self.edits.drain(..) {
            edit(&mut state.config);
        }
        let (services, mut state) = self.services(state)?;
        check_fixed_prompt(&services, &state)?;
        check_embedding_space(&services).await?;
        let (queued, counts) = load_queue(&services, &state).await?;
        let now = services.clock.now();
        if !refresh_shared_blocks(&mut state.memory, services.storage.blocks.as_ref())
            .await?
            .is_empty()
        {
            state.memory_updated_at = now;
        }
        Agent::assemble(services, state, queued, counts)
    }

    /// Changes a stored agent: loads agent `id` with this builder's configuration changes
    /// (and [`AgentBuilder::name`]) applied, checks them as [`AgentBuilder::build`] would
    /// (unknown functions or policy, a window too small), and commits them. Memory and history
    /// are untouched; a rejected change stores nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
    /// use std::sync::Arc;
    /// use memgpt_core::{Agent, store::Storage, testing::ScriptedProvider};
    ///
    /// let (llm, storage) = (Arc::new(ScriptedProvider::new()), Storage::in_memory());
    /// let agent = Agent::builder().provider(llm.clone()).storage(storage.clone()).build().await?;
    /// let changed = Agent::builder()
    ///     .provider(llm.clone())
    ///     .storage(storage.clone())
    ///     .name("renamed")
    ///     .policy_named("lru")
    ///     .reconfigure(agent.id())
    ///     .await?;
    /// assert_eq!((changed.name(), changed.config().policy.as_str()), ("renamed", "lru"));
    /// let stored = storage.agents.load_agent(agent.id()).await?.unwrap();
    /// assert_eq!(stored.config.policy, "lru");
    /// assert!(Agent::builder().provider(llm).storage(storage).function("nope").reconfigure(agent.id()).await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn reconfigure(mut self, id: AgentId) -> Result<Agent> {
        let name = self.name.take();
        let mut agent = self.load(id).await?;
        if let Some(name) = name {
            agent.state.name = name;
        }
        let now = agent.rt.clock.now();
        agent
            .commit(now, Vec::new(), Vec::new(), Vec::new())
            .await?;
        Ok(agent)
    }

    fn resolved_clock(&self) -> Arc<dyn Clock> {
        self.clock.clone().unwrap_or_else(|| Arc::new(SystemClock))
    }

    /// The window of the provider's model (providers know their models' windows), or 8,192.
    fn default_window(&self) -> usize {
        self.provider
            .as_ref()
            .and_then(|p| p.context_window())
            .unwrap_or(8_192)
    }

    fn services(mut self, mut state: AgentState) -> Result<(Services, AgentState)> {
        let provider = match self.provider.take() {
            _ if self.without_model => Arc::new(NoModel::for_model(&state.config.model)),
            Some(provider) => provider,
            None => {
                return Err(Error::Config(
                    "no LLM provider: call AgentBuilder::provider (or without_model)".to_owned(),
                ));
            }
        };
        if state.config.context_window < 512 {
            return Err(Error::Config(format!(
                "a context window of {} tokens is too small",
                state.config.context_window
            )));
        }
        let model = if state.config.model.is_empty() {
            provider.model().to_owned()
        } else {
            state.config.model.clone()
        };
        let counter = self
            .counter
            .take()
            .unwrap_or_else(|| Arc::new(TiktokenCounter::for_model(&model)));
        let summarizer = self.summarizer.take().unwrap_or_else(|| {
            Arc::new(
                LlmSummarizer::new(provider.clone(), counter.clone())
                    .with_model(state.config.model.clone())
                    .with_max_input_tokens(summarizer_input_budget(state.config.context_window)),
            )
        });
        let policy = match self.policy.take() {
            Some(policy) => policy,
            None => policy_by_name(&state.config.policy)?,
        };
        state.config.policy = policy.name().to_owned();
        // An agent on the default instructions of one loop style that changes style gets the
        // other style's defaults (custom instructions are left alone).
        let style = state.config.loop_style;
        // An agent stored without instructions (imported from a file that had none) gets them.
        if state.system.trim().is_empty() {
            state.system = prompt::default_system_prompt(style).to_owned();
        }
        for other in [LoopStyle::Heartbeat, LoopStyle::UntilReply] {
            if other != style && state.system == prompt::default_system_prompt(other) {
                state.system = prompt::default_system_prompt(style).to_owned();
            }
        }
        let registry = match self.registry.take() {
            Some(registry) => registry,
            None => FunctionRegistry::linked()?,
        };
        let functions = registry.function_set(&state.config.functions)?;
        let names: Vec<&str> = functions.names().collect();
        crate::rules::check_rules(&state.config.tool_rules, names).map_err(Error::Config)?;
        let settings = FunctionSettings::from(&state.config);
        let services = Services {
            clock: self.resolved_clock(),
            provider,
            summarizer,
            embedder: self.embedder.take(),
            counter,
            manager: QueueManager::new(policy),
            storage: self.storage.take().unwrap_or_else(Storage::in_memory),
            functions,
            extensions: std::mem::take(&mut self.extensions),
            settings,
            observer: self.observer.take(),
            messenger: self.messenger.take(),
            without_model: self.without_model,
        };
        Ok((services, state))
    }
}

/// What the default summarizer may read per call: the window minus its answer (at most 300
/// words, about 664 tokens) and a margin, at most 4,000 tokens.
fn summarizer_input_budget(context_window: usize) -> usize {
    context_window.saturating_sub(664 + 256).clamp(256, 4_000)
}

/// Fails if the system instructions, function schemas and memory blocks (grown to their
/// character limits) leave no room for messages in the prompt budget.
fn check_fixed_prompt(services: &Services, state: &AgentState) -> Result<()> {
    let fixed = main_context(services, state, MemoryCounts::default()).stats();
    // About four characters a token; skills count as listed and loaded.
    let memory_at_limit = state.memory.chars_at_limits().div_ceil(4);
    let worst = fixed.total_tokens - fixed.memory_tokens.min(fixed.total_tokens)
        + fixed.memory_tokens.max(memory_at_limit);
    if worst >= fixed.window {
        return Err(Error::Config(format!(
            "the system instructions ({} tokens), {} function schemas ({} tokens) and memory (up to about \
             {memory_at_limit} tokens with blocks at their character limits) take about {worst} tokens, which leaves no room in \
             a prompt budget of {} tokens (a context window of {} minus {} kept for the completion); raise the \
             window, offer fewer functions, lower the block limits or shorten the prompt",
            fixed.system_tokens,
            services.functions.len(),
            fixed.tools_tokens,
            fixed.window,
            state.config.context_window,
            state.config.completion_reserve(),
        )));
    }
    Ok(())
}

/// Fails with [`StoreError::EmbeddingMismatch`](crate::store::StoreError::EmbeddingMismatch) when
/// the agent's embedder produces vectors of another model or dimension than the store holds.
async fn check_embedding_space(services: &Services) -> Result<()> {
    let Some(embedder) = &services.embedder else {
        return Ok(());
    };
    if let Some(space) = services.storage.agents.embedding_space().await? {
        space.check_model(embedder.model(), embedder.dimension())?;
    }
    Ok(())
}

/// The provider of an agent opened [`without_model`](AgentBuilder::without_model): it names
/// the agent's model (for its tokenizer) and answers nothing; steps are refused before they
/// reach it.
#[derive(Debug)]
struct NoModel {
    model: String,
}

impl NoModel {
    fn for_model(model: &str) -> Self {
        Self {
            model: model.to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl LlmProvider for NoModel {
    fn model(&self) -> &str {
        &self.model
    }

    async fn complete(
        &self,
        _: &crate::llm::ChatRequest,
    ) -> std::result::Result<crate::llm::ChatResponse, crate::llm::LlmError> {
        Err(crate::llm::LlmError::Permanent {
            status: None,
            message: "this agent was opened without a model".into(),
        })
    }
}
