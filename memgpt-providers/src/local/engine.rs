//! The llama.cpp worker: one thread that owns the model and its context and runs one
//! generation at a time, reusing the KV cache of the longest common prompt prefix (an agent's
//! prompts share their system prompt and most of their history, so only the new turns are
//! processed).

use std::num::NonZeroU32;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use memgpt_core::llm::{FinishReason, LlmError};
use tokio::sync::mpsc as tokio_mpsc;
use tracing::{debug, info};

use super::LlamaConfig;
use super::prompt::Turn;

/// What a finished generation reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The generated text.
    pub text: String,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens actually processed (the rest came from the KV cache).
    pub prompt_tokens_processed: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Why generation stopped.
    pub finish: FinishReason,
    /// Time spent processing the prompt.
    pub prompt_time: Duration,
    /// Time spent generating.
    pub generation_time: Duration,
}

/// A request to the worker.
pub(crate) struct Job {
    pub(crate) turns: Vec<Turn>,
    pub(crate) grammar: Option<String>,
    pub(crate) max_tokens: u32,
    pub(crate) temperature: f32,
    pub(crate) events: tokio_mpsc::UnboundedSender<Event>,
}

/// What the worker sends back while it works.
pub(crate) enum Event {
    /// A piece of generated text (whole UTF-8 characters).
    Piece(String),
    /// The end.
    Done(Result<Generation, LlmError>),
}

/// Facts about the loaded model.
#[derive(Clone, Debug)]
pub(crate) struct Loaded {
    pub(crate) context_window: usize,
}

/// The llama.cpp backend can be initialised once per process; it lives forever.
fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn failed(message: impl std::fmt::Display) -> LlmError {
    LlmError::Permanent {
        status: None,
        message: format!("local model: {message}"),
    }
}

/// Starts the worker thread and waits until the model is loaded.
pub(crate) fn start(config: &LlamaConfig) -> Result<(mpsc::Sender<Job>, Loaded), String> {
    let (jobs, inbox) = mpsc::channel::<Job>();
    let (ready, loaded) = mpsc::channel::<Result<Loaded, String>>();
    let config = config.clone();
    std::thread::Builder::new()
        .name("memgpt-llama".into())
        .spawn(move || worker(config, inbox, ready))
        .map_err(|e| format!("could not start the model thread: {e}"))?;
    let loaded = loaded
        .recv()
        .map_err(|_| "the model thread stopped while loading".to_owned())??;
    Ok((jobs, loaded))
}

fn worker(
    config: LlamaConfig,
    inbox: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<Loaded, String>>,
) {
    let setup = || -> Result<(LlamaModel, u32), String> {
        let backend = backend()?;
        if !config.model_path.is_file() {
            return Err(format!(
                "{}: no such model file",
                config.model_path.display()
            ));
        }
        let model =
            LlamaModel::load_from_file(backend, &config.model_path, &LlamaModelParams::default())
                .map_err(|e| format!("{}: {e}", config.model_path.display()))?;
        let n_ctx = config.context_window.min(model.n_ctx_train().max(256));
        Ok((model, n_ctx))
    };
    let (model, n_ctx) = match setup() {
        Ok(loaded) => loaded,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let Ok(backend) = backend() else { return };
    let threads = i32::try_from(config.threads.max(1)).unwrap_or(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(config.batch_size.max(32))
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = ready.send(Err(format!("creating a context: {e}")));
            return;
        }
    };
    let template = match &config.chat_template {
        Some(t) => LlamaChatTemplate::new(t).map_err(|e| e.to_string()),
        None => model
            .chat_template(None)
            .or_else(|_| LlamaChatTemplate::new("chatml"))
            .map_err(|e| e.to_string()),
    };
    let template = match template {
        Ok(t) => t,
        Err(e) => {
            let _ = ready.send(Err(format!("chat template: {e}")));
            return;
        }
    };
    info!(model = %config.model_path.display(), n_ctx, threads, "local model loaded");
    let _ = ready.send(Ok(Loaded {
        context_window: n_ctx as usize,
    }));

    let mut session = Session {
        model: &model,
        n_ctx: n_ctx as usize,
        batch_size: config.batch_size.max(32) as usize,
        seed: config.seed,
        repeat: (config.repeat_last_n, config.repeat_penalty),
        template,
        cached: Vec::new(),
    };
    while let Ok(job) = inbox.recv() {
        let events = job.events.clone();
        let result = session.run(&mut ctx, &job);
        if result.is_err() {
            // The cache may hold a half-processed prompt.
            session.cached.clear();
            ctx.clear_kv_cache();
        }
        let _ = events.send(Event::Done(result));
    }
}

struct Session<'m> {
    model: &'m LlamaModel,
    n_ctx: usize,
    batch_size: usize,
    seed: u32,
    /// `(last n tokens, penalty)`.
    repeat: (u32, f32),
    template: LlamaChatTemplate,
    /// The tokens whose keys and values are in the context's cache, in order.
    cached: Vec<LlamaToken>,
}

impl Session<'_> {
    fn run(
        &mut self,
        ctx: &mut llama_cpp_2::context::LlamaContext<'_>,
        job: &Job,
    ) -> Result<Generation, LlmError> {
        let chat: Vec<LlamaChatMessage> = job
            .turns
            .iter()
            .map(|(role, content)| LlamaChatMessage::new(role.clone(), content.clone()))
            .collect::<Result<_, _>>()
            .map_err(failed)?;
        let prompt = self
            .model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(failed)?;
        let vocab = self.model.vocab();
        let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        if tokens.is_empty() {
            return Err(failed("empty prompt"));
        }
        let max_tokens = job.max_tokens.max(1) as usize;
        if tokens.len() + max_tokens > self.n_ctx {
            return Err(LlmError::ContextOverflow {
                message: format!(
                    "the prompt ({} tokens) plus the completion limit ({max_tokens}) exceeds the \
                     local model's context window ({} tokens)",
                    tokens.len(),
                    self.n_ctx
                ),
            });
        }

        // Reuse the cached prefix; at least the last prompt token is processed again so its
        // logits are fresh.
        let mut common = self
            .cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count();
        common = common.min(tokens.len() - 1);
        if common < self.cached.len() {
            ctx.clear_kv_cache_seq(Some(0), u32::try_from(common).ok(), None)
                .map_err(failed)?;
            self.cached.truncate(common);
        }
        let started = Instant::now();
        let mut batch = LlamaBatch::new(self.batch_size, 1);
        let fresh = &tokens[common..];
        for (chunk_no, chunk) in fresh.chunks(self.batch_size).enumerate() {
            batch.clear();
            let last_chunk = (chunk_no + 1) * self.batch_size >= fresh.len();
            for (i, token) in chunk.iter().enumerate() {
                let pos = common + chunk_no * self.batch_size + i;
                let logits = last_chunk && i == chunk.len() - 1;
                batch
                    .add(*token, pos as i32, &[0], logits)
                    .map_err(failed)?;
            }
            ctx.decode(&mut batch).map_err(failed)?;
            self.cached.extend_from_slice(chunk);
        }
        let prompt_time = started.elapsed();

        let mut sampler = self.sampler(job)?;
        let started = Instant::now();
        let mut text = String::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut generated = 0usize;
        let mut logits_at = batch.n_tokens() - 1;
        let finish = loop {
            if generated >= max_tokens {
                break FinishReason::Length;
            }
            let token = sampler.sample(ctx, logits_at);
            if vocab.is_eog(token) {
                break FinishReason::Stop;
            }
            generated += 1;
            pending.extend(vocab.token_to_piece(token, false, None));
            let valid = match std::str::from_utf8(&pending) {
                Ok(s) => s.len(),
                Err(e) => e.valid_up_to(),
            };
            if valid > 0 {
                let piece = String::from_utf8_lossy(&pending[..valid]).into_owned();
                pending.drain(..valid);
                text.push_str(&piece);
                let _ = job.events.send(Event::Piece(piece));
            }
            batch.clear();
            batch
                .add(token, self.cached.len() as i32, &[0], true)
                .map_err(failed)?;
            ctx.decode(&mut batch).map_err(failed)?;
            self.cached.push(token);
            logits_at = 0;
            if self.cached.len() >= self.n_ctx {
                break FinishReason::Length;
            }
        };
        if !pending.is_empty() {
            text.push_str(&String::from_utf8_lossy(&pending));
        }
        let generation = Generation {
            text,
            prompt_tokens: tokens.len(),
            prompt_tokens_processed: fresh.len(),
            completion_tokens: generated,
            finish,
            prompt_time,
            generation_time: started.elapsed(),
        };
        debug!(
            prompt = generation.prompt_tokens,
            processed = generation.prompt_tokens_processed,
            generated = generation.completion_tokens,
            prompt_ms = generation.prompt_time.as_secs_f64() * 1e3,
            generation_ms = generation.generation_time.as_secs_f64() * 1e3,
            "local generation"
        );
        Ok(generation)
    }

    fn sampler(&self, job: &Job) -> Result<LlamaSampler, LlmError> {
        let mut chain = Vec::new();
        let (last_n, penalty) = self.repeat;
        if penalty > 1.0 && last_n > 0 {
            chain.push(LlamaSampler::penalties(
                self.model.n_vocab(),
                i32::try_from(last_n).unwrap_or(64),
                penalty,
                0.0,
                0.0,
            ));
        }
        if let Some(grammar) = &job.grammar {
            chain.push(
                LlamaSampler::grammar(self.model, grammar, "root")
                    .map_err(|e| failed(format!("the function-call grammar was rejected: {e}")))?,
            );
        }
        if job.temperature > 0.0 {
            chain.push(LlamaSampler::top_k(40));
            chain.push(LlamaSampler::top_p(0.95, 1));
            chain.push(LlamaSampler::temp(job.temperature));
            chain.push(LlamaSampler::dist(self.seed));
        } else {
            chain.push(LlamaSampler::greedy());
        }
        Ok(LlamaSampler::chain_simple(chain))
    }
}
