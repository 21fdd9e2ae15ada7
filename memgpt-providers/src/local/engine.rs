//! The model worker: one thread that owns the model and runs one generation at a time,
//! reusing the key/value cache of the longest common prompt prefix (an agent's prompts share
//! their system prompt and most of their history, so only the new turns are processed).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file::Content;
use memgpt_core::llm::{FinishReason, LlmError};
use tokio::sync::mpsc as tokio_mpsc;
use tracing::{debug, info};

use super::config::LlamaConfig;
use super::model::Llama;
use super::prompt::{Span, Turn};
use super::sample::Sampler;
use super::vocab::Vocab;
use crate::structured::gbnf_match::CompiledGrammar;

/// What a finished generation reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The generated text.
    pub text: String,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens actually processed (the rest came from the key/value cache).
    pub prompt_tokens_processed: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Why generation stopped.
    pub finish: FinishReason,
    /// Time spent processing the prompt.
    pub prompt_time: Duration,
    /// Time spent generating.
    pub generation_time: Duration,
    /// The part of [`Generation::generation_time`] spent choosing tokens (repeat penalty,
    /// ordering, and the grammar's checks when a request offers functions).
    pub sampling_time: Duration,
    /// When asked for: the attention each request message received while the reply was
    /// generated (the share of attention, averaged over generated tokens, layers and heads,
    /// that fell on its tokens; the rest went to the template and the reply itself).
    pub attention: Option<Vec<f32>>,
}

/// A request to the worker.
pub(crate) struct Job {
    pub(crate) turns: Vec<Turn>,
    /// Where each request message sits in `turns`, when its attention is wanted.
    pub(crate) attention: Option<Vec<Span>>,
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
        .name("memgpt-local-model".into())
        .spawn(move || worker(config, inbox, ready))
        .map_err(|e| format!("could not start the model thread: {e}"))?;
    let loaded = loaded
        .recv()
        .map_err(|_| "the model thread stopped while loading".to_owned())??;
    Ok((jobs, loaded))
}

/// Reads the GGUF file: the tokenizer, then the weights.
fn load(config: &LlamaConfig) -> Result<(Llama, Vocab), String> {
    let path = &config.model_path;
    let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let content = Content::read(&mut file)
        .map_err(|e| format!("{}: not a readable GGUF file: {e}", path.display()))?;
    let vocab = Vocab::from_gguf(&content).map_err(|e| format!("{}: {e}", path.display()))?;
    if !(vocab.has_control("<|im_start|>") && vocab.has_control("<|im_end|>")) {
        return Err(format!(
            "{}: the model has no ChatML turn tokens (<|im_start|>, <|im_end|>); the local \
             engine prompts in ChatML, as SmolLM2's instruct models expect",
            path.display()
        ));
    }
    let trained = content
        .metadata
        .get("llama.context_length")
        .and_then(super::model::whole)
        .unwrap_or(config.context_window);
    let window = config.context_window.min(trained).max(256) as usize;
    let model =
        Llama::load(&content, &mut file, window).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((model, vocab))
}

fn worker(
    config: LlamaConfig,
    inbox: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<Loaded, String>>,
) {
    // The model's matrix products run on a pool of `threads` threads of their own.
    let pool = match rayon::ThreadPoolBuilder::new()
        .num_threads(config.threads.max(1) as usize)
        .thread_name(|i| format!("memgpt-local-model-{i}"))
        .build()
    {
        Ok(pool) => pool,
        Err(e) => {
            let _ = ready.send(Err(format!("could not start the model's threads: {e}")));
            return;
        }
    };
    pool.install(move || {
        let started = Instant::now();
        let (model, vocab) = match load(&config) {
            Ok(loaded) => loaded,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        info!(
            model = %config.model_path.display(),
            window = model.max_positions,
            threads = config.threads,
            load_ms = started.elapsed().as_millis() as u64,
            "local model loaded"
        );
        let _ = ready.send(Ok(Loaded {
            context_window: model.max_positions,
        }));
        let mut session = Session {
            model,
            vocab,
            config,
            cached: Vec::new(),
        };
        while let Ok(job) = inbox.recv() {
            let events = job.events.clone();
            let result = session.run(&job);
            if result.is_err() {
                // The cache may hold a half-processed prompt.
                session.forget();
            }
            let _ = events.send(Event::Done(result));
        }
    });
}

struct Session {
    model: Llama,
    vocab: Vocab,
    config: LlamaConfig,
    /// The tokens whose keys and values are in the model's cache, in order.
    cached: Vec<u32>,
}

/// The prompt in ChatML, ending where the assistant's reply begins.
#[cfg(test)]
fn chatml(turns: &[Turn]) -> String {
    chatml_with_starts(turns).0
}

/// The prompt in ChatML, and where each turn's content starts in it (bytes).
fn chatml_with_starts(turns: &[Turn]) -> (String, Vec<usize>) {
    let mut prompt = String::new();
    let mut starts = Vec::with_capacity(turns.len());
    for (role, content) in turns {
        prompt.push_str("<|im_start|>");
        prompt.push_str(role);
        prompt.push('\n');
        starts.push(prompt.len());
        prompt.push_str(content);
        prompt.push_str("<|im_end|>\n");
    }
    prompt.push_str("<|im_start|>assistant\n");
    (prompt, starts)
}

/// Attention per request message: the sum of `weights` (one per prompt token) over the tokens
/// that start inside the message's text.
fn message_attention(
    weights: &[f32],
    offsets: &[(usize, usize)],
    starts: &[usize],
    spans: &[Span],
) -> Vec<f32> {
    let ranges: Vec<Option<std::ops::Range<usize>>> = spans
        .iter()
        .map(|(turn, range)| {
            let base = *starts.get(*turn)?;
            Some(base + range.start..base + range.end)
        })
        .collect();
    let mut order: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].is_some()).collect();
    order.sort_by_key(|&i| ranges[i].as_ref().map_or(0, |r| r.start));
    let mut out = vec![0.0; spans.len()];
    for (&(from, _), &weight) in offsets.iter().zip(weights) {
        // The last message starting at or before the token, if the token is inside it.
        let before =
            order.partition_point(|&i| ranges[i].as_ref().is_some_and(|r| r.start <= from));
        let Some(&i) = before.checked_sub(1).and_then(|k| order.get(k)) else {
            continue;
        };
        if ranges[i].as_ref().is_some_and(|r| from < r.end) {
            out[i] += weight;
        }
    }
    out
}

impl Session {
    fn forget(&mut self) {
        self.cached.clear();
        self.model.truncate(0);
    }

    /// Processes `tokens` after the cache, in batches; the logits of the last one. With
    /// `record`, attention recording starts with the last batch (whose last query picks the
    /// first generated token).
    fn feed(&mut self, tokens: &[u32], record: bool) -> Result<Vec<f32>, LlmError> {
        let mut logits = Vec::new();
        let batches = tokens.chunks(self.config.batch_size.max(1) as usize);
        let last = batches.len().saturating_sub(1);
        for (i, chunk) in batches.enumerate() {
            if record && i == last {
                self.model.record_attention(true);
            }
            logits = self.model.forward(chunk).map_err(failed)?;
            self.cached.extend_from_slice(chunk);
        }
        Ok(logits)
    }

    fn run(&mut self, job: &Job) -> Result<Generation, LlmError> {
        self.model.record_attention(false);
        let (prompt, starts) = chatml_with_starts(&job.turns);
        let (tokens, offsets) = self.vocab.encode_with_offsets(&prompt).map_err(failed)?;
        let window = self.model.max_positions;
        let max_tokens = job.max_tokens.max(1) as usize;
        if tokens.len() + max_tokens > window {
            return Err(LlmError::ContextOverflow {
                message: format!(
                    "the prompt ({} tokens) plus the completion limit ({max_tokens}) exceeds the \
                     local model's context window ({window} tokens)",
                    tokens.len(),
                ),
            });
        }
        let grammar = match &job.grammar {
            Some(text) => Some(
                CompiledGrammar::new(text)
                    .map_err(|e| failed(format!("the function-call grammar was rejected: {e}")))?,
            ),
            None => None,
        };

        // Reuse the cached prefix; at least the last prompt token is processed again so its
        // logits are fresh.
        let common = self
            .cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len() - 1);
        self.model.truncate(common);
        self.cached.truncate(common);
        let started = Instant::now();
        let fresh = &tokens[common..];
        let mut logits = self.feed(fresh, job.attention.is_some())?;
        let prompt_time = started.elapsed();

        let mut sampler = Sampler::new(
            job.temperature,
            self.config.seed,
            self.config.repeat_last_n as usize,
            self.config.repeat_penalty,
        );
        let mut state = grammar.as_ref().map(CompiledGrammar::start);
        let started = Instant::now();
        let mut text = String::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut generated: Vec<u32> = Vec::new();
        let mut sampling_time = Duration::ZERO;
        let finish = loop {
            if generated.len() >= max_tokens || self.cached.len() >= window {
                break FinishReason::Length;
            }
            if state.as_ref().is_some_and(|s| !s.can_continue()) {
                // The call is complete and nothing may follow it.
                break FinishReason::Stop;
            }
            let vocab = &self.vocab;
            let choosing = Instant::now();
            let token = sampler.pick(&mut logits, &generated, |id| {
                if vocab.ends_generation(id) {
                    return state.as_ref().is_none_or(|s| s.is_complete());
                }
                if vocab.is_control(id) {
                    return false;
                }
                match (&grammar, &state) {
                    (Some(g), Some(s)) => g.allows(s, vocab.bytes(id)),
                    _ => !vocab.bytes(id).is_empty(),
                }
            });
            let Some(token) = token else {
                let tail: String = {
                    let chars: Vec<char> = text.chars().collect();
                    chars[chars.len().saturating_sub(80)..].iter().collect()
                };
                return Err(failed(format!(
                    "the grammar allows no token after {} generated tokens (ending `{tail}`)",
                    generated.len()
                )));
            };
            if vocab.ends_generation(token) {
                break FinishReason::Stop;
            }
            if let (Some(g), Some(s)) = (&grammar, &state) {
                state = g.accept(s, vocab.bytes(token));
            }
            sampling_time += choosing.elapsed();
            generated.push(token);
            pending.extend_from_slice(vocab.bytes(token));
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
            if state.as_ref().is_some_and(|s| !s.can_continue()) {
                break FinishReason::Stop;
            }
            logits = self.feed(&[token], false)?;
        };
        if !pending.is_empty() {
            text.push_str(&String::from_utf8_lossy(&pending));
        }
        let attention = match (&job.attention, self.model.take_attention()) {
            (Some(spans), Some(weights)) => Some(message_attention(
                &weights[..tokens.len().min(weights.len())],
                &offsets,
                &starts,
                spans,
            )),
            _ => None,
        };
        let generation = Generation {
            text,
            prompt_tokens: tokens.len(),
            prompt_tokens_processed: fresh.len(),
            completion_tokens: generated.len(),
            finish,
            prompt_time,
            generation_time: started.elapsed(),
            sampling_time,
            attention,
        };
        debug!(
            prompt = generation.prompt_tokens,
            processed = generation.prompt_tokens_processed,
            generated = generation.completion_tokens,
            prompt_ms = generation.prompt_time.as_secs_f64() * 1e3,
            generation_ms = generation.generation_time.as_secs_f64() * 1e3,
            sampling_ms = generation.sampling_time.as_secs_f64() * 1e3,
            "local generation"
        );
        Ok(generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_chatml_ending_at_the_reply() {
        let turns = vec![
            ("system".to_owned(), "Be brief.".to_owned()),
            ("user".to_owned(), "hi".to_owned()),
        ];
        assert_eq!(
            chatml(&turns),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n\
             <|im_start|>assistant\n"
        );
        let (_, starts) = chatml_with_starts(&turns);
        assert_eq!(starts, [19, 56], "after `<|im_start|>role\\n`");
    }

    #[test]
    fn attention_goes_to_the_message_a_token_starts_in() {
        // Two turns; the second holds two merged messages (`a` then `b`).
        let starts = [10, 40];
        let spans: Vec<Span> = vec![(0, 0..5), (1, 0..4), (1, 6..12)];
        let offsets = [
            (0, 10),
            (10, 13),
            (13, 15),
            (30, 40),
            (40, 44),
            (44, 46),
            (46, 52),
        ];
        let weights = [0.5, 0.1, 0.05, 0.01, 0.2, 0.02, 0.1];
        let got = message_attention(&weights, &offsets, &starts, &spans);
        let want = [0.15, 0.2, 0.1]; // template tokens (0, 30, 44) belong to no message
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?}");
        }
    }
}
