//! A transformer encoder (BERT and MPNet checkpoints) run on packed tokens.
//!
//! The sequences of a batch are laid end to end as the rows of one matrix, so the dense layers
//! (query/key/value, output, feed-forward), which act on each token alone, are a few large
//! matrix products with no padding at all; only attention looks across tokens, and it runs per
//! sequence and head, in parallel. Bias, residual, GELU and layer norm are fused into the passes
//! around the products. The result is mean-pooled over each sequence's tokens and L2-normalised,
//! as sentence-transformers does for these models.

use std::path::Path;

use gemm::Parallelism;
use rayon::prelude::*;
use safetensors::SafeTensors;

use super::bf16::{self, PackedWeights};
use super::kernels::{RowKernels, Side, View, ViewMut, matmul, row_kernels};

/// Which transformer a checkpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Architecture {
    /// BERT (all-MiniLM-L6-v2 and other BERT sentence encoders): absolute positions from 0,
    /// token type 0.
    Bert,
    /// MPNet (all-mpnet-base-v2): absolute positions from `pad_token_id + 1`, plus a learned
    /// bias per head and relative-position bucket added to the attention scores.
    MpNet,
}

/// The shape of an encoder, from the checkpoint's `config.json`.
#[derive(Clone, Debug, serde::Deserialize)]
pub(super) struct EncoderConfig {
    pub(super) model_type: Option<String>,
    pub(super) hidden_size: usize,
    pub(super) num_attention_heads: usize,
    pub(super) num_hidden_layers: usize,
    pub(super) intermediate_size: usize,
    pub(super) max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub(super) layer_norm_eps: f32,
    #[serde(default)]
    pub(super) pad_token_id: usize,
    #[serde(default)]
    pub(super) hidden_act: Option<String>,
    #[serde(default = "default_buckets")]
    pub(super) relative_attention_num_buckets: usize,
}

fn default_eps() -> f32 {
    1e-12
}

fn default_buckets() -> usize {
    32
}

impl EncoderConfig {
    pub(super) fn architecture(&self) -> Result<Architecture, String> {
        match self.model_type.as_deref() {
            Some("mpnet") => Ok(Architecture::MpNet),
            Some("bert") | None => Ok(Architecture::Bert),
            Some(other) => Err(format!(
                "model_type {other:?} is not supported (bert and mpnet are)"
            )),
        }
    }

    /// How many tokens (specials included) a sequence may have.
    pub(super) fn max_positions(&self) -> usize {
        match self.architecture() {
            Ok(Architecture::MpNet) => self
                .max_position_embeddings
                .saturating_sub(self.pad_token_id + 1),
            _ => self.max_position_embeddings,
        }
    }
}

/// `x · W + b` with `W` stored transposed (`input x output`, row-major), or packed for the
/// bf16 kernel (then `weight` is empty).
struct Linear {
    weight: Vec<f32>,
    packed: Option<PackedWeights>,
    bias: Vec<f32>,
    input: usize,
    output: usize,
}

impl Linear {
    /// Packs the weights for the bf16 kernel (and drops the f32 copy) when `bf16` is set and
    /// the shape allows.
    fn prepare(mut self, bf16: bool) -> Self {
        if bf16 && let Some(packed) = PackedWeights::pack(&self.weight, self.input, self.output) {
            self.packed = Some(packed);
            self.weight = Vec::new();
        }
        self
    }
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    /// Query, key and value in one product (`hidden -> 3 hidden`).
    qkv: Linear,
    out: Linear,
    attention_norm: Norm,
    up: Linear,
    down: Linear,
    output_norm: Norm,
}

/// MPNet's relative position bias: `bias[bucket * heads + head]`, and the bucket of every
/// relative position `j - i` in `-(max-1)..=(max-1)` at `buckets[j - i + max - 1]`.
struct RelativeBias {
    bias: Vec<f32>,
    buckets: Vec<usize>,
    max: usize,
}

/// A loaded encoder (see the [module docs](self)).
pub(super) struct Encoder {
    architecture: Architecture,
    hidden: usize,
    heads: usize,
    eps: f32,
    max_positions: usize,
    position_offset: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    /// Token type 0's embedding (BERT), added to every token.
    token_type: Option<Vec<f32>>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    relative: Option<RelativeBias>,
    kernels: RowKernels,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("architecture", &self.architecture)
            .field("hidden", &self.hidden)
            .field("layers", &self.layers.len())
            .finish_non_exhaustive()
    }
}

/// The tensors of a checkpoint, by name, as f32.
struct Tensors<'a> {
    inner: SafeTensors<'a>,
    /// `bert.` and similar prefixes some checkpoints put before every name.
    prefix: String,
}

impl Tensors<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .inner
            .tensor(&full)
            .map_err(|_| format!("the weights have no tensor {full}"))?;
        if view.shape() != shape {
            return Err(format!(
                "{full} has shape {:?}, expected {shape:?}",
                view.shape()
            ));
        }
        let bytes = view.data();
        match view.dtype() {
            safetensors::Dtype::F32 => Ok(bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()),
            safetensors::Dtype::F16 => Ok(bytes
                .chunks_exact(2)
                .map(|b| half_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect()),
            safetensors::Dtype::BF16 => Ok(bytes
                .chunks_exact(2)
                .map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16))
                .collect()),
            other => Err(format!("{full} is {other:?}; f32, f16 or bf16 expected")),
        }
    }

    /// A linear layer stored as PyTorch does (`weight` is `output x input`), transposed.
    fn linear(&self, name: &str, input: usize, output: usize) -> Result<Linear, String> {
        let weight = self.get(&format!("{name}.weight"), &[output, input])?;
        let bias = self.get(&format!("{name}.bias"), &[output])?;
        Ok(Linear {
            weight: transpose(&weight, output, input),
            packed: None,
            bias,
            input,
            output,
        })
    }

    /// Several linear layers of one input side by side, as one.
    fn fused(&self, names: &[&str], input: usize, output: usize) -> Result<Linear, String> {
        let parts: Vec<Linear> = names
            .iter()
            .map(|n| self.linear(n, input, output))
            .collect::<Result<_, _>>()?;
        let total = output * parts.len();
        let mut weight = vec![0f32; input * total];
        for (p, part) in parts.iter().enumerate() {
            for row in 0..input {
                weight[row * total + p * output..row * total + (p + 1) * output]
                    .copy_from_slice(&part.weight[row * output..(row + 1) * output]);
            }
        }
        Ok(Linear {
            weight,
            packed: None,
            bias: parts.iter().flat_map(|p| p.bias.iter().copied()).collect(),
            input,
            output: total,
        })
    }

    fn norm(&self, name: &str, size: usize) -> Result<Norm, String> {
        let (w, b) = if self.has(&format!("{name}.gamma")) {
            ("gamma", "beta")
        } else {
            ("weight", "bias")
        };
        Ok(Norm {
            weight: self.get(&format!("{name}.{w}"), &[size])?,
            bias: self.get(&format!("{name}.{b}"), &[size])?,
        })
    }

    fn has(&self, name: &str) -> bool {
        self.inner.tensor(&format!("{}{name}", self.prefix)).is_ok()
    }
}

fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; m.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = m[r * cols + c];
        }
    }
    t
}

fn half_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // subnormal: normalise
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// MPNet's (and T5's) bucketing of a relative position `j - i`: 16 buckets per direction, the
/// first 8 exact, the rest logarithmic up to `max_distance`.
pub(super) fn relative_position_bucket(
    relative: i64,
    buckets: usize,
    max_distance: usize,
) -> usize {
    let half = (buckets / 2) as i64;
    let n = -relative;
    let mut bucket = if n < 0 { half } else { 0 };
    let n = n.abs();
    let max_exact = half / 2;
    if n < max_exact {
        bucket += n;
    } else {
        let large = max_exact
            + ((n as f32 / max_exact as f32).ln() / (max_distance as f32 / max_exact as f32).ln()
                * (half - max_exact) as f32) as i64;
        bucket += large.min(half - 1);
    }
    bucket as usize
}

impl Encoder {
    /// Loads the weights in `path` for `config`; `bf16` runs the large products in bfloat16
    /// (the caller checked that the CPU can).
    pub(super) fn load(path: &Path, config: &EncoderConfig, bf16: bool) -> Result<Self, String> {
        let architecture = config.architecture()?;
        if let Some(act) = config.hidden_act.as_deref()
            && act != "gelu"
        {
            return Err(format!("hidden_act {act:?} is not supported (gelu is)"));
        }
        let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        // SAFETY: the weights file is memory-mapped read-only while the tensors are copied out
        // below; like every mmap it must not be truncated meanwhile, which the model cache never
        // does (files are replaced by rename, never rewritten in place).
        let mmap = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| e.to_string())?;
        let inner = SafeTensors::deserialize(&mmap).map_err(|e| e.to_string())?;
        let prefix = ["", "bert.", "mpnet.", "model."]
            .into_iter()
            .find(|p| {
                inner
                    .tensor(&format!("{p}embeddings.word_embeddings.weight"))
                    .is_ok()
            })
            .ok_or("the weights have no embeddings.word_embeddings.weight")?
            .to_owned();
        let t = Tensors { inner, prefix };
        let hidden = config.hidden_size;
        let heads = config.num_attention_heads;
        if heads == 0 || !hidden.is_multiple_of(heads) {
            return Err(format!(
                "{hidden} hidden units do not split into {heads} heads"
            ));
        }
        let vocab = t
            .inner
            .tensor(&format!("{}embeddings.word_embeddings.weight", t.prefix))
            .map_err(|e| e.to_string())?
            .shape()
            .first()
            .copied()
            .unwrap_or(0);
        let word = t.get("embeddings.word_embeddings.weight", &[vocab, hidden])?;
        let position = t.get(
            "embeddings.position_embeddings.weight",
            &[config.max_position_embeddings, hidden],
        )?;
        let token_type = if t.has("embeddings.token_type_embeddings.weight") {
            let rows = t
                .inner
                .tensor(&format!(
                    "{}embeddings.token_type_embeddings.weight",
                    t.prefix
                ))
                .map_err(|e| e.to_string())?
                .shape()[0];
            let all = t.get("embeddings.token_type_embeddings.weight", &[rows, hidden])?;
            Some(all[..hidden].to_vec())
        } else {
            None
        };
        let embedding_norm = t.norm("embeddings.LayerNorm", hidden)?;
        let inter = config.intermediate_size;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let layer = match architecture {
                Architecture::Bert => Layer {
                    qkv: t.fused(
                        &[
                            &format!("{p}.attention.self.query"),
                            &format!("{p}.attention.self.key"),
                            &format!("{p}.attention.self.value"),
                        ],
                        hidden,
                        hidden,
                    )?,
                    out: t.linear(&format!("{p}.attention.output.dense"), hidden, hidden)?,
                    attention_norm: t.norm(&format!("{p}.attention.output.LayerNorm"), hidden)?,
                    up: t.linear(&format!("{p}.intermediate.dense"), hidden, inter)?,
                    down: t.linear(&format!("{p}.output.dense"), inter, hidden)?,
                    output_norm: t.norm(&format!("{p}.output.LayerNorm"), hidden)?,
                },
                Architecture::MpNet => Layer {
                    qkv: t.fused(
                        &[
                            &format!("{p}.attention.attn.q"),
                            &format!("{p}.attention.attn.k"),
                            &format!("{p}.attention.attn.v"),
                        ],
                        hidden,
                        hidden,
                    )?,
                    out: t.linear(&format!("{p}.attention.attn.o"), hidden, hidden)?,
                    attention_norm: t.norm(&format!("{p}.attention.LayerNorm"), hidden)?,
                    up: t.linear(&format!("{p}.intermediate.dense"), hidden, inter)?,
                    down: t.linear(&format!("{p}.output.dense"), inter, hidden)?,
                    output_norm: t.norm(&format!("{p}.output.LayerNorm"), hidden)?,
                },
            };
            layers.push(Layer {
                qkv: layer.qkv.prepare(bf16),
                out: layer.out.prepare(bf16),
                up: layer.up.prepare(bf16),
                down: layer.down.prepare(bf16),
                ..layer
            });
        }
        let max_positions = config.max_positions();
        let (position_offset, relative) = match architecture {
            Architecture::Bert => (0, None),
            Architecture::MpNet => {
                let buckets = config.relative_attention_num_buckets;
                let bias = t.get("encoder.relative_attention_bias.weight", &[buckets, heads])?;
                let max = max_positions;
                let table = (0..2 * max - 1)
                    .map(|d| relative_position_bucket(d as i64 - (max as i64 - 1), buckets, 128))
                    .collect();
                (
                    config.pad_token_id + 1,
                    Some(RelativeBias {
                        bias,
                        buckets: table,
                        max,
                    }),
                )
            }
        };
        Ok(Self {
            architecture,
            hidden,
            heads,
            eps: config.layer_norm_eps,
            max_positions,
            position_offset,
            word,
            position,
            token_type,
            embedding_norm,
            layers,
            relative,
            kernels: row_kernels(),
        })
    }

    /// The embedding dimension.
    pub(super) fn hidden(&self) -> usize {
        self.hidden
    }

    /// The most tokens (specials included) one sequence may have.
    pub(super) fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Mean-pooled, L2-normalised embeddings of token sequences (each with its special tokens,
    /// at most [`Encoder::max_positions`] long, ids below the vocabulary size).
    pub(super) fn embed(&self, sequences: &[&[u32]]) -> Result<Vec<Vec<f32>>, String> {
        let vocab = self.word.len() / self.hidden;
        for s in sequences {
            if s.is_empty() || s.len() > self.max_positions {
                return Err(format!(
                    "a sequence of {} tokens (1 to {} allowed)",
                    s.len(),
                    self.max_positions
                ));
            }
            if let Some(id) = s.iter().find(|&&id| id as usize >= vocab) {
                return Err(format!("token id {id} outside the vocabulary of {vocab}"));
            }
        }
        let mut starts = Vec::with_capacity(sequences.len());
        let mut total = 0;
        for s in sequences {
            starts.push(total);
            total += s.len();
        }
        let h = self.hidden;
        let mut x = vec![0f32; total * h];
        self.embed_tokens(sequences, &starts, &mut x);
        let inter = self.layers.first().map_or(0, |l| l.up.output);
        let mut qkv = vec![0f32; total * 3 * h];
        let mut ctx = vec![0f32; total * h];
        let mut up = vec![0f32; total * inter];
        for layer in &self.layers {
            // Attention block: x = norm(x + attention(x) · Wo + bo).
            linear(&mut qkv, &x, &layer.qkv, None, total);
            self.attention(&qkv, &mut ctx, sequences, &starts);
            let residual = x.clone();
            linear(&mut x, &ctx, &layer.out, Some(&residual), total);
            self.norm_rows(&mut x, &layer.attention_norm);
            // Feed-forward block: x = norm(x + gelu(x · W1 + b1) · W2 + b2).
            linear(&mut up, &x, &layer.up, None, total);
            let gelu = self.kernels.gelu;
            up.par_chunks_mut(inter * 16).for_each(gelu);
            let residual = x.clone();
            linear(&mut x, &up, &layer.down, Some(&residual), total);
            self.norm_rows(&mut x, &layer.output_norm);
        }
        Ok(sequences
            .iter()
            .zip(&starts)
            .map(|(s, &start)| {
                let mut mean = vec![0f32; h];
                for row in x[start * h..(start + s.len()) * h].chunks_exact(h) {
                    for (m, v) in mean.iter_mut().zip(row) {
                        *m += v;
                    }
                }
                let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                // Mean then unit length: the mean's 1/len cancels in the normalisation.
                mean.iter_mut().for_each(|v| *v /= norm);
                mean
            })
            .collect())
    }

    fn embed_tokens(&self, sequences: &[&[u32]], starts: &[usize], x: &mut [f32]) {
        let h = self.hidden;
        for (s, &start) in sequences.iter().zip(starts) {
            for (i, &id) in s.iter().enumerate() {
                let row = &mut x[(start + i) * h..(start + i + 1) * h];
                let word = &self.word[id as usize * h..(id as usize + 1) * h];
                let p = self.position_offset + i;
                let position = &self.position[p * h..(p + 1) * h];
                for ((r, w), q) in row.iter_mut().zip(word).zip(position) {
                    *r = w + q;
                }
                if let Some(tt) = &self.token_type {
                    row.iter_mut().zip(tt).for_each(|(r, t)| *r += t);
                }
            }
        }
        self.norm_rows(x, &self.embedding_norm);
    }

    fn norm_rows(&self, x: &mut [f32], norm: &Norm) {
        let (h, eps, layer_norm) = (self.hidden, self.eps, self.kernels.layer_norm);
        x.par_chunks_mut(h * 32).for_each(|rows| {
            for row in rows.chunks_exact_mut(h) {
                layer_norm(row, &norm.weight, &norm.bias, eps);
            }
        });
    }

    /// Scaled dot-product attention of every head of every sequence, `qkv` holding each token's
    /// query, key and value side by side; the heads' outputs go to `ctx` side by side.
    fn attention(&self, qkv: &[f32], ctx: &mut [f32], sequences: &[&[u32]], starts: &[usize]) {
        let h = self.hidden;
        let d = h / self.heads;
        let heads = self.heads;
        let scale = 1.0 / (d as f32).sqrt();
        let softmax = self.kernels.softmax;
        let ctx_ptr = ViewMut {
            ptr: ctx.as_mut_ptr(),
            rows: ctx.len() / h,
            cols: h,
            stride: h,
        };
        let jobs: Vec<(usize, usize)> = (0..sequences.len())
            .flat_map(|s| (0..heads).map(move |head| (s, head)))
            .collect();
        jobs.par_iter()
            .for_each_init(Vec::new, |scores, &(s, head)| {
                let len = sequences[s].len();
                let row = starts[s];
                scores.resize(len * len, 0.0);
                let q = View {
                    // SAFETY (all three): rows row..row+len of qkv exist; columns are in range.
                    ptr: unsafe { qkv.as_ptr().add(row * 3 * h + head * d) },
                    rows: len,
                    cols: d,
                    stride: 3 * h,
                };
                let k = View {
                    ptr: unsafe { qkv.as_ptr().add(row * 3 * h + h + head * d) },
                    rows: len,
                    cols: d,
                    stride: 3 * h,
                };
                let v = View {
                    ptr: unsafe { qkv.as_ptr().add(row * 3 * h + 2 * h + head * d) },
                    rows: len,
                    cols: d,
                    stride: 3 * h,
                };
                let s_view = ViewMut {
                    ptr: scores.as_mut_ptr(),
                    rows: len,
                    cols: len,
                    stride: len,
                };
                // SAFETY: `scores` is this job's own buffer of len x len; q, k are in qkv.
                unsafe {
                    matmul(
                        s_view,
                        q,
                        k,
                        Side::Transposed,
                        scale,
                        false,
                        Parallelism::None,
                    );
                }
                for (i, srow) in scores.chunks_exact_mut(len).enumerate() {
                    if let Some(rel) = &self.relative {
                        for (j, x) in srow.iter_mut().enumerate() {
                            let bucket = rel.buckets[j + rel.max - 1 - i];
                            *x += rel.bias[bucket * heads + head];
                        }
                    }
                    softmax(srow);
                }
                // SAFETY: each job writes only its own sequence's rows and head's columns.
                let out = unsafe { ctx_ptr.block(row, head * d, len, d) };
                let p = View {
                    ptr: scores.as_ptr(),
                    rows: len,
                    cols: len,
                    stride: len,
                };
                // SAFETY: as above; `out` is disjoint from every other job's.
                unsafe { matmul(out, p, v, Side::Plain, 1.0, false, Parallelism::None) };
            });
    }
}

/// `dst = x · W + b` (+ `residual`), over `rows` token rows, on every thread.
fn linear(dst: &mut [f32], x: &[f32], layer: &Linear, residual: Option<&[f32]>, rows: usize) {
    let n = layer.output;
    for (r, row) in dst[..rows * n].chunks_exact_mut(n).enumerate() {
        row.copy_from_slice(&layer.bias);
        if let Some(res) = residual {
            row.iter_mut()
                .zip(&res[r * n..(r + 1) * n])
                .for_each(|(d, x)| *d += x);
        }
    }
    if let Some(packed) = &layer.packed {
        bf16::matmul_add(dst, n, x, layer.input, rows, packed);
        return;
    }
    let threads = rayon::current_num_threads();
    let parallelism = if threads > 1 && rows * n * layer.input > 1 << 20 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    // SAFETY: dst holds rows x n, x rows x input, the weight input x n; dst is its own buffer.
    unsafe {
        matmul(
            ViewMut {
                ptr: dst.as_mut_ptr(),
                rows,
                cols: n,
                stride: n,
            },
            View {
                ptr: x.as_ptr(),
                rows,
                cols: layer.input,
                stride: layer.input,
            },
            View {
                ptr: layer.weight.as_ptr(),
                rows: layer.input,
                cols: n,
                stride: n,
            },
            Side::Plain,
            1.0,
            true,
            parallelism,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_buckets_follow_mpnet() {
        // Values of transformers' MPNetEncoder.relative_position_bucket(num_buckets=32,
        // max_distance=128) for j - i in these positions.
        let cases = [
            (0, 0),
            (-1, 1),
            (-7, 7),
            (-8, 8),
            (-12, 9),
            (-16, 10),
            (-32, 12),
            (-64, 14),
            (-127, 15),
            (-500, 15),
            (1, 17),
            (7, 23),
            (8, 24),
            (16, 26),
            (128, 31),
            (500, 31),
        ];
        for (relative, bucket) in cases {
            assert_eq!(
                relative_position_bucket(relative, 32, 128),
                bucket,
                "relative position {relative}"
            );
        }
    }

    #[test]
    fn halves_convert() {
        assert_eq!(half_to_f32(0x3c00), 1.0);
        assert_eq!(half_to_f32(0xc000), -2.0);
        assert_eq!(half_to_f32(0x0000), 0.0);
        assert_eq!(half_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(half_to_f32(0x7bff), 65504.0);
    }
}
