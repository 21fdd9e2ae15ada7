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
    /// Keys of the cached positions, `[kv_heads, capacity, head_dim]`: the first
    /// [`Llama::cached`] positions are valid. Grown by doubling, written in place.
    keys: Option<Tensor>,
    /// Values, laid out as the keys.
    values: Option<Tensor>,
}

/// Writes `new` (`[kv_heads, n, head_dim]`) at position `len` of `buffer`, growing it when
/// full, and returns the valid part (a view: no copy of the cached positions).
fn append(
    buffer: &mut Option<Tensor>,
    new: &Tensor,
    len: usize,
    limit: usize,
) -> candle_core::Result<Tensor> {
    let (kv_heads, n, head_dim) = new.dims3()?;
    let needed = len + n;
    let capacity = buffer.as_ref().map_or(0, |b| b.dims()[1]);
    let target = match buffer.take() {
        Some(b) if capacity >= needed => b,
        old => {
            let grown = Tensor::zeros(
                (
                    kv_heads,
                    (capacity * 2).max(needed).max(256).min(limit.max(needed)),
                    head_dim,
                ),
                DType::F32,
                &Device::Cpu,
            )?;
            if let (Some(old), true) = (old, len > 0) {
                grown.slice_set(&old.narrow(1, 0, len)?.contiguous()?, 1, 0)?;
            }
            grown
        }
    };
    target.slice_set(new, 1, len)?;
    let valid = target.narrow(1, 0, needed)?;
    *buffer = Some(target);
    Ok(valid)
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
    /// While recording ([`Llama::record_attention`]): for each position, the attention the
    /// recorded queries paid it, summed over queries, layers and heads.
    attention: Option<Vec<f32>>,
    /// Queries recorded.
    recorded: usize,
}

/// A GGUF metadata value as a number, whatever its integer or float type.
pub(super) fn numeric(value: &Value) -> Option<f64> {
    Some(match value {
        Value::U8(v) => f64::from(*v),
        Value::I8(v) => f64::from(*v),
        Value::U16(v) => f64::from(*v),
        Value::I16(v) => f64::from(*v),
        Value::U32(v) => f64::from(*v),
        Value::I32(v) => f64::from(*v),
        Value::U64(v) => *v as f64,
        Value::I64(v) => *v as f64,
        Value::F32(v) => f64::from(*v),
        Value::F64(v) => *v,
        _ => return None,
    })
}

/// A GGUF metadata value that must be a count or an id: a whole number in `u32`'s range.
pub(super) fn whole(value: &Value) -> Option<u32> {
    numeric(value)
        .filter(|n| n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(n))
        .map(|n| n as u32)
}

fn number(content: &Content, key: &str) -> Result<f64, String> {
    match content.metadata.get(key) {
        Some(value) => numeric(value).ok_or_else(|| format!("`{key}` is not a number: {value:?}")),
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
        let embeddings = token_embeddings.dequantize(&device).map_err(failed)?;
        let output = if content.tensor_infos.contains_key("output.weight") {
            matmul(tensor("output.weight")?)?
        } else {
            // Tied embeddings: the output projection is the embedding table.
            matmul(token_embeddings)?
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
                keys: None,
                values: None,
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
            attention: None,
            recorded: 0,
        })
    }

    /// Starts recording where the last query of each following forward pass attends (the
    /// query whose logits pick the next token), or stops and forgets.
    pub(crate) fn record_attention(&mut self, on: bool) {
        self.attention = on.then(Vec::new);
        self.recorded = 0;
    }

    /// What was recorded, and stops recording: for each position, the share of attention it
    /// received, averaged over the recorded queries, the layers and the heads (so the shares
    /// of one query sum to 1 over the positions it saw). `None` when nothing was recorded.
    pub(crate) fn take_attention(&mut self) -> Option<Vec<f32>> {
        let sums = self.attention.take()?;
        let queries = std::mem::take(&mut self.recorded);
        if queries == 0 {
            return None;
        }
        let scale = 1.0 / (queries * self.layers.len() * self.heads) as f32;
        Some(sums.into_iter().map(|s| s * scale).collect())
    }

    /// Keeps only the first `positions` cached positions (the next ones are overwritten).
    pub(crate) fn truncate(&mut self, positions: usize) {
        self.cached = self.cached.min(positions);
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
                .reshape((n, kv_heads, head_dim))?
                .transpose(0, 1)?
                .contiguous()?;
            let q = candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?;
            let k = candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?.squeeze(0)?;
            let k = append(&mut layer.keys, &k, start, self.max_positions)?;
            let v = append(&mut layer.values, &v, start, self.max_positions)?;
            // Grouped-query attention: each key/value head serves heads / kv_heads queries.
            let group = heads / kv_heads;
            let q = q.reshape((kv_heads, group * n, head_dim))?;
            let mut scores = (q.matmul(&k.t()?)? * scale)?;
            if let Some(mask) = &mask {
                scores = scores
                    .reshape((kv_heads, group, n, start + n))?
                    .broadcast_add(mask)?
                    .reshape((kv_heads, group * n, start + n))?;
            }
            let weights = candle_nn::ops::softmax_last_dim(&scores)?;
            if let Some(sums) = self.attention.as_mut() {
                // The last query's weights over every key position, for each head.
                let last = weights
                    .reshape((kv_heads, group, n, start + n))?
                    .narrow(2, n - 1, 1)?
                    .contiguous()?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                if sums.len() < start + n {
                    sums.resize(start + n, 0.0);
                }
                for (i, w) in last.iter().enumerate() {
                    sums[i % (start + n)] += w;
                }
            }
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
        if self.attention.is_some() {
            self.recorded += 1;
        }
        let last = x.narrow(1, n - 1, 1)?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, self.eps as f32)?;
        let logits = self.output.forward(&last)?;
        logits.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argmax(v: &[f32]) -> usize {
        (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm(a) * norm(b))
    }

    /// The cache is right: a prompt run at once, in pieces (one token at a time past the
    /// first growth of the cache), or after cutting the cache back and running another ending
    /// first, predicts the same. Activations are quantized to 8 bits in every matrix product,
    /// so runs in different batch shapes round differently and the logits agree closely rather
    /// than bit for bit; a wrong cache or mask gives a different distribution altogether.
    #[test]
    #[ignore = "needs SmolLM2: set MEMGPT_TEST_MODELS to the model cache .ci/models.sh fills, and run with --ignored (.ci/run does)"]
    fn cached_prefixes_predict_like_a_fresh_run() {
        let path = super::super::test_model();
        let mut file = std::fs::File::open(&path).unwrap();
        let content = Content::read(&mut file).unwrap();
        let mut model = Llama::load(&content, &mut file, 1024).unwrap();
        let tokens: Vec<u32> = (0..300u32).map(|i| 100 + (i * 7919) % 40_000).collect();
        let whole = model.forward(&tokens).unwrap();
        assert_eq!(whole.len(), 49_152);
        let same =
            |other: &[f32]| argmax(other) == argmax(&whole) && cosine(other, &whole) > 0.9999;

        model.truncate(0);
        model.forward(&tokens[..200]).unwrap();
        let mut stepwise = Vec::new();
        for t in &tokens[200..] {
            stepwise = model.forward(std::slice::from_ref(t)).unwrap();
        }
        eprintln!("stepwise: cosine {}", cosine(&stepwise, &whole));
        assert!(same(&stepwise));

        model.truncate(250);
        let other = model.forward(&[5, 6, 7]).unwrap();
        eprintln!("other ending: cosine {}", cosine(&other, &whole));
        assert!(!same(&other), "another ending predicts something else");
        model.truncate(250);
        let again = model.forward(&tokens[250..]).unwrap();
        eprintln!("again: cosine {}", cosine(&again, &whole));
        assert!(same(&again));

        // Changing later tokens changes nothing before them (the mask is causal).
        model.truncate(0);
        let first = model.forward(&tokens[..100]).unwrap();
        model.truncate(0);
        let mut changed = tokens[..150].to_vec();
        changed[100..].fill(42);
        model.forward(&changed).unwrap();
        model.truncate(99);
        let seen = model.forward(&tokens[99..100]).unwrap();
        eprintln!("causal: cosine {}", cosine(&seen, &first));
        assert!(argmax(&seen) == argmax(&first) && cosine(&seen, &first) > 0.9999);

        assert!(
            model.forward(&[1; 1024]).is_err(),
            "past the window: an error"
        );
    }
}
