//! A local chat model: a GGUF file run on the CPU in pure Rust (candle), with **every function
//! call valid by construction**. Nothing to install: no C++ toolchain, no cmake, no libclang.
//!
//! When a request offers functions, decoding runs under a GBNF grammar generated from their
//! JSON schemas ([`structured::tool_call_grammar`](crate::structured::tool_call_grammar)):
//! the model can only produce `{"thinking": ..., "function": <an offered name>, "arguments":
//! <that function's arguments, correctly typed>}`. Even a 135M-parameter model then never emits
//! broken JSON, unknown functions, or a string where a boolean `request_heartbeat` belongs.
//! Requests without functions (the summarizer) generate free text.
//!
//! The model runs on its own thread, one generation at a time, and keeps the KV cache of the
//! previous prompt: an agent's next prompt shares its system prompt and most of its history, so
//! only the new turns are processed.
//!
//! It reports its own attention ([`AttentionProvider`]): for each request message, the share of
//! attention its tokens receive while the reply is written, so the `attention` eviction policy
//! keeps what the model actually looked at.
//!
//! ```no_run
//! # fn demo() -> Result<(), memgpt_providers::local::LocalModelError> {
//! use memgpt_providers::local::{LlamaConfig, LlamaProvider};
//!
//! let provider = LlamaProvider::new(LlamaConfig::new("models/smollm2-135m-instruct/model.gguf"))?;
//! # let _ = provider; Ok(()) }
//! ```

mod config;
mod engine;
mod model;
mod prompt;
mod sample;
mod stream;
mod vocab;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use async_trait::async_trait;
use memgpt_core::llm::{
    AttentionProvider, ChatRequest, ChatResponse, FinishReason, LlmError, LlmProvider, StreamDelta,
    StreamSink, StreamingProvider, Usage,
};
use tokio::sync::mpsc as tokio_mpsc;

pub use config::LlamaConfig;
pub use engine::Generation;

use crate::structured::{GbnfOptions, UnionOptions, tool_call_grammar};
use engine::{Event, Job};

/// Why a local model could not be started.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("local model: {0}")]
pub struct LocalModelError(String);

/// A chat provider running a GGUF model in-process (see the [module docs](self)).
#[derive(Clone)]
pub struct LlamaProvider {
    inner: Arc<Inner>,
}

struct Inner {
    config: LlamaConfig,
    model_id: String,
    context_window: usize,
    jobs: Mutex<mpsc::Sender<Job>>,
    calls: AtomicU64,
    last: Mutex<Option<Generation>>,
}

impl std::fmt::Debug for LlamaProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaProvider")
            .field("model", &self.inner.model_id)
            .field("context_window", &self.inner.context_window)
            .field("threads", &self.inner.config.threads)
            .finish_non_exhaustive()
    }
}

impl LlamaProvider {
    /// Loads the model (blocking: a few hundred milliseconds for a small model) and starts its
    /// thread.
    pub fn new(config: LlamaConfig) -> Result<Self, LocalModelError> {
        let (jobs, loaded) = engine::start(&config).map_err(LocalModelError)?;
        Ok(Self {
            inner: Arc::new(Inner {
                model_id: config.model_id(),
                context_window: loaded.context_window,
                config,
                jobs: Mutex::new(jobs),
                calls: AtomicU64::new(0),
                last: Mutex::new(None),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.inner.config
    }

    /// Token counts and timings of the most recent generation (for benchmarks and logs).
    pub fn last_generation(&self) -> Option<Generation> {
        self.inner.last.lock().ok().and_then(|g| g.clone())
    }

    /// Runs one request; `on_piece` sees the generated text as it is decoded. With
    /// `attention`, the generation reports the attention each request message received.
    async fn generate(
        &self,
        request: &ChatRequest,
        on_piece: &(dyn Fn(&str) + Send + Sync),
        attention: bool,
    ) -> Result<(Generation, Option<usize>), LlmError> {
        let grammar = if request.tools.is_empty() {
            None
        } else {
            let grammar = tool_call_grammar(
                &request.tools,
                &UnionOptions::default(),
                &GbnfOptions::default(),
            )
            .map_err(|e| LlmError::Permanent {
                status: None,
                message: format!("could not build the function-call grammar: {e}"),
            })?;
            Some(grammar)
        };
        let (events, mut inbox) = tokio_mpsc::unbounded_channel();
        let (turns, spans) = prompt::turns_with_spans(request);
        let job = Job {
            turns,
            attention: attention.then_some(spans),
            grammar,
            max_tokens: request.max_tokens.unwrap_or(self.inner.config.max_tokens),
            temperature: request.temperature.unwrap_or(self.inner.config.temperature),
            events,
        };
        let tools = (!request.tools.is_empty()).then_some(request.tools.len());
        self.inner
            .jobs
            .lock()
            .map_err(|_| worker_gone())?
            .send(job)
            .map_err(|_| worker_gone())?;
        while let Some(event) = inbox.recv().await {
            match event {
                Event::Piece(piece) => on_piece(&piece),
                Event::Done(result) => {
                    let generation = result?;
                    if let Ok(mut last) = self.inner.last.lock() {
                        *last = Some(generation.clone());
                    }
                    return Ok((generation, tools));
                }
            }
        }
        Err(worker_gone())
    }

    fn next_call_id(&self) -> String {
        format!(
            "call_{}",
            self.inner.calls.fetch_add(1, Ordering::Relaxed) + 1
        )
    }

    fn response(&self, generation: Generation, call_id: Option<String>) -> ChatResponse {
        let usage = Usage {
            prompt_tokens: generation.prompt_tokens as u64,
            completion_tokens: generation.completion_tokens as u64,
            // The prompt's common prefix with the last one came from the key/value cache.
            cached_prompt_tokens: generation
                .prompt_tokens
                .saturating_sub(generation.prompt_tokens_processed)
                as u64,
        };
        let Some(id) = call_id else {
            return ChatResponse {
                content: generation.text,
                tool_calls: Vec::new(),
                usage,
                finish_reason: generation.finish,
                model: self.inner.model_id.clone(),
            };
        };
        let (thinking, call) = prompt::parse_call(&generation.text, id);
        let finish_reason = match generation.finish {
            FinishReason::Stop => FinishReason::ToolCalls,
            other => other,
        };
        ChatResponse {
            content: thinking,
            tool_calls: vec![call],
            usage,
            finish_reason,
            model: self.inner.model_id.clone(),
        }
    }
}

fn worker_gone() -> LlmError {
    LlmError::Permanent {
        status: None,
        message: "local model: the model thread has stopped".into(),
    }
}

#[async_trait]
impl LlmProvider for LlamaProvider {
    fn model(&self) -> &str {
        &self.inner.model_id
    }

    fn provider_name(&self) -> &str {
        "memgpt.local"
    }

    fn context_window(&self) -> Option<usize> {
        Some(self.inner.context_window)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let (generation, tools) = self.generate(request, &|_| {}, false).await?;
        let id = tools.map(|_| self.next_call_id());
        Ok(self.response(generation, id))
    }

    fn as_streaming(&self) -> Option<&dyn StreamingProvider> {
        Some(self)
    }

    fn as_attention(&self) -> Option<&dyn AttentionProvider> {
        Some(self)
    }
}

/// The model's own attention: while it writes the reply, the share of attention each request
/// message's tokens receive (averaged over the generated tokens, the layers and the heads), so
/// [`AttentionPolicy`](memgpt_core::queue::AttentionPolicy) runs on a real signal.
#[async_trait]
impl AttentionProvider for LlamaProvider {
    async fn complete_with_attention(
        &self,
        request: &ChatRequest,
    ) -> Result<(ChatResponse, Option<Vec<f32>>), LlmError> {
        let (mut generation, tools) = self.generate(request, &|_| {}, true).await?;
        let attention = generation.attention.take();
        let id = tools.map(|_| self.next_call_id());
        Ok((self.response(generation, id), attention))
    }
}

#[async_trait]
impl StreamingProvider for LlamaProvider {
    /// Streams as the model writes: plain completions token by token; a function call's inner
    /// monologue as text, then the call's start once its name is complete, then its arguments.
    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &StreamSink<'_>,
    ) -> Result<ChatResponse, LlmError> {
        if request.tools.is_empty() {
            let (generation, _) = self
                .generate(request, &|piece| sink(StreamDelta::Text(piece)), false)
                .await?;
            return Ok(self.response(generation, None));
        }
        let id = self.next_call_id();
        let streamer = Mutex::new(stream::CallStreamer::new(id.clone()));
        let (generation, _) = self
            .generate(
                request,
                &|piece| {
                    if let Ok(mut streamer) = streamer.lock() {
                        streamer.push(piece, sink);
                    }
                },
                false,
            )
            .await?;
        Ok(self.response(generation, Some(id)))
    }
}

/// SmolLM2's GGUF file in the test model cache (`MEMGPT_TEST_MODELS`). The tests that read it
/// are `#[ignore]`d (libtest cannot ignore at run time): run them with `--ignored`, as `.ci/run`
/// does, with the cache set.
#[cfg(test)]
fn test_model() -> std::path::PathBuf {
    let Some(root) = std::env::var_os("MEMGPT_TEST_MODELS").filter(|r| !r.is_empty()) else {
        panic!("set MEMGPT_TEST_MODELS to a model cache holding SmolLM2 (.ci/models.sh fills one)");
    };
    std::path::Path::new(&root).join("smollm2-135m-instruct/model.gguf")
}
