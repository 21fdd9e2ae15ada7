//! # memgpt
//!
//! [MemGPT](https://arxiv.org/abs/2310.08560) in Rust: LLM agents with a *virtual context*.
//! The context window is RAM, databases are disk, and the LLM pages data in and out itself
//! through function calls, chaining them with heartbeats.
//!
//! * **Main context** ([`context`]): read-only system instructions, working context
//!   ([`memory`]: labelled blocks with character limits) and the FIFO queue of recent
//!   messages, headed by a recursive summary of everything evicted.
//! * **External context** ([`store`]): recall storage (every message ever exchanged, searchable
//!   by meaning, words, speaker and date) and archival storage (passages with embeddings, tags
//!   and dates); [`retrieval`] ranks both the same way in every store.
//! * **Queue manager** ([`queue`]): a memory-pressure warning at 70% of the window, a flush with
//!   a new recursive summary at 100%, behind a swappable [`EvictionPolicy`].
//! * **Functions** ([`function`], [`builtin`]): `#[memgpt_fn]` turns an `async fn` into a
//!   function the LLM can call, with a JSON schema, validated arguments and the
//!   `request_heartbeat` flag.
//! * **The agent loop** ([`agent`]): events in, function calls run, heartbeats followed, one
//!   atomic commit per step, a [`StepRecord`] out.
//! * **Providers** ([`openai`], feature `openai`): any OpenAI-compatible server;
//!   ([`anthropic`], feature `anthropic`): Anthropic's Messages API (Claude), with streaming.
//!
//! ## A custom tool and an agent
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use memgpt::function::{FunctionContext, FunctionError};
//! use memgpt::openai::{OpenAiConfig, OpenAiProvider};
//! use memgpt::{Agent, memgpt_fn};
//!
//! /// Look up a word in the team glossary.
//! #[memgpt_fn]
//! async fn glossary(
//!     _ctx: &mut FunctionContext<'_>,
//!     /// The term, e.g. "SLO".
//!     term: String,
//! ) -> Result<String, FunctionError> {
//!     match term.as_str() {
//!         "SLO" => Ok("Service level objective: a target for a service level indicator.".into()),
//!         other => Err(FunctionError::new(format!("`{other}` is not in the glossary"))),
//!     }
//! }
//!
//! # #[tokio::main] async fn main() -> anyhow::Result<()> {
//! let provider = Arc::new(OpenAiProvider::new(OpenAiConfig::from_env()?)?);
//! let mut agent = Agent::builder()
//!     .provider(provider)
//!     .persona("I am Ada, the team's onboarding buddy.")
//!     .function("glossary")
//!     .build()
//!     .await?;
//! let step = agent.step("What does SLO mean?").await?;
//! println!("{}", step.reply());
//! # Ok(()) }
//! ```
//!
//! ## Linking tool crates
//!
//! Tools register themselves at link time. If your binary never *names* anything from a crate
//! that only defines tools, the linker may drop it: add `use my_tools as _;` to your binary.
//! A missing tool is reported by name when the agent is built, never silently.
//!
//! ## Storage
//!
//! [`StoreConfig`] opens storage from a URL: `sqlite://./data` (the embedded default: one
//! directory, with tantivy recall and usearch archival indexes when those features are on),
//! `postgres://...` for several processes sharing one database, or `memory://`.
//!
//! ## Feature flags
//!
//! * `openai` (default): the OpenAI-compatible chat provider and embedder ([`openai`]).
//! * `anthropic`: the Anthropic (Claude) chat provider ([`anthropic`]).
//! * `sqlite` (default): SQLite storage ([`backends::SqliteStore`]).
//! * `tantivy`: a tantivy recall index next to the SQLite file.
//! * `usearch`: usearch HNSW indexes of passage and message embeddings next to the SQLite file.
//! * `postgres`: PostgreSQL + pgvector storage.
//! * `models`: fetching the offline models into `$MEMGPT_HOME/models` ([`models`]).
//! * `local-embed`: a local sentence embedder on the CPU ([`local_embed`]).
//! * `local`: a local GGUF chat model on the CPU (pure Rust, candle), every function call
//!   valid by construction ([`local`]).
//! * `server`: `memgpt serve`, the multi-tenant REST + streaming API (`server`).
//! * `mcp`: the Model Context Protocol both ways (`mcp`): MCP servers' tools as agent
//!   functions, and `memgpt mcp`, an agent's memory as MCP tools.
//! * `otel`: OpenTelemetry export over OTLP (`telemetry`): steps, model calls and function
//!   calls as spans in OpenTelemetry's GenAI semantic conventions.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets `#[memgpt_fn]` expansions inside this package's own tests and examples name `::memgpt`.
extern crate self as memgpt;

#[doc(inline)]
pub use memgpt_core::{
    Agent, AgentBuilder, AgentConfig, ContextStats, Error, ErrorKind, Event, EvictionPolicy,
    LoopStyle, MainContext, MemoryBlock, PaperPolicy, QueueManager, Result, StepRecord, StopReason,
    WorkingContext, agent, agent_file, builtin, chrono, chunk, config, consolidation, context,
    embed, function, ids, indexing, llm, memgpt_fn, memory, message, messaging, queue,
    register_policy, retrieval, rules, store, summarizer, time, tokens,
};

/// For store and provider authors, and for tests, apart from the everyday surface: what recall
/// storage's full-text index is built with ([`memgpt_core::backend`]), the crash tests'
/// failpoints, and a scripted provider for unit tests of agents and functions
/// ([`ScriptedProvider`](memgpt_core::testing::ScriptedProvider)).
pub mod backend {
    #[doc(inline)]
    pub use memgpt_core::backend::*;
    #[doc(inline)]
    pub use memgpt_core::{failpoint, testing};
}

/// Storage backends: SQLite, tantivy, usearch, PostgreSQL, chosen by feature and URL.
pub use memgpt_backends as backends;
#[doc(inline)]
pub use memgpt_backends::StoreConfig;

/// The OpenAI-compatible provider and embedder.
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub use memgpt_providers::openai;

/// The Anthropic (Claude) chat provider.
#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub use memgpt_providers::anthropic;

/// The shared HTTP layer of the providers: timeouts and retry policy.
#[cfg(any(feature = "openai", feature = "anthropic"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "openai", feature = "anthropic"))))]
pub use memgpt_providers::http;

/// Guaranteed-valid function calls: the union schema of an agent's functions, its GBNF
/// grammar, and a tolerant parser for servers with neither tools nor constrained output.
pub use memgpt_providers::structured;

/// `memgpt serve` as a library: the multi-tenant REST + streaming API over a store and a model.
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub use memgpt_server as server;

/// The Model Context Protocol: MCP servers' tools as agent functions, an agent's memory as MCP
/// tools.
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub use memgpt_mcp as mcp;

/// Fetching the offline models (catalog, cache folder, SHA-256 verification).
#[cfg(feature = "models")]
#[cfg_attr(docsrs, doc(cfg(feature = "models")))]
pub use memgpt_providers::models;

/// A local sentence embedder (candle, all-MiniLM-L6-v2).
#[cfg(feature = "local-embed")]
#[cfg_attr(docsrs, doc(cfg(feature = "local-embed")))]
pub use memgpt_providers::local_embed;

/// A local GGUF chat model (pure Rust, candle) with grammar-constrained function calls.
#[cfg(feature = "local")]
#[cfg_attr(docsrs, doc(cfg(feature = "local")))]
pub use memgpt_providers::local;

#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod telemetry;

#[doc(hidden)]
pub use memgpt_core::__private;

// The README's Rust snippets compile as doctests, so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
