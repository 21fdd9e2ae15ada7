//! [`LlamaConfig`]: the model file and threads of the local chat model.

use std::path::PathBuf;

/// How to run a local GGUF chat model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// The model name reported in responses (default: the file name without extension).
    pub model_id: Option<String>,
    /// Context window in tokens (capped at what the model was trained with). Default 8,192.
    pub context_window: u32,
    /// Threads of the model's own pool (attention, normalisation, dense products). Default 1.
    /// candle runs the quantized matrix products on its process-wide pool, sized by the
    /// `CANDLE_NUM_THREADS` (or `RAYON_NUM_THREADS`) environment variable, by default the
    /// physical cores.
    pub threads: u32,
    /// Tokens per prompt-processing batch. Default 512.
    pub batch_size: u32,
    /// Completion limit when a request sets none. Default 512.
    pub max_tokens: u32,
    /// Sampling temperature; 0 (the default) is greedy decoding, which is deterministic.
    pub temperature: f32,
    /// Seed for sampling when `temperature > 0`.
    pub seed: u32,
    /// Penalty for repeating one of the last [`LlamaConfig::repeat_last_n`] generated tokens
    /// (1 = none). Default 1.15: small models otherwise fall into loops that run until the
    /// token limit.
    pub repeat_penalty: f32,
    /// How many recent generated tokens the repeat penalty looks at. Default 64.
    pub repeat_last_n: u32,
}

impl LlamaConfig {
    /// A config for the GGUF file at `model_path`, with the defaults above.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        Self {
            model_path: model_path.into(),
            model_id: None,
            context_window: 8_192,
            threads: 1,
            batch_size: 512,
            max_tokens: 512,
            temperature: 0.0,
            seed: 0x5eed,
            repeat_penalty: 1.15,
            repeat_last_n: 64,
        }
    }

    /// Sets the number of decoding threads.
    pub fn with_threads(mut self, threads: u32) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Sets the context window.
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = tokens.max(256);
        self
    }

    /// Sets the default completion limit.
    pub fn with_max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens.max(1);
        self
    }

    /// Sets the sampling temperature (0 = greedy).
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = temperature.max(0.0);
        self
    }

    /// The model name reported in responses.
    pub fn model_id(&self) -> String {
        self.model_id.clone().unwrap_or_else(|| {
            self.model_path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "local-gguf".to_owned())
        })
    }
}
