//! Reciprocal-rank fusion: how archival rankings are combined (archival hybrid search in every
//! store, and a step's pending passages merged with committed ones). Recall search fuses scaled
//! scores instead (see [`rank_candidates`](super::rank_candidates)).

use std::collections::HashMap;
use std::hash::Hash;

/// The usual reciprocal-rank-fusion constant `k` (Cormack, Clarke and Büttcher, 2009).
pub const RRF_K: f32 = 60.0;

/// Fuses ranked lists: an item scores the sum of `weight / (k + rank)` (ranks from 1) over the
/// lists it is in, and the fused list is best first; ties go to the item `prefer` orders first.
///
/// ```
/// use memgpt_core::retrieval::{reciprocal_rank_fusion, RRF_K};
///
/// let text = [1, 2, 3];
/// let vector = [2, 4];
/// let fused = reciprocal_rank_fusion(&[(&text[..], 1.0), (&vector[..], 1.0)], RRF_K, |a, b| b.cmp(a));
/// assert_eq!(fused[0].0, 2, "ranked well in both lists");
/// assert_eq!(fused.len(), 4);
/// // A lighter list breaks ties but overturns no ranking it disagrees with.
/// let fused = reciprocal_rank_fusion(&[(&[1, 2][..], 1.0), (&[2, 1][..], 0.3)], RRF_K, |a, b| a.cmp(b));
/// assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [1, 2]);
/// ```
pub fn reciprocal_rank_fusion<K>(
    lists: &[(&[K], f32)],
    k: f32,
    mut prefer: impl FnMut(&K, &K) -> std::cmp::Ordering,
) -> Vec<(K, f32)>
where
    K: Copy + Eq + Hash,
{
    let mut fused: HashMap<K, f32> = HashMap::new();
    let mut order: Vec<K> = Vec::new();
    for (list, weight) in lists {
        for (rank, key) in list.iter().enumerate() {
            let entry = fused.entry(*key).or_insert_with(|| {
                order.push(*key);
                0.0
            });
            *entry += weight / (k + rank as f32 + 1.0);
        }
    }
    let mut ranked: Vec<(K, f32)> = order.into_iter().map(|key| (key, fused[&key])).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| prefer(&a.0, &b.0)));
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_wins_and_weights_scale_votes() {
        let fused =
            reciprocal_rank_fusion(&[(&[1, 2][..], 1.0), (&[2, 3][..], 1.0)], RRF_K, |a, b| {
                a.cmp(b)
            });
        assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [2, 1, 3]);
        let fused =
            reciprocal_rank_fusion(&[(&[1, 2][..], 0.3), (&[2, 1][..], 1.0)], RRF_K, |a, b| {
                a.cmp(b)
            });
        assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [2, 1]);
        let empty: Vec<(u8, f32)> = reciprocal_rank_fusion(&[], RRF_K, |a: &u8, b| a.cmp(b));
        assert!(empty.is_empty());
    }

    #[test]
    fn ties_follow_the_preference() {
        let fused =
            reciprocal_rank_fusion(&[(&[5][..], 1.0), (&[7][..], 1.0)], RRF_K, |a, b| b.cmp(a));
        assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [7, 5]);
    }
}
