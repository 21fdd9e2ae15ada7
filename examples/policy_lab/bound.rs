//! A sound upper bound on the hits of *any* policy, clairvoyant ones included, by Lagrangian
//! relaxation.
//!
//! Belady's furthest-next-use rule is optimal for equal-size pages evicted one at a time; here
//! messages have different sizes and a flush frees half the queue at once, where finding the
//! best eviction plan is NP-hard. So the lab's clairvoyant row is a *lower* bound on the optimum
//! (a plan that exists), and this module computes an *upper* one: together they bracket it.
//!
//! The relaxation keeps one constraint and drops the rest. At every question (a *check*), the
//! turns in main context fit in `capacity` = window - fixed tokens (the summary, the questions'
//! own messages and the flush regime are dropped: dropping constraints only raises the bound).
//! A turn is in context over intervals of time, each starting when it is said or when a search
//! returns it (a reload: the lab reloads a search's results after a miss; the relaxation allows
//! it after every search) and ending whenever a policy likes. A hit is a check at which an
//! evidence turn is in context.
//!
//! Capacity alone lets nearly everything stay at large windows, so the relaxation keeps one
//! consequence of the flush regime too (flush when the window is full, free at least half the
//! queue): whenever the turns and questions arriving between a time `a` and a check add up to
//! the capacity, some flush happened in between, and what a flush keeps is at most
//! `retained` = max(batch, (1 - fraction) * (capacity + batch)) tokens, `batch` being the most
//! one event can add (a turn, or a question with every search result reloaded). So the turns in
//! context at the check *since before `a`* fit in `retained` tokens.
//!
//! Moving both kinds of constraint into the objective with multipliers (`lambda >= 0` for
//! capacity, `mu >= 0` for retention, one each per check) splits the problem by turn: each
//! turn's best intervals are a small dynamic program over its events. For every multiplier,
//! `L = capacity * sum(lambda) + retained * sum(mu) + sum over turns of the best value` bounds
//! the hits of every feasible plan (weak duality), so the lowest `L` seen while a projected
//! subgradient method lowers it is a bound, converged or not.

use serde::Serialize;

/// One turn as the relaxation sees it.
#[derive(Clone, Debug)]
pub struct TurnEvents {
    /// Tokens it takes in main context.
    pub tokens: usize,
    /// Trace position at which it is said.
    pub said: usize,
    /// Check positions at which it is evidence (ascending).
    pub references: Vec<usize>,
    /// Check positions after which a search may bring it back (ascending).
    pub reloads: Vec<usize>,
}

/// What the bound came to on one conversation.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Bound {
    /// The bound on hits (an integer: hits are whole).
    pub hits: usize,
    /// `L` at the last iteration's best multipliers, before rounding down.
    pub value: f64,
    /// Subgradient iterations run.
    pub iterations: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A check at which the turn is evidence (ordered first: the check precedes the reload).
    Reference,
    /// The turn may enter context here (said, or returned by a search).
    Start,
}

/// A turn's event: `upto` is how many checks are at or before its position; for a start,
/// `retained_from` is the first check whose retention constraint covers an interval starting
/// here.
#[derive(Clone, Copy, Debug)]
struct Event {
    upto: usize,
    kind: Kind,
    retained_from: usize,
}

/// Everything the relaxation needs about one conversation at one window.
#[derive(Clone, Debug)]
pub struct BoundInput {
    /// Trace positions of the checks (questions), ascending.
    pub checks: Vec<usize>,
    /// For each check, the latest position `a` such that what arrives after `a` and before the
    /// check fills the capacity (`None`: not that much has arrived yet).
    pub filled_since: Vec<Option<usize>>,
    /// The evidence turns.
    pub turns: Vec<TurnEvents>,
    /// Tokens the queue may hold at a check.
    pub capacity: usize,
    /// Tokens a flush may keep.
    pub retained: usize,
}

/// The upper bound on hits for `input`. `target` is a number of hits known to be achievable
/// (the clairvoyant plan's), used only to size the steps.
pub fn upper_bound(input: &BoundInput, target: f64) -> Bound {
    let checks = &input.checks;
    let count_upto = |position: usize| checks.partition_point(|&c| c <= position);
    // `filled_since` never decreases, so the checks whose retention constraint covers an
    // interval starting at `position` are a suffix.
    let retained_from = |position: usize| {
        input
            .filled_since
            .partition_point(|a| a.is_none_or(|a| a < position))
    };
    let capacity = input.capacity;
    let capacity_f = capacity as f64;
    let retained_f = input.retained as f64;
    // A turn larger than the capacity is never in context at a check: it scores nothing.
    let prepared: Vec<(f64, Vec<Event>)> = input
        .turns
        .iter()
        .filter(|t| t.tokens <= capacity && !t.references.is_empty())
        .map(|t| {
            let mut events: Vec<(usize, Kind)> = t
                .references
                .iter()
                .map(|&p| (p, Kind::Reference))
                .chain(t.reloads.iter().map(|&p| (p, Kind::Start)))
                .chain(std::iter::once((t.said, Kind::Start)))
                .collect();
            events.sort_unstable();
            let events = events
                .into_iter()
                .map(|(p, kind)| Event {
                    upto: count_upto(p),
                    kind,
                    retained_from: retained_from(p),
                })
                .collect();
            (t.tokens as f64, events)
        })
        .collect();
    let references: usize = prepared
        .iter()
        .map(|(_, e)| e.iter().filter(|e| e.kind == Kind::Reference).count())
        .sum();

    // lambda (capacity) then mu (retention), one of each per check.
    let n = checks.len();
    let mut multipliers = vec![0.0f64; 2 * n];
    let mut best = references as f64; // L(0): every reference a hit
    let mut theta = 1.0f64;
    let mut stale = 0;
    let mut iterations = 0;
    const MAX_ITERATIONS: usize = 3_000;
    while iterations < MAX_ITERATIONS {
        iterations += 1;
        let prefix = |values: &[f64]| {
            let mut sums = Vec::with_capacity(values.len() + 1);
            sums.push(0.0);
            for v in values {
                sums.push(sums.last().copied().unwrap_or(0.0) + v);
            }
            sums
        };
        let (lambda, mu) = multipliers.split_at(n);
        let (lambda_sums, mu_sums) = (prefix(lambda), prefix(mu));
        let (turn_values, loads) = solve(&prepared, &lambda_sums, &mu_sums, n);
        let value = capacity_f * lambda_sums[n] + retained_f * mu_sums[n] + turn_values;
        if value < best - 1e-9 {
            best = value;
            stale = 0;
        } else {
            stale += 1;
            if stale >= 20 {
                theta /= 2.0;
                stale = 0;
                if theta < 1e-6 {
                    break;
                }
            }
        }
        // The projected subgradient: overloaded checks push their multiplier up, slack ones
        // (with a multiplier above zero) down.
        let gradient: Vec<f64> = loads
            .iter()
            .zip(&multipliers)
            .enumerate()
            .map(|(i, (&load, &m))| {
                let g = load - if i < n { capacity_f } else { retained_f };
                if m <= 0.0 && g < 0.0 { 0.0 } else { g }
            })
            .collect();
        let norm: f64 = gradient.iter().map(|g| g * g).sum();
        if norm == 0.0 {
            break; // the relaxed plan fits everywhere and no multiplier is slack: optimal
        }
        let gap = (value - target).max(1e-3);
        let step = theta * gap / norm;
        for (m, g) in multipliers.iter_mut().zip(&gradient) {
            *m = (*m + step * g).max(0.0);
        }
    }
    Bound {
        hits: ((best + 1e-9).floor().max(0.0) as usize).min(references),
        value: best,
        iterations,
    }
}

/// Each turn's best intervals for the multipliers whose prefix sums are `lambda` and `mu`:
/// the sum of the turns' values and the loads the chosen intervals put on each check (the
/// capacity loads, then the retention loads).
fn solve(
    turns: &[(f64, Vec<Event>)],
    lambda: &[f64],
    mu: &[f64],
    checks: usize,
) -> (f64, Vec<f64>) {
    /// An interval in context: checks `from..to`, retention-constrained from `retained`.
    type Interval = (usize, usize, usize);
    let mut total = 0.0;
    let mut diff = vec![0.0f64; 2 * (checks + 1)];
    for (tokens, events) in turns {
        // `absent`: the best value so far out of context, with its closed intervals.
        // `present`: in context since check count `from` (retention from `retained`), costs
        // paid up to `paid`. A later start always dominates an earlier one (same gains ahead,
        // no more cost), so one open interval is enough.
        let mut absent: (f64, Vec<Interval>) = (0.0, Vec::new());
        let mut present: Option<(f64, Vec<Interval>, usize, usize, usize)> = None;
        for event in events {
            if let Some((value, _, _, retained, paid)) = present.as_mut() {
                let from = (*paid).max(*retained).min(event.upto);
                *value -= tokens * (lambda[event.upto] - lambda[*paid] + mu[event.upto] - mu[from]);
                *paid = event.upto;
                if event.kind == Kind::Reference {
                    *value += 1.0;
                }
            }
            if let Some((value, intervals, from, retained, _)) = &present
                && *value > absent.0
            {
                let mut closed = intervals.clone();
                closed.push((*from, event.upto, *retained));
                absent = (*value, closed);
            }
            if event.kind == Kind::Start {
                present = Some((
                    absent.0,
                    absent.1.clone(),
                    event.upto,
                    event.retained_from,
                    event.upto,
                ));
            }
        }
        total += absent.0;
        for (from, to, retained) in absent.1 {
            diff[from] += tokens;
            diff[to] -= tokens;
            let from = from.max(retained);
            if from < to {
                diff[checks + 1 + from] += tokens;
                diff[checks + 1 + to] -= tokens;
            }
        }
    }
    let mut loads = Vec::with_capacity(2 * checks);
    for half in [&diff[..=checks], &diff[checks + 1..]] {
        let mut running = 0.0;
        for d in half.iter().take(checks) {
            running += d;
            loads.push(running);
        }
    }
    (total, loads)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(tokens: usize, said: usize, references: &[usize], reloads: &[usize]) -> TurnEvents {
        TurnEvents {
            tokens,
            said,
            references: references.to_vec(),
            reloads: reloads.to_vec(),
        }
    }

    /// A bound without retention constraints (nothing has filled the capacity yet).
    fn bound(checks: &[usize], turns: &[TurnEvents], capacity: usize, target: f64) -> Bound {
        upper_bound(
            &BoundInput {
                checks: checks.to_vec(),
                filled_since: vec![None; checks.len()],
                turns: turns.to_vec(),
                capacity,
                retained: capacity,
            },
            target,
        )
    }

    #[test]
    fn two_turns_that_do_not_fit_together() {
        // Both are evidence at one check; only one fits: the optimum is 1 hit.
        let bound = bound(
            &[2],
            &[turn(10, 0, &[2], &[]), turn(10, 1, &[2], &[])],
            10,
            1.0,
        );
        assert_eq!(bound.hits, 1, "{bound:?}");
        assert!(bound.value >= 1.0 - 1e-9, "weak duality: {bound:?}");
    }

    #[test]
    fn room_for_everything_bounds_at_every_reference() {
        let turns = [turn(10, 0, &[3, 5], &[]), turn(10, 1, &[5], &[])];
        assert_eq!(bound(&[3, 5], &turns, 100, 3.0).hits, 3);
    }

    #[test]
    fn a_reload_lets_a_turn_skip_the_crowded_stretch() {
        // Check 2 is crowded by a third turn that is evidence there (worth more than keeping
        // the first one across it). Without a reload the first turn must stay through check 2 to
        // be a hit at 4; with a search returning it after check 3 it need not.
        let checks = [2, 3, 4];
        let crowd = turn(10, 1, &[2], &[]);
        let kept = turn(10, 0, &[4], &[]);
        let without = bound(&checks, &[kept.clone(), crowd.clone()], 10, 1.0);
        assert_eq!(without.hits, 1, "{without:?}");
        let reloaded = turn(10, 0, &[4], &[3]);
        let with = bound(&checks, &[reloaded, crowd], 10, 2.0);
        assert_eq!(with.hits, 2, "{with:?}");
    }

    #[test]
    fn a_turn_larger_than_the_capacity_never_scores() {
        assert_eq!(bound(&[1], &[turn(50, 0, &[1], &[])], 10, 0.0).hits, 0);
    }

    #[test]
    fn a_flush_keeps_only_what_it_may_retain() {
        // Three turns said before position 3, each evidence at check 10; the capacity holds all
        // three, but a flush happened after position 3 (the capacity filled up since) and kept
        // at most 20 tokens: two of them.
        let turns = [
            turn(10, 0, &[10], &[]),
            turn(10, 1, &[10], &[]),
            turn(10, 2, &[10], &[]),
        ];
        let input = BoundInput {
            checks: vec![10],
            filled_since: vec![None],
            turns: turns.to_vec(),
            capacity: 30,
            retained: 20,
        };
        assert_eq!(upper_bound(&input, 2.0).hits, 3, "no flush known: all fit");
        let flushed = BoundInput {
            filled_since: vec![Some(3)],
            ..input
        };
        assert_eq!(upper_bound(&flushed, 2.0).hits, 2);
    }
}
