use std::sync::Arc;

use super::{Agent, AgentConfig, Runtime, prompt};
use crate::context::{MainContext, MemoryCounts};
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::function::{Extensions, FunctionRegistry, ToolSettings};
use crate::ids::AgentId;
use crate::llm::{LlmProvider, known_context_window};
use crate::memory::{MemoryBlock, WorkingContext};
use crate::queue::{EvictionPolicy, PaperPolicy, QueueManager};
use crate::store::{AgentState, Storage};
use crate::summarizer::{LlmSummarizer, Summarizer};
use crate::time::{Clock, SystemClock};
use crate::tokens::{TiktokenCounter, TokenCounter};

/// Builds a new [`Agent`] or loads a stored one.
///
/// Only the provider is required; everything else has a MemGPT default: in-memory storage, the
/// paper's eviction policy, an LLM summarizer on the same provider, tiktoken counting, the
/// eight built-in functions, `persona` and `human` blocks of 2,000 characters.
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
    config: AgentConfig,
    context_window: Option<usize>,
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
    persona: Option<String>,
    human: Option<String>,
    block_limit: Option<usize>,
    id: Option<AgentId>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// A builder with every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// The agent's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
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

    /// The chat model, if not the provider's default.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.config.model = model.into();
        self
    }

    /// The context window in tokens (default: the model's known window, else 8,192).
    pub fn context_window(mut self, tokens: usize) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// The whole configuration at once (the builder's other setters then adjust it).
    pub fn config(mut self, config: AgentConfig) -> Self {
        self.context_window = Some(config.context_window);
        self.config = config;
        self
    }

    /// The most LLM calls one event may trigger through heartbeats (default 10).
    pub fn max_chain_length(mut self, calls: usize) -> Self {
        self.config.max_chain_length = calls.max(1);
        self
    }

    /// Results per page of the search functions (default 5).
    pub fn page_size(mut self, size: usize) -> Self {
        self.config.page_size = size.max(1);
        self
    }

    /// Where state, recall and archival storage live (default: in memory).
    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = Some(storage);
        self
    }

    /// The embedder for archival storage (default: none; archival search is then lexical).
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// The summarizer (default: an [`LlmSummarizer`] on the chat provider).
    pub fn summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = Some(summarizer);
        self
    }

    /// The page-replacement policy (default: [`PaperPolicy`]).
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

    /// The functions offered, replacing the defaults.
    pub fn tools<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.config.tools = names.into_iter().map(Into::into).collect();
        self
    }

    /// Adds one function to those offered.
    pub fn tool(mut self, name: impl Into<String>) -> Self {
        self.config.tools.push(name.into());
        self
    }

    /// Adds a value functions can read with [`ToolContext::extension`](crate::function::ToolContext::extension).
    pub fn extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Replaces the system instructions.
    pub fn system_prompt(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// The `persona` block's text.
    pub fn persona(mut self, text: impl Into<String>) -> Self {
        self.persona = Some(text.into());
        self
    }

    /// The `human` block's text.
    pub fn human(mut self, text: impl Into<String>) -> Self {
        self.human = Some(text.into());
        self
    }

    /// The character limit of the default `persona` and `human` blocks (default 2,000).
    pub fn block_limit(mut self, chars: usize) -> Self {
        self.block_limit = Some(chars);
        self
    }

    /// Adds a working-context block (after `persona` and `human`).
    pub fn block(mut self, block: MemoryBlock) -> Self {
        self.blocks.push(block);
        self
    }

    /// Creates the agent and stores it.
    pub async fn build(mut self) -> Result<Agent> {
        let now = self.resolved_clock().now();
        let limit = self
            .block_limit
            .unwrap_or(crate::memory::DEFAULT_BLOCK_LIMIT);
        let mut blocks = vec![
            MemoryBlock::new(
                "persona",
                self.persona
                    .take()
                    .unwrap_or_else(|| prompt::DEFAULT_PERSONA.to_owned()),
            )
            .with_limit(limit),
            MemoryBlock::new(
                "human",
                self.human
                    .take()
                    .unwrap_or_else(|| prompt::DEFAULT_HUMAN.to_owned()),
            )
            .with_limit(limit),
        ];
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
        let memory = WorkingContext::from_blocks(blocks)?;
        let runtime_model = self.config.model.clone();
        self.config.context_window = self.resolve_window(&runtime_model)?;
        let state = AgentState {
            id: self.id.unwrap_or_default(),
            name: self.name.clone().unwrap_or_else(|| "agent".to_owned()),
            version: 0,
            config: self.config.clone(),
            system: self
                .system
                .take()
                .unwrap_or_else(|| prompt::DEFAULT_SYSTEM_PROMPT.to_owned()),
            memory,
            summary: Default::default(),
            fifo: Vec::new(),
            pinned: Vec::new(),
            pressure_warned: false,
            heartbeats_paused_until: None,
            memory_updated_at: now,
            created_at: now,
            updated_at: now,
        };
        let (runtime, state) = self.runtime(state)?;
        runtime.storage.agents.create_agent(&state).await?;
        Agent::assemble(runtime, state, Vec::new(), MemoryCounts::default())
    }

    /// Loads the stored agent `id` (its memory, queue, summary and configuration) and attaches
    /// this builder's provider, storage, policy and other runtime parts to it.
    pub async fn load(mut self, id: AgentId) -> Result<Agent> {
        let storage = self.storage.get_or_insert_with(Storage::in_memory).clone();
        let mut state = storage
            .agents
            .load_agent(id)
            .await?
            .ok_or(Error::AgentNotFound(id))?;
        if let Some(window) = self.context_window {
            state.config.context_window = window;
        }
        if !self.config.model.is_empty() {
            state.config.model = self.config.model.clone();
        }
        self.config = state.config.clone();
        let (runtime, state) = self.runtime(state)?;
        let queued = runtime.storage.recall.get_messages(id, &state.fifo).await?;
        if queued.len() != state.fifo.len() {
            return Err(Error::Config(format!(
                "agent {id}: {} queued messages are missing from recall storage",
                state.fifo.len() - queued.len()
            )));
        }
        let counts = MemoryCounts {
            recall: runtime.storage.recall.count_messages(id).await?,
            archival: runtime.storage.archival.count_passages(id).await?,
        };
        Agent::assemble(runtime, state, queued, counts)
    }

    fn resolved_clock(&self) -> Arc<dyn Clock> {
        self.clock.clone().unwrap_or_else(|| Arc::new(SystemClock))
    }

    fn resolve_window(&self, model: &str) -> Result<usize> {
        let provider_model = self
            .provider
            .as_ref()
            .map(|p| p.model().to_owned())
            .unwrap_or_default();
        let model = if model.is_empty() {
            provider_model.as_str()
        } else {
            model
        };
        let window = self
            .context_window
            .or_else(|| self.provider.as_ref().and_then(|p| p.context_window()))
            .or_else(|| known_context_window(model))
            .unwrap_or(8_192);
        if window < 512 {
            return Err(Error::Config(format!(
                "a context window of {window} tokens is too small"
            )));
        }
        Ok(window)
    }

    fn runtime(mut self, mut state: AgentState) -> Result<(Runtime, AgentState)> {
        let provider = self.provider.take().ok_or_else(|| {
            Error::Config("no LLM provider: call AgentBuilder::provider".to_owned())
        })?;
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
                    .with_model(state.config.model.clone()),
            )
        });
        let policy = self
            .policy
            .take()
            .unwrap_or_else(|| Arc::new(PaperPolicy::default()));
        state.config.policy = policy.name().to_owned();
        let registry = match self.registry.take() {
            Some(registry) => registry,
            None => FunctionRegistry::linked()?,
        };
        let toolset = registry.toolset(&state.config.tools)?;
        let settings = ToolSettings {
            page_size: state.config.page_size,
            archival_search: state.config.archival_search,
            passage_tokens: state.config.passage_tokens,
        };
        let runtime = Runtime {
            clock: self.resolved_clock(),
            provider,
            summarizer,
            embedder: self.embedder.take(),
            counter,
            manager: QueueManager::new(policy),
            storage: self.storage.take().unwrap_or_else(Storage::in_memory),
            toolset,
            extensions: std::mem::take(&mut self.extensions),
            settings,
        };
        Ok((runtime, state))
    }
}

/// Builds the main context of `state` with `queued` messages.
pub(super) fn main_context(
    runtime: &Runtime,
    state: &AgentState,
    counts: MemoryCounts,
) -> MainContext {
    let mut context = MainContext::new(
        state.system.clone(),
        state.memory.clone(),
        runtime.toolset.schemas().clone(),
        state.config.context_window,
        runtime.counter.clone(),
        state.memory_updated_at,
    );
    context.set_summary(state.summary.clone());
    context.set_counts(counts);
    context
}
