//! Exact nearest-neighbour search: what the SQLite store uses with no vector index, and the
//! ground truth the approximate indexes are measured against.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Dot product written so the compiler vectorises it (eight independent accumulators).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (a8, a_rest) = a.split_at(a.len() - a.len() % 8);
    let (b8, b_rest) = b.split_at(b.len() - b.len() % 8);
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// `v` scaled to unit length (unchanged if zero).
pub fn normalized(v: &[f32]) -> Vec<f32> {
    let norm = dot(v, v).sqrt();
    if norm == 0.0 {
        v.to_vec()
    } else {
        v.iter().map(|x| x / norm).collect()
    }
}

/// Cosine similarity of a unit-length `query` with `candidate` (of any length).
pub fn cosine_to_unit(query: &[f32], candidate: &[f32]) -> f32 {
    let norm = dot(candidate, candidate).sqrt();
    if norm == 0.0 {
        0.0
    } else {
        dot(query, candidate) / norm
    }
}

#[derive(Debug, PartialEq)]
struct Scored<K>(f32, K);

impl<K: PartialEq> Eq for Scored<K> {}

impl<K: PartialEq + Ord> PartialOrd for Scored<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: PartialEq + Ord> Ord for Scored<K> {
    /// Reversed, so a `BinaryHeap` keeps the worst of the best on top; ties prefer larger keys
    /// (newer rows).
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .total_cmp(&self.0)
            .then(self.1.cmp(&other.1).reverse())
    }
}

/// Keeps the `k` best-scoring keys seen, best first.
#[derive(Debug)]
pub struct TopK<K> {
    k: usize,
    heap: BinaryHeap<Scored<K>>,
    seen: usize,
}

impl<K: PartialEq + Ord + Copy> TopK<K> {
    /// Room for `k` results.
    pub fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k.saturating_add(1).min(4_096)),
            seen: 0,
        }
    }

    /// Offers one candidate.
    pub fn push(&mut self, score: f32, key: K) {
        self.seen += 1;
        if self.k == 0 {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(Scored(score, key));
        } else if let Some(worst) = self.heap.peek()
            && Scored(score, key) < *worst
        {
            self.heap.pop();
            self.heap.push(Scored(score, key));
        }
    }

    /// The worst score among the best `k` once `k` are held (`None` before): a candidate must
    /// beat it to enter, so a pruned search may skip whatever cannot.
    pub fn threshold(&self) -> Option<f32> {
        match self.heap.peek() {
            Some(Scored(worst, _)) if self.heap.len() >= self.k => Some(*worst),
            _ => None,
        }
    }

    /// How many candidates were offered.
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// The best `k`, best first (ties: larger key first).
    pub fn into_sorted(self) -> Vec<(f32, K)> {
        let mut out: Vec<(f32, K)> = self.heap.into_iter().map(|Scored(s, k)| (s, k)).collect();
        out.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_the_naive_sum() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.1).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.05).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
    }

    #[test]
    fn top_k_keeps_the_best_in_order() {
        let mut top = TopK::new(3);
        for (score, key) in [(0.1, 1), (0.9, 2)] {
            top.push(score, key);
        }
        assert_eq!(top.threshold(), None, "not full yet");
        for (score, key) in [(0.5, 3), (0.9, 4), (0.2, 5)] {
            top.push(score, key);
        }
        assert_eq!(top.threshold(), Some(0.5), "the worst of the best three");
        assert_eq!(top.seen(), 5);
        assert_eq!(top.into_sorted(), vec![(0.9, 4), (0.9, 2), (0.5, 3)]);
    }

    #[test]
    fn cosine_ignores_candidate_length() {
        let q = normalized(&[1.0, 1.0]);
        assert!((cosine_to_unit(&q, &[3.0, 3.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine_to_unit(&q, &[0.0, 0.0]), 0.0);
    }
}
