//! A Llama-architecture transformer (SmolLM2, Llama, TinyLlama... in GGUF files) on the CPU
//! with candle: quantized matrix products, grouped-query attention, rotary positions, and a
//! key/value cache that can be cut back to any prefix (so a new prompt that shares its start
//! with the previous one only processes what is new).

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

/// Quantizations whose matrix product candle runs with SIMD; others are converted to Q8_0
/// when loading (nearly lossless from 4 or 5 bits, and several times faster).
fn fast_on_cpu(dtype: GgmlDType) -> bool {
    !matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

fn failed(e: impl std::fmt::Display) -> String {
    e.to_string()
}

struct Layer {
    attention_norm: Tensor,
    q: QMatMul,
    k: QMatMul,
    v: QMatMul,
    o: QMatMul,
    ffn_norm: Tensor,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
    /// Keys and values of the cached positions, `[1, kv_heads, positions, head_dim]`.
    cache: Option<(Tensor, Tensor)>,
}

/// The model and its cache.
pub(crate) struct Llama {
    embeddings: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: QMatMul,
    cos: Tensor,
    sin: Tensor,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f64,
    /// Positions in the cache.
    cached: usize,
    /// Positions the rotary tables cover.
    pub(crate) max_positions: usize,
}

fn number(content: &Content, key: &str) -> Result<f64, String> {
    match content.metadata.get(key) {
        Some(Value::U32(v)) => Ok(f64::from(*v)),
        Some(Value::I32(v)) => Ok(f64::from(*v)),
        Some(Value::U64(v)) => Ok(*v as f64),
        Some(Value::F32(v)) => Ok(f64::from(*v)),
        Some(Value::F64(v)) => Ok(*v),
        Some(other) => Err(format!("`{key}` is not a number: {other:?}")),
        None => Err(format!("the GGUF file has no `{key}`")),
    }
}

impl Llama {
    /// Loads the weights described by `content` from `file`; positions up to `max_positions`.
    pub(crate) fn load<R: std::io::Read + std::io::Seek>(
        content: &Content,
        file: &mut R,
        max_positions: usize,
    ) -> Result<Self, String> {
        let device = Device::Cpu;
        let arch = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok().cloned())
            .unwrap_or_default();
        if arch != "llama" {
            return Err(format!(
                "the model's architecture is `{arch}`; the local engine runs `llama` models \
                 (SmolLM2, Llama, TinyLlama...)"
            ));
        }
        let key = |k: &str| number(content, &format!("llama.{k}"));
        let layers = key("block_count")? as usize;
        let dim = key("embedding_length")? as usize;
        let heads = key("attention.head_count")? as usize;
        let kv_heads = key("attention.head_count_kv").map_or(heads, |v| v as usize);
        let eps = key("attention.layer_norm_rms_epsilon").unwrap_or(1e-5);
        let theta = key("rope.freq_base").unwrap_or(10_000.0);
        if heads == 0
            || kv_heads == 0
            || !dim.is_multiple_of(heads)
            || !heads.is_multiple_of(kv_heads)
        {
            return Err(format!(
                "inconsistent shape: {dim} dimensions, {heads} heads, {kv_heads} key/value heads"
            ));
        }
        let head_dim = dim / heads;

        let mut tensor = |name: &str| -> Result<QTensor, String> {
            content
                .tensor(file, name, &device)
                .map_err(|e| format!("tensor `{name}`: {e}"))
        };
        let matmul = |t: QTensor| -> Result<QMatMul, String> {
            let t = if fast_on_cpu(t.dtype()) {
                t
            } else {
                let dense = t.dequantize(&device).map_err(failed)?;
                QTensor::quantize(&dense, GgmlDType::Q8_0).map_err(failed)?
            };
            QMatMul::from_qtensor(t).map_err(failed)
        };
        let dense = |t: QTensor| t.dequantize(&device).map_err(failed);

        let token_embeddings = tensor("token_embd.weight")?;
        let embeddings = dense(token_embeddings)?;
        let output = match tensor("output.weight") {
            Ok(t) => matmul(t)?,
            // Tied embeddings.
            Err(_) => matmul(tensor("token_embd.weight")?)?,
        };
        let norm = dense(tensor("output_norm.weight")?)?;
        let mut blocks = Vec::with_capacity(layers);
        for i in 0..layers {
            let p = |n: &str| format!("blk.{i}.{n}.weight");
            blocks.push(Layer {
                attention_norm: dense(tensor(&p("attn_norm"))?)?,
                q: matmul(tensor(&p("attn_q"))?)?,
                k: matmul(tensor(&p("attn_k"))?)?,
                v: matmul(tensor(&p("attn_v"))?)?,
                o: matmul(tensor(&p("attn_output"))?)?,
                ffn_norm: dense(tensor(&p("ffn_norm"))?)?,
                gate: matmul(tensor(&p("ffn_gate"))?)?,
                up: matmul(tensor(&p("ffn_up"))?)?,
                down: matmul(tensor(&p("ffn_down"))?)?,
                cache: None,
            });
        }

        // Rotary tables: position x frequency.
        let half = head_dim / 2;
        let inverse: Vec<f32> = (0..half)
            .map(|i| 1.0 / theta.powf(2.0 * i as f64 / head_dim as f64) as f32)
            .collect();
        let inverse = Tensor::from_vec(inverse, (1, half), &device).map_err(failed)?;
        let positions = Tensor::arange(0u32, max_positions as u32, &device)
            .and_then(|t| t.to_dtype(DType::F32))
            .and_then(|t| t.reshape((max_positions, 1)))
            .map_err(failed)?;
        let angles = positions.matmul(&inverse).map_err(failed)?;
        Ok(Self {
            embeddings,
            layers: blocks,
            norm,
            output,
            cos: angles.cos().map_err(failed)?,
            sin: angles.sin().map_err(failed)?,
            heads,
            kv_heads,
            head_dim,
            eps,
            cached: 0,
            max_positions,
        })
    }

    /// Keeps only the first `positions` cached positions.
    pub(crate) fn truncate(&mut self, positions: usize) -> Result<(), String> {
        if positions >= self.cached {
            return Ok(());
        }
        for layer in &mut self.layers {
            layer.cache = match (positions, layer.cache.take()) {
                (0, _) | (_, None) => None,
                (n, Some((k, v))) => Some((
                    k.narrow(2, 0, n).map_err(failed)?,
                    v.narrow(2, 0, n).map_err(failed)?,
                )),
            };
        }
        self.cached = positions;
        Ok(())
    }

    /// Runs `tokens` (following the cached positions) and returns the logits of the last one.
    pub(crate) fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, String> {
        self.forward_inner(tokens).map_err(failed)
    }

    fn forward_inner(&mut self, tokens: &[u32]) -> candle_core::Result<Vec<f32>> {
        let device = Device::Cpu;
        let n = tokens.len();
        let start = self.cached;
        if n == 0 || start + n > self.max_positions {
            candle_core::bail!(
                "{} positions do not fit the {} the model was loaded for",
                start + n,
                self.max_positions
            );
        }
        let ids = Tensor::new(tokens, &device)?;
        let mut x = self.embeddings.index_select(&ids, 0)?.unsqueeze(0)?;
        let cos = self.cos.narrow(0, start, n)?;
        let sin = self.sin.narrow(0, start, n)?;
        // Causal mask over [cached + new] keys for the new queries.
        let mask = if n > 1 {
            let values: Vec<f32> = (0..n)
                .flat_map(|i| {
                    (0..start + n).map(move |j| {
                        if j > start + i {
                            f32::NEG_INFINITY
                        } else {
                            0.0
                        }
                    })
                })
                .collect();
            Some(Tensor::from_vec(values, (n, start + n), &device)?)
        } else {
            None
        };
        let (heads, kv_heads, head_dim) = (self.heads, self.kv_heads, self.head_dim);
        let scale = 1.0 / (head_dim as f64).sqrt();
        for layer in &mut self.layers {
            let h = candle_nn::ops::rms_norm(&x, &layer.attention_norm, self.eps as f32)?;
            let q = layer
                .q
                .forward(&h)?
                .reshape((1, n, heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let k = layer
                .k
                .forward(&h)?
                .reshape((1, n, kv_heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let v = layer
                .v
                .forward(&h)?
                .reshape((1, n, kv_heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let q = candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?;
            let k = candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?;
            let (k, v) = match &layer.cache {
                Some((ck, cv)) => (Tensor::cat(&[ck, &k], 2)?, Tensor::cat(&[cv, &v], 2)?),
                None => (k, v),
            };
            layer.cache = Some((k.clone(), v.clone()));
            // Grouped-query attention: each key/value head serves heads / kv_heads queries.
            let group = heads / kv_heads;
            let q = q.reshape((kv_heads, group * n, head_dim))?;
            let k = k.squeeze(0)?;
            let v = v.squeeze(0)?;
            let mut scores = (q.matmul(&k.t()?)? * scale)?;
            if let Some(mask) = &mask {
                scores = scores
                    .reshape((kv_heads, group, n, start + n))?
                    .broadcast_add(mask)?
                    .reshape((kv_heads, group * n, start + n))?;
            }
            let weights = candle_nn::ops::softmax_last_dim(&scores)?;
            let y = weights
                .matmul(&v)?
                .reshape((1, heads, n, head_dim))?
                .transpose(1, 2)?
                .reshape((1, n, heads * head_dim))?;
            x = (x + layer.o.forward(&y)?)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, self.eps as f32)?;
            let gated =
                (candle_nn::ops::silu(&layer.gate.forward(&h)?)? * layer.up.forward(&h)?)?;
            x = (x + layer.down.forward(&gated)?)?;
        }
        self.cached = start + n;
        let last = x.narrow(1, n - 1, 1)?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, self.eps as f32)?;
        let logits = self.output.forward(&last)?;
        logits.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()
    }
}
