//! LLM and embedding providers for memgpt-rs.
//!
//! Each provider implements the seams of [`memgpt_core`]: [`LlmProvider`](memgpt_core::llm::LlmProvider)
//! for chat completions with function calling, [`Embedder`](memgpt_core::embed::Embedder) for
//! embeddings. Each sits behind its own Cargo feature.
//!
//! * [`openai`] (feature `openai`, default): any server speaking OpenAI's chat-completions and
//!   embeddings API: OpenAI, Ollama, vLLM, the llama.cpp server, LM Studio, OpenRouter...
//! * [`http`]: the shared HTTP client, with timeouts and retries (exponential backoff with
//!   jitter, `Retry-After` honoured) used by every HTTP provider.
//!
//! # Feature flags
//!
//! * `openai` (default): the OpenAI-compatible provider and embedder.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "_http")]
pub mod http;

#[cfg(feature = "openai")]
pub mod openai;
