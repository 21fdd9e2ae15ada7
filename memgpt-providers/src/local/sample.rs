//! Choosing the next token: a repeat penalty, then greedy or temperature sampling (top-k,
//! top-p) among the tokens a predicate allows (the function-call grammar).
//!
//! The grammar is consulted as little as possible: greedy decoding examines candidates best
//! first and stops at the first allowed one; sampling draws from the unconstrained top-k/top-p
//! distribution and checks only the drawn token, falling back to sampling among the allowed
//! candidates when the grammar refuses it. Either way the grammar costs one check per token
//! when the model already writes what the grammar wants, and a scan only when it does not.

use std::cmp::Ordering;

/// Candidates sorted up front; the rest are sorted only if these are all refused.
const FIRST_CANDIDATES: usize = 64;
/// Top-k when sampling.
const TOP_K: usize = 40;
/// Top-p (nucleus) when sampling.
const TOP_P: f32 = 0.95;

/// Picks tokens for one generation.
pub(crate) struct Sampler {
    temperature: f32,
    repeat_last_n: usize,
    repeat_penalty: f32,
    state: u64,
    /// Token ids in the order they are examined, reused from token to token.
    order: Vec<u32>,
}

impl Sampler {
    /// `temperature` 0 is greedy (deterministic); `seed` fixes sampling otherwise.
    pub(crate) fn new(
        temperature: f32,
        seed: u32,
        repeat_last_n: usize,
        repeat_penalty: f32,
    ) -> Self {
        Self {
            temperature,
            repeat_last_n,
            repeat_penalty,
            state: u64::from(seed) ^ 0x9E37_79B9_7F4A_7C15,
            order: Vec::new(),
        }
    }

    /// The next token among those `allowed` accepts, or `None` when it accepts none.
    /// `recent`: the tokens generated so far (for the repeat penalty).
    pub(crate) fn pick(
        &mut self,
        logits: &mut [f32],
        recent: &[u32],
        mut allowed: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        if self.repeat_penalty > 1.0 && self.repeat_last_n > 0 {
            let mut seen: Vec<u32> = recent
                .iter()
                .rev()
                .take(self.repeat_last_n)
                .copied()
                .collect();
            seen.sort_unstable();
            seen.dedup();
            for id in seen {
                if let Some(l) = logits.get_mut(id as usize) {
                    *l = if *l > 0.0 {
                        *l / self.repeat_penalty
                    } else {
                        *l * self.repeat_penalty
                    };
                }
            }
        }
        let greedy = self.temperature <= 0.0;
        let wanted = if greedy { 1 } else { TOP_K };
        let by_logit = |a: &u32, b: &u32| {
            logits[*b as usize]
                .partial_cmp(&logits[*a as usize])
                .unwrap_or(Ordering::Equal)
        };
        let order = &mut self.order;
        order.clear();
        order.extend(0..logits.len() as u32);
        let mut sorted = FIRST_CANDIDATES.min(order.len());
        if sorted == 0 {
            return None;
        }
        order.select_nth_unstable_by(sorted - 1, by_logit);
        order[..sorted].sort_unstable_by(by_logit);
        if !greedy {
            // The fast path: draw as if there were no grammar, keep the draw if it is allowed.
            let free: Vec<u32> = order[..sorted]
                .iter()
                .copied()
                .filter(|&id| logits[id as usize].is_finite())
                .take(TOP_K)
                .collect();
            if let Some(id) = draw(self.temperature, &mut self.state, logits, &free)
                && allowed(id)
            {
                return Some(id);
            }
        }
        let mut chosen: Vec<u32> = Vec::with_capacity(wanted);
        let mut i = 0;
        while chosen.len() < wanted {
            if i == sorted {
                if sorted == order.len() {
                    break;
                }
                order[sorted..].sort_unstable_by(by_logit);
                sorted = order.len();
            }
            let id = order[i];
            i += 1;
            if logits[id as usize].is_finite() && allowed(id) {
                chosen.push(id);
            }
        }
        if greedy || chosen.len() <= 1 {
            return chosen.first().copied();
        }
        draw(self.temperature, &mut self.state, logits, &chosen)
    }
}

/// A uniform number in [0, 1) from the xorshift64* generator `state`.
fn next_unit(state: &mut u64) -> f32 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    let value = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
    (value >> 40) as f32 / (1u64 << 24) as f32
}

/// Draws among `candidates` (best first): softmax at `temperature`, cut to top-p.
fn draw(temperature: f32, state: &mut u64, logits: &[f32], candidates: &[u32]) -> Option<u32> {
    let best = *candidates.first()?;
    let max = logits[best as usize];
    let weights: Vec<f32> = candidates
        .iter()
        .map(|&id| ((logits[id as usize] - max) / temperature).exp())
        .collect();
    let total: f32 = weights.iter().sum();
    let mut kept = 0;
    let mut mass = 0.0;
    for w in &weights {
        kept += 1;
        mass += w / total;
        if mass >= TOP_P {
            break;
        }
    }
    let kept_total: f32 = weights[..kept].iter().sum();
    let mut target = next_unit(state) * kept_total;
    for (id, w) in candidates.iter().zip(&weights[..kept]) {
        if target < *w {
            return Some(*id);
        }
        target -= w;
    }
    candidates.get(kept - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_best_allowed_token() {
        let mut s = Sampler::new(0.0, 1, 0, 1.0);
        let mut logits: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        assert_eq!(s.pick(&mut logits.clone(), &[], |_| true), Some(999));
        // Far down the order: found past the first candidates.
        assert_eq!(s.pick(&mut logits.clone(), &[], |id| id == 3), Some(3));
        assert_eq!(s.pick(&mut logits, &[], |_| false), None);
    }

    #[test]
    fn the_repeat_penalty_demotes_recent_tokens() {
        let mut s = Sampler::new(0.0, 1, 8, 2.0);
        let mut logits = vec![1.0, 1.9, 0.5];
        assert_eq!(s.pick(&mut logits, &[1], |_| true), Some(0));
    }

    #[test]
    fn sampling_is_seeded_and_stays_within_the_allowed_tokens() {
        let logits: Vec<f32> = (0..200).map(|i| (i % 10) as f32 * 0.1).collect();
        let draw = |seed| {
            let mut s = Sampler::new(1.0, seed, 0, 1.0);
            (0..50)
                .map(|_| s.pick(&mut logits.clone(), &[], |id| id % 2 == 0).unwrap())
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7));
        assert!(a.iter().all(|id| id % 2 == 0));
        assert!(a.iter().collect::<std::collections::HashSet<_>>().len() > 1);
    }

    #[test]
    fn sampling_checks_only_the_drawn_token_when_it_is_allowed() {
        let logits: Vec<f32> = (0..5000).map(|i| (i % 97) as f32 * 0.05).collect();
        let mut s = Sampler::new(0.8, 3, 0, 1.0);
        let mut checks = 0;
        for _ in 0..100 {
            s.pick(&mut logits.clone(), &[], |_| {
                checks += 1;
                true
            })
            .unwrap();
        }
        assert_eq!(checks, 100, "one grammar check per token");
        // A grammar that refuses the drawn tokens still gets an allowed one.
        let mut refused = 0;
        for _ in 0..100 {
            let id = s
                .pick(&mut logits.clone(), &[], |id| {
                    let ok = id % 97 < 10;
                    refused += usize::from(!ok);
                    ok
                })
                .unwrap();
            assert!(id % 97 < 10);
        }
        assert!(
            refused >= 100,
            "the draws were refused, then the fallback chose"
        );
    }
}
