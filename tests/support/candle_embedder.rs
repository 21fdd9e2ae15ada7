//! The previous local embedder, kept as a reference: candle's `BertModel`, each batch padded to
//! its longest text and truncated at 256 tokens (what `LocalEmbedder` did until 2026-12-06).
//! The integration tests check the new encoder against it and the `local_models` bench measures
//! both in one run.

#![allow(dead_code)]

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// all-MiniLM-L6-v2 through candle, as the previous `LocalEmbedder` ran it.
pub struct CandleEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    batch_size: usize,
}

impl CandleEmbedder {
    /// Loads a BERT checkpoint folder (`config.json`, `tokenizer.json`, `model.safetensors`).
    pub fn from_dir(dir: &Path) -> anyhow::Result<Self> {
        let config: Config =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?)?;
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(anyhow::Error::msg)?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id: config.pad_token_id as u32,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: 256.min(config.max_position_embeddings),
                ..TruncationParams::default()
            }))
            .map_err(anyhow::Error::msg)?;
        // SAFETY: read-only map of a file nobody rewrites during the test.
        let vb = unsafe {
            VarBuilder::from_mmaped_safetensors(
                &[dir.join("model.safetensors")],
                DType::F32,
                &Device::Cpu,
            )?
        };
        Ok(Self {
            model: BertModel::load(vb, &config)?,
            tokenizer,
            batch_size: 32,
        })
    }

    /// Embeds texts in batches of 32 of similar length.
    pub fn embed(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (i, vector) in chunk.iter().zip(self.batch(&batch)?) {
                out[*i] = vector;
            }
        }
        Ok(out)
    }

    fn batch(&self, texts: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(anyhow::Error::msg)?;
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let n = encodings.len();
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for encoding in &encodings {
            ids.extend_from_slice(encoding.get_ids());
            mask.extend_from_slice(encoding.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (n, len), &Device::Cpu)?;
        let mask = Tensor::from_vec(mask, (n, len), &Device::Cpu)?;
        let token_types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &token_types, Some(&mask))?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        Ok(mean.broadcast_div(&norms)?.to_vec2::<f32>()?)
    }
}
