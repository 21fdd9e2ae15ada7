//! [`QueueManager`]: memory pressure, warnings and flushes of the FIFO queue through the
//! eviction policy.

use std::sync::Arc;

use super::policy::unit_of_each;
use super::{ContextUsage, EntryView, EvictionPolicy, FifoQueue, PaperPolicy, Pressure, QueueView};
use crate::ids::MessageId;

/// The entries a flush will evict, after the invariants were enforced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EvictionPlan {
    /// Queue indices to evict, ascending.
    pub indices: Vec<usize>,
    /// Tokens they free.
    pub tokens: usize,
}

impl EvictionPlan {
    /// Whether nothing will be evicted.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
}

/// Where a policy's pressure levels begin, in prompt tokens, for the context as it is: what an
/// inspector draws as the warning and flush lines. Found by asking the policy itself, so it
/// holds for any policy whose pressure grows with the tokens in use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PressureLines {
    /// The fewest prompt tokens at which the policy warns (`None`: it never does below the
    /// flush line, or not within four windows).
    pub warn_tokens: Option<usize>,
    /// The fewest prompt tokens at which the policy flushes (`None`: not within four windows).
    pub flush_tokens: Option<usize>,
}

/// Carries out an [`EvictionPolicy`]'s decisions on a [`FifoQueue`], enforcing:
///
/// 1. a function call and its results are evicted together or not at all;
/// 2. pinned messages, `protected` messages, and the newest unit (what the model must answer)
///    are never evicted;
/// 3. if what the policy chose would leave the context in the flush zone, more units are
///    evicted, oldest first, until it is out of it or nothing evictable is left.
#[derive(Clone, Debug)]
pub struct QueueManager {
    policy: Arc<dyn EvictionPolicy>,
}

impl Default for QueueManager {
    fn default() -> Self {
        Self::new(Arc::new(PaperPolicy::default()))
    }
}

impl QueueManager {
    /// A manager for `policy`.
    pub fn new(policy: Arc<dyn EvictionPolicy>) -> Self {
        Self { policy }
    }

    /// The policy.
    pub fn policy(&self) -> &Arc<dyn EvictionPolicy> {
        &self.policy
    }

    /// The policy's view of `queue`, with `protected` messages marked pinned.
    pub fn view_entries(queue: &FifoQueue, protected: &[MessageId]) -> Vec<EntryView> {
        queue
            .entries()
            .map(|e| {
                let m = e.message();
                EntryView {
                    id: m.id,
                    kind: m.kind,
                    tokens: e.tokens(),
                    created_at: m.created_at,
                    last_used: e.last_used(),
                    uses: e.uses(),
                    relevance: e.relevance(),
                    signals: e.signals().to_vec(),
                    pinned: e.is_pinned() || protected.contains(&m.id),
                }
            })
            .collect()
    }

    /// How full the context is (O(1): the queue keeps its token total).
    pub fn pressure(&self, queue: &FifoQueue, window: usize, fixed_tokens: usize) -> Pressure {
        self.policy.pressure(&ContextUsage {
            window,
            fixed_tokens,
            queue_tokens: queue.tokens(),
            queue_messages: queue.len(),
        })
    }

    /// Where the policy starts to warn and to flush, given `fixed_tokens` outside the queue
    /// and the queue's current length (bisection over the policy's O(1) pressure check).
    ///
    /// ```
    /// use memgpt_core::queue::{FifoQueue, QueueManager};
    ///
    /// let lines = QueueManager::default().pressure_lines(&FifoQueue::default(), 8_000, 1_000);
    /// // MemGPT's policy: a warning at 70% of the window, a flush at 100%.
    /// assert_eq!(lines.warn_tokens, Some(5_600));
    /// assert_eq!(lines.flush_tokens, Some(8_000));
    /// ```
    pub fn pressure_lines(
        &self,
        queue: &FifoQueue,
        window: usize,
        fixed_tokens: usize,
    ) -> PressureLines {
        let at_least = |level: Pressure| {
            let reached = |total: usize| {
                let fixed = fixed_tokens.min(total);
                self.policy.pressure(&ContextUsage {
                    window,
                    fixed_tokens: fixed,
                    queue_tokens: total - fixed,
                    queue_messages: queue.len(),
                }) >= level
            };
            let limit = window.max(1).saturating_mul(4);
            if !reached(limit) {
                return None;
            }
            let (mut lo, mut hi) = (0, limit);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if reached(mid) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            Some(lo)
        };
        let flush_tokens = at_least(Pressure::Flush);
        let warn_tokens = at_least(Pressure::Warn).filter(|&w| Some(w) != flush_tokens);
        PressureLines {
            warn_tokens,
            flush_tokens,
        }
    }

    /// What a flush would evict now.
    pub fn plan(
        &self,
        queue: &FifoQueue,
        window: usize,
        fixed_tokens: usize,
        protected: &[MessageId],
    ) -> EvictionPlan {
        let mut entries = Self::view_entries(queue, protected);
        let units = queue.units();
        // The newest unit is what the model is answering: it always stays.
        if let Some(last) = units.last() {
            for i in last.clone() {
                entries[i].pinned = true;
            }
        }
        let unit_of = unit_of_each(&units, entries.len());
        let evictable: Vec<bool> = units
            .iter()
            .map(|unit| unit.clone().all(|i| !entries[i].pinned))
            .collect();
        let unit_tokens: Vec<usize> = units
            .iter()
            .map(|unit| unit.clone().map(|i| entries[i].tokens).sum())
            .collect();

        let usage = ContextUsage {
            window,
            fixed_tokens,
            queue_tokens: queue.tokens(),
            queue_messages: queue.len(),
        };
        let view = QueueView {
            entries: &entries,
            usage,
        };
        let mut chosen = vec![false; units.len()];
        for index in self.policy.select(&view) {
            if let Some(&u) = unit_of.get(index) {
                chosen[u] |= evictable[u];
            }
        }

        // Never leave the context in the flush zone if evicting more can help: add the oldest
        // remaining evictable units, as few as needed. Evicting more never raises pressure, so
        // the smallest sufficient count is found by bisection over O(1) usage checks.
        let freed = |chosen: &[bool]| -> (usize, usize) {
            units
                .iter()
                .zip(chosen)
                .enumerate()
                .filter(|(_, (_, c))| **c)
                .fold((0, 0), |(tokens, messages), (u, (unit, _))| {
                    (tokens + unit_tokens[u], messages + unit.len())
                })
        };
        let (base_tokens, base_messages) = freed(&chosen);
        let extra: Vec<usize> = (0..units.len())
            .filter(|&u| evictable[u] && !chosen[u])
            .collect();
        let mut prefix = vec![(0usize, 0usize); extra.len() + 1];
        for (k, &u) in extra.iter().enumerate() {
            prefix[k + 1] = (prefix[k].0 + unit_tokens[u], prefix[k].1 + units[u].len());
        }
        let still_flush = |k: usize| {
            self.policy.pressure(&ContextUsage {
                queue_tokens: usage.queue_tokens - base_tokens - prefix[k].0,
                queue_messages: usage.queue_messages - base_messages - prefix[k].1,
                ..usage
            }) == Pressure::Flush
        };
        let (mut lo, mut hi) = (0, extra.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if still_flush(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        for &u in &extra[..lo] {
            chosen[u] = true;
        }

        let mut plan = EvictionPlan::default();
        for (u, unit) in units.iter().enumerate().filter(|(u, _)| chosen[*u]) {
            plan.indices.extend(unit.clone());
            plan.tokens += unit_tokens[u];
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::Utc;
    use proptest::prelude::*;

    use super::*;
    use crate::ids::AgentId;
    use crate::message::{Message, MessageKind, ToolCall};
    use crate::tokens::ApproxCounter;

    /// A policy that evicts whatever it is told: to check that the manager, not the policy,
    /// keeps the invariants.
    #[derive(Debug)]
    struct Arbitrary {
        picks: Vec<usize>,
        flush_at: usize,
    }

    impl EvictionPolicy for Arbitrary {
        fn name(&self) -> &str {
            "arbitrary"
        }
        fn pressure(&self, usage: &ContextUsage) -> Pressure {
            if usage.total_tokens() >= self.flush_at {
                Pressure::Flush
            } else {
                Pressure::Normal
            }
        }
        fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
            self.picks
                .iter()
                .map(|p| p % view.entries.len().max(1))
                .collect()
        }
    }

    /// One step of a conversation: a user message, or an assistant message with `n` calls
    /// followed by its `n` results.
    #[derive(Clone, Debug)]
    enum Turn {
        User(usize),
        Calls(usize, usize),
    }

    fn turn() -> impl Strategy<Value = Turn> {
        prop_oneof![
            (1usize..200).prop_map(Turn::User),
            ((1usize..4), (1usize..200)).prop_map(|(n, len)| Turn::Calls(n, len)),
        ]
    }

    fn build(turns: &[Turn], pins: &[usize]) -> FifoQueue {
        let agent = AgentId::new();
        let mut q = FifoQueue::new();
        for t in turns {
            match *t {
                Turn::User(len) => q.push(
                    Arc::new(Message::new(
                        agent,
                        MessageKind::User,
                        "u".repeat(len),
                        Utc::now(),
                    )),
                    &ApproxCounter,
                ),
                Turn::Calls(n, len) => {
                    let calls = (0..n)
                        .map(|i| ToolCall {
                            id: format!("{i}"),
                            name: "f".into(),
                            arguments: "{}".into(),
                        })
                        .collect();
                    q.push(
                        Arc::new(Message::assistant(
                            agent,
                            "t".repeat(len),
                            calls,
                            Utc::now(),
                        )),
                        &ApproxCounter,
                    );
                    for i in 0..n {
                        let result = if i % 2 == 0 {
                            Ok("r".repeat(len))
                        } else {
                            Err("e".into())
                        };
                        q.push(
                            Arc::new(Message::function_result(
                                agent,
                                format!("{i}"),
                                "f",
                                result,
                                Utc::now(),
                            )),
                            &ApproxCounter,
                        );
                    }
                }
            }
        }
        for &p in pins {
            if let Some(id) = q.get(p % q.len().max(1)).map(|e| e.message().id) {
                q.set_pinned(id, true);
            }
        }
        q
    }

    /// Every function result is directly preceded by its call group, and every call keeps all
    /// its results.
    fn pairs_intact(q: &FifoQueue) -> bool {
        let entries: Vec<_> = q.entries().collect();
        let mut i = 0;
        while i < entries.len() {
            let m = entries[i].message();
            match m.kind {
                MessageKind::FunctionReturn | MessageKind::FunctionError => return false,
                MessageKind::Assistant if !m.tool_calls.is_empty() => {
                    let n = m.tool_calls.len();
                    for j in 1..=n {
                        match entries.get(i + j).map(|e| e.message().kind) {
                            Some(MessageKind::FunctionReturn | MessageKind::FunctionError) => {}
                            _ => return false,
                        }
                    }
                    i += n + 1;
                }
                _ => i += 1,
            }
        }
        true
    }

    proptest! {
        #[test]
        fn any_policy_keeps_the_queue_valid(
            turns in prop::collection::vec(turn(), 1..40),
            picks in prop::collection::vec(0usize..200, 0..30),
            pins in prop::collection::vec(0usize..200, 0..3),
            window in 50usize..3000,
            fixed in 0usize..500,
        ) {
            let mut q = build(&turns, &pins);
            prop_assert!(pairs_intact(&q));
            let pinned: Vec<MessageId> = q.entries().filter(|e| e.is_pinned()).map(|e| e.message().id).collect();
            let newest = q.get(q.len() - 1).unwrap().message().id;
            let manager = QueueManager::new(Arc::new(Arbitrary { picks, flush_at: window }));
            let plan = manager.plan(&q, window, fixed, &[]);
            let before = q.tokens();
            let removed = q.remove(&plan.indices);
            prop_assert_eq!(before - q.tokens(), plan.tokens);
            prop_assert_eq!(removed.len(), plan.indices.len());
            prop_assert!(pairs_intact(&q), "a call was separated from its result");
            for id in &pinned {
                prop_assert!(q.position(*id).is_some(), "a pinned message was evicted");
            }
            prop_assert!(q.position(newest).is_some(), "the newest message was evicted");
            // Still flushing only if nothing evictable is left.
            if fixed + q.tokens() >= window {
                let again = manager.plan(&q, window, fixed, &[]);
                prop_assert!(again.is_empty(), "the flush stopped while more could be evicted");
            }
        }

        #[test]
        fn paper_policy_evicts_oldest_first_and_about_half(
            turns in prop::collection::vec(turn(), 4..40),
        ) {
            let q = build(&turns, &[]);
            let window = q.tokens();
            let manager = QueueManager::default();
            let plan = manager.plan(&q, window, 0, &[]);
            // Oldest first: the evicted indices are a prefix of the queue.
            prop_assert_eq!(plan.indices.clone(), (0..plan.indices.len()).collect::<Vec<_>>());
            // About half: at least half of the queue's tokens unless the newest unit (which
            // stays) holds more than half of them.
            let last_unit = q.units().pop().unwrap();
            let newest_tokens: usize = last_unit.map(|i| q.get(i).unwrap().tokens()).sum();
            if newest_tokens * 2 <= q.tokens() {
                prop_assert!(plan.tokens * 2 >= q.tokens());
            }
        }
    }

    /// One operation on a live queue.
    #[derive(Clone, Debug)]
    enum Op {
        Append(Turn),
        Flush,
        Touch(usize),
        Pin(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => turn().prop_map(Op::Append),
            2 => Just(Op::Flush),
            1 => (0usize..400).prop_map(Op::Touch),
            1 => (0usize..400).prop_map(Op::Pin),
        ]
    }

    /// Every registered policy, and one that evicts arbitrary messages.
    fn policies(picks: Vec<usize>, window: usize) -> Vec<Arc<dyn EvictionPolicy>> {
        let mut policies: Vec<Arc<dyn EvictionPolicy>> = crate::queue::registry::policy_names()
            .into_iter()
            .map(|name| crate::queue::registry::policy_by_name(name).unwrap())
            .collect();
        policies.push(Arc::new(Arbitrary {
            picks,
            flush_at: window,
        }));
        policies
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random appends, flushes (the evicted messages folded into a running count, as a
        /// summary would be), uses and pins, under every policy: after every operation the
        /// queue's total is the sum of its entries, calls stay with their results, nothing is
        /// queued twice, every appended message is either queued or evicted exactly once, pins
        /// and the newest unit survive flushes, and a flush stops only when it freed enough or
        /// nothing evictable is left.
        #[test]
        fn any_sequence_under_any_policy_keeps_the_books(
            ops in prop::collection::vec(op(), 1..80),
            picks in prop::collection::vec(0usize..200, 0..20),
            window in 200usize..4000,
            fixed in 0usize..150,
        ) {
            for policy in policies(picks.clone(), window) {
                let name = policy.name().to_owned();
                let manager = QueueManager::new(policy);
                let mut q = FifoQueue::new();
                let (mut appended, mut evicted) = (0usize, 0usize);
                let mut pinned: Vec<MessageId> = Vec::new();
                for op in &ops {
                    match op {
                        Op::Append(t) => {
                            let added = build(std::slice::from_ref(t), &[]);
                            appended += added.len();
                            for e in added.entries() {
                                q.push(e.message().clone(), &ApproxCounter);
                            }
                        }
                        Op::Touch(i) if !q.is_empty() => {
                            let id = q.get(i % q.len()).unwrap().message().id;
                            q.touch(id);
                        }
                        Op::Pin(i) if !q.is_empty() => {
                            let id = q.get(i % q.len()).unwrap().message().id;
                            q.set_pinned(id, true);
                            pinned.push(id);
                        }
                        Op::Flush if !q.is_empty() => {
                            let newest: Vec<MessageId> = q
                                .units()
                                .pop()
                                .unwrap()
                                .map(|i| q.get(i).unwrap().message().id)
                                .collect();
                            let plan = manager.plan(&q, window, fixed, &[]);
                            let before = q.tokens();
                            let removed = q.remove(&plan.indices);
                            prop_assert_eq!(before - q.tokens(), plan.tokens, "{}", name);
                            evicted += removed.len();
                            for id in pinned.iter().chain(&newest) {
                                prop_assert!(q.position(*id).is_some(), "{}: a pinned or newest message was evicted", name);
                            }
                            if plan.is_empty() || fixed + q.tokens() >= window {
                                let again = manager.plan(&q, window, fixed, &[]);
                                prop_assert!(
                                    fixed + q.tokens() < window || again.is_empty(),
                                    "{}: the flush stopped while more could be evicted", name
                                );
                            }
                        }
                        _ => {}
                    }
                    let sum: usize = q.entries().map(|e| e.tokens()).sum();
                    prop_assert_eq!(q.tokens(), sum, "{}: the running total drifted", name);
                    prop_assert!(pairs_intact(&q), "{}: a call was separated from its result", name);
                    let ids: std::collections::HashSet<MessageId> = q.ids().into_iter().collect();
                    prop_assert_eq!(ids.len(), q.len(), "{}: a message is queued twice", name);
                    prop_assert_eq!(evicted + q.len(), appended, "{}: a message was lost or duplicated", name);
                }
            }
        }
    }

    #[test]
    fn protected_messages_stay() {
        let q = build(
            &[
                Turn::User(100),
                Turn::User(100),
                Turn::User(100),
                Turn::User(100),
            ],
            &[],
        );
        let protected = q.get(0).unwrap().message().id;
        let plan = QueueManager::default().plan(&q, q.tokens(), 0, &[protected]);
        assert!(!plan.indices.contains(&0));
        assert!(plan.indices.contains(&1));
    }
}
