//! The benchmark's vector datasets, and the statistics that compare them with real embeddings.
//!
//! Two datasets, both deterministic for a seed:
//!
//! - **clustered** (the default): points around 1,000 random centres with per-dimension noise
//!   of 0.06, whose norm (about 1.2) exceeds the centre's. Inside a cluster the points are
//!   spread almost uniformly over a 384-d cap, so the true neighbours are barely closer than
//!   the rest of the cluster: a worst case for graph indexes, far from how text embeddings lie.
//! - **real** (`--vectors DIR`): grown from real all-MiniLM-L6-v2 embeddings of the shared data
//!   (`cargo run --release --example eval -- embeddings` writes them). Each synthetic base point
//!   is a real passage vector moved up to halfway towards one of its ten nearest real
//!   neighbours, plus isotropic noise of norm 0.5, normalised; the queries are the real
//!   question vectors. So the base follows the real embeddings' manifold (densified, with
//!   noise making it a little harder than the real data at the same size, see `--calibrate`),
//!   and the queries are real.

use std::io::Read;
use std::path::Path;

use memgpt_backends::vector::{TopK, dot, normalized};

pub const DIM: usize = 384;

/// xorshift64*: deterministic, dependency-free.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn normal(&mut self) -> f32 {
        let (u1, u2) = (self.unit().max(1e-7), self.unit());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Base vectors and query vectors, all of unit length.
pub struct Dataset {
    pub name: &'static str,
    pub base: Vec<Vec<f32>>,
    pub queries: Vec<Vec<f32>>,
}

/// The clustered worst case: `n` base points and `queries` probes from the same clusters.
pub fn clustered(seed: u64, n: usize, queries: usize) -> Dataset {
    let mut rng = Rng(seed);
    let centres: Vec<Vec<f32>> = (0..1_000)
        .map(|_| normalized(&(0..DIM).map(|_| rng.normal()).collect::<Vec<_>>()))
        .collect();
    let sample = |rng: &mut Rng| {
        let c = &centres[rng.below(centres.len())];
        normalized(
            &c.iter()
                .map(|x| x + 0.06 * rng.normal())
                .collect::<Vec<_>>(),
        )
    };
    let base = (0..n).map(|_| sample(&mut rng)).collect();
    let queries = (0..queries).map(|_| sample(&mut rng)).collect();
    Dataset {
        name: "clustered",
        base,
        queries,
    }
}

/// How far a synthetic point moves towards a neighbour of its anchor, at most.
const MAX_STEP: f32 = 0.5;
/// Norm of the isotropic noise added to each synthetic point.
const NOISE: f32 = 0.5;
/// Neighbours per anchor a synthetic point may move towards.
const NEIGHBOURS: usize = 10;

/// `n` points grown from the real `anchors` (see the module docs), with `queries` real query
/// vectors drawn (seeded) from `real_queries`.
pub fn grown(
    seed: u64,
    anchors: &[Vec<f32>],
    real_queries: &[Vec<f32>],
    n: usize,
    queries: usize,
) -> Dataset {
    let mut rng = Rng(seed);
    let neighbours = nearest_among(anchors, NEIGHBOURS);
    let scale = NOISE / (DIM as f32).sqrt();
    let base = (0..n)
        .map(|_| {
            let i = rng.below(anchors.len());
            let j = neighbours[i][rng.below(neighbours[i].len())];
            let t = MAX_STEP * rng.unit();
            let v: Vec<f32> = anchors[i]
                .iter()
                .zip(&anchors[j])
                .map(|(a, b)| (1.0 - t) * a + t * b + scale * rng.normal())
                .collect();
            normalized(&v)
        })
        .collect();
    Dataset {
        name: "real-grown",
        base,
        queries: pick(&mut rng, real_queries, queries),
    }
}

/// `count` distinct items of `from` (all of them if there are fewer), in a seeded order.
pub fn pick(rng: &mut Rng, from: &[Vec<f32>], count: usize) -> Vec<Vec<f32>> {
    let mut order: Vec<usize> = (0..from.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order
        .into_iter()
        .take(count)
        .map(|i| from[i].clone())
        .collect()
}

/// The `k` vectors of `base` most similar to `query`, as (cosine, position), best first
/// (brute force; ties: later position first).
fn nearest(query: &[f32], base: &[Vec<f32>], k: usize) -> Vec<(f32, usize)> {
    let mut top = TopK::new(k);
    for (i, v) in base.iter().enumerate() {
        top.push(dot(query, v), i);
    }
    top.into_sorted()
}

/// For each vector, the indexes of its `k` nearest others.
fn nearest_among(vectors: &[Vec<f32>], k: usize) -> Vec<Vec<usize>> {
    vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            nearest(v, vectors, k + 1)
                .into_iter()
                .map(|(_, j)| j)
                .filter(|j| *j != i)
                .take(k)
                .collect()
        })
        .collect()
}

/// The exact `k` nearest base vectors of each query (by position), best first.
pub fn ground_truth(dataset: &Dataset, k: usize) -> Vec<Vec<usize>> {
    dataset
        .queries
        .iter()
        .map(|q| {
            nearest(q, &dataset.base, k)
                .into_iter()
                .map(|(_, i)| i)
                .collect()
        })
        .collect()
}

/// Neighbourhood statistics of a dataset, averaged over its queries.
pub struct Shape {
    /// Median local intrinsic dimensionality (Levina-Bickel maximum likelihood, k = 20).
    pub lid: f64,
    /// Mean cosine similarity of the nearest base vector.
    pub top1: f64,
    /// Mean cosine similarity of the tenth nearest.
    pub top10: f64,
}

/// The [`Shape`] of `dataset`.
pub fn shape(dataset: &Dataset) -> Shape {
    const K: usize = 20;
    let mut lids = Vec::with_capacity(dataset.queries.len());
    let (mut top1, mut top10) = (0.0, 0.0);
    for q in &dataset.queries {
        let sims: Vec<f64> = nearest(q, &dataset.base, K)
            .into_iter()
            .map(|(s, _)| s as f64)
            .collect();
        top1 += sims[0];
        top10 += sims[9];
        // Euclidean distances between unit vectors.
        let d: Vec<f64> = sims
            .iter()
            .map(|s| (2.0 - 2.0 * s).max(1e-12).sqrt())
            .collect();
        let mean_log: f64 = d.iter().map(|x| (x / d[K - 1]).ln()).sum::<f64>() / K as f64;
        lids.push(-1.0 / mean_log.min(-1e-12));
    }
    lids.sort_by(f64::total_cmp);
    let n = dataset.queries.len() as f64;
    Shape {
        lid: lids[lids.len() / 2],
        top1: top1 / n,
        top10: top10 / n,
    }
}

/// Reads an `.fvecs` file (each vector: its dimension as a little-endian i32, then its floats),
/// normalising every vector.
pub fn read_fvecs(path: &Path) -> std::io::Result<Vec<Vec<f32>>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.read_to_end(&mut bytes)?;
    let mut out = Vec::new();
    let mut rest = bytes.as_slice();
    while rest.len() >= 4 {
        let dim = i32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let end = 4 + 4 * dim;
        if dim != DIM || rest.len() < end {
            return Err(std::io::Error::other(format!(
                "{}: expected {DIM}-d vectors, found a {dim}-d one or a torn file",
                path.display()
            )));
        }
        let v: Vec<f32> = rest[4..end]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.push(normalized(&v));
        rest = &rest[end..];
    }
    Ok(out)
}
