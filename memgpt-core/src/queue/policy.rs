//! The [`EvictionPolicy`] seam: what a page-replacement policy sees ([`QueueView`]) and
//! decides.

use std::fmt;
use std::ops::Range;

use chrono::{DateTime, Utc};

use crate::ids::MessageId;
use crate::message::{Message, MessageKind};

/// How full main context is, as judged by a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pressure {
    /// Nothing to do.
    Normal,
    /// Warn the LLM that eviction is near, so it saves what matters.
    Warn,
    /// Evict now.
    Flush,
}

/// What a policy sees of one queued message.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryView {
    /// The message id.
    pub id: MessageId,
    /// Its kind.
    pub kind: MessageKind,
    /// Its token count in the prompt.
    pub tokens: usize,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Logical time of its last use (appended, retrieved or referenced); larger is more recent.
    pub last_used: u64,
    /// How many times it was used.
    pub uses: u32,
    /// Its similarity (cosine) to the latest turns, when measured: before a flush, for a
    /// policy whose [`EvictionPolicy::relevance_window`] asks for it and an agent with an
    /// embedder.
    pub relevance: Option<f32>,
    /// The policy's own signals of it, in the order of [`EvictionPolicy::signals`] (empty for
    /// a policy that keeps none).
    pub signals: Vec<f32>,
    /// Whether it may not be evicted (pinned by the user, or protected for the step in
    /// progress). The manager drops such entries from any selection.
    pub pinned: bool,
}

/// How much of the window main context uses: what a policy needs to judge pressure, in O(1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextUsage {
    /// The prompt budget in tokens (the context window minus the room kept for the completion).
    pub window: usize,
    /// Tokens outside the queue: system instructions, functions, working context, summary.
    pub fixed_tokens: usize,
    /// Tokens of the queued messages.
    pub queue_tokens: usize,
    /// How many messages are queued.
    pub queue_messages: usize,
}

impl ContextUsage {
    /// Tokens of the whole prompt.
    pub fn total_tokens(&self) -> usize {
        self.fixed_tokens + self.queue_tokens
    }

    /// The fraction of the window in use.
    pub fn fraction(&self) -> f64 {
        self.total_tokens() as f64 / self.window.max(1) as f64
    }
}

/// A read-only view of the queue for choosing what to evict.
#[derive(Clone, Debug)]
pub struct QueueView<'a> {
    /// The queued messages, oldest first.
    pub entries: &'a [EntryView],
    /// The context's usage.
    pub usage: ContextUsage,
}

/// Splits `len` queued messages into eviction units: a message that calls functions (`calls`)
/// with the function results (`result`) that follow it; every other message alone.
pub(super) fn eviction_units(
    len: usize,
    calls: impl Fn(usize) -> bool,
    result: impl Fn(usize) -> bool,
) -> Vec<Range<usize>> {
    let mut units = Vec::new();
    let mut start = 0;
    while start < len {
        let mut end = start + 1;
        if calls(start) {
            while end < len && result(end) {
                end += 1;
            }
        }
        units.push(start..end);
        start = end;
    }
    units
}

/// For each of the `len` queued messages, the index of its unit in `units` (which cover
/// `0..len` in order, as [`eviction_units`] makes them).
pub(super) fn unit_of_each(units: &[Range<usize>], len: usize) -> Vec<usize> {
    let mut unit_of = vec![0; len];
    for (u, unit) in units.iter().enumerate() {
        unit_of[unit.clone()].fill(u);
    }
    unit_of
}

impl QueueView<'_> {
    /// The eviction units the manager evicts whole, as index ranges into
    /// [`QueueView::entries`]: an assistant turn with the function results that follow it;
    /// every other message alone. (Function results only ever follow the turn that called.)
    pub fn units(&self) -> Vec<Range<usize>> {
        let kind = |i: usize| self.entries[i].kind;
        eviction_units(
            self.entries.len(),
            |i| kind(i) == MessageKind::Assistant,
            |i| {
                matches!(
                    kind(i),
                    MessageKind::FunctionReturn | MessageKind::FunctionError
                )
            },
        )
    }

    /// Takes entries in `order` (indices into [`QueueView::entries`], most evictable first)
    /// until `fraction` of the queue's tokens is freed: what a policy's
    /// [`select`](EvictionPolicy::select) returns once it has ranked the entries.
    ///
    /// It counts what the manager will evict: an entry's whole [unit](QueueView::units) (a call
    /// taken frees its results too), once per unit, and skips entries whose unit holds a pinned
    /// one (the manager keeps those units whole).
    ///
    /// # Panics
    ///
    /// If `order` yields an index past the end of [`QueueView::entries`].
    pub fn take_until_freed(
        &self,
        order: impl IntoIterator<Item = usize>,
        fraction: f64,
    ) -> Vec<usize> {
        let target = (self.usage.queue_tokens as f64 * fraction).ceil() as usize;
        let units = self.units();
        let unit_of = unit_of_each(&units, self.entries.len());
        let mut taken = vec![false; units.len()];
        let mut freed = 0;
        let mut chosen = Vec::new();
        for i in order {
            if freed >= target {
                break;
            }
            let u = unit_of[i];
            let unit = units[u].clone();
            if unit.clone().any(|k| self.entries[k].pinned) {
                continue;
            }
            if !taken[u] {
                taken[u] = true;
                freed += unit.map(|k| self.entries[k].tokens).sum::<usize>();
            }
            chosen.push(i);
        }
        chosen
    }
}

/// A page-replacement policy: when to warn, when to flush, what to evict.
///
/// Policies decide; the [`QueueManager`](super::QueueManager) acts and enforces the invariants
/// (calls stay with their results, pinned messages stay, enough is evicted), so a policy can be
/// simple and still never corrupt the queue.
pub trait EvictionPolicy: Send + Sync + fmt::Debug {
    /// A short name (stored in the agent's config).
    fn name(&self) -> &str;

    /// How full the context is. Called before every LLM call, so it should be cheap.
    fn pressure(&self, usage: &ContextUsage) -> Pressure;

    /// Indices into `view.entries` to evict in a flush. Called at [`Pressure::Flush`], or when
    /// the provider reported a context overflow.
    fn select(&self, view: &QueueView<'_>) -> Vec<usize>;

    /// How many of the latest messages form the *observation window* whose similarity to
    /// every other queued message the agent measures (with its embedder) before a flush, into
    /// [`EntryView::relevance`]. `None` (the default): the policy does not use relevance.
    fn relevance_window(&self) -> Option<usize> {
        None
    }

    /// Whether the policy uses the attention weights a provider can report (they arrive
    /// through [`EvictionPolicy::on_attended`]); the agent asks the provider for them only
    /// then.
    fn wants_attention(&self) -> bool {
        false
    }

    /// The names of the signals the policy keeps for each queued message (its own per-entry
    /// state: `["attention"]`, `["salience"]`...). The queue keeps one number per name for
    /// every entry, updated by the hooks below, and hands them back in
    /// [`EntryView::signals`] in this order; the server's context view and the inspector show
    /// them by name. Default: none.
    fn signals(&self) -> &[&'static str] {
        &[]
    }

    /// A message joins the queue (or the queue switches to this policy): sets its signals'
    /// first values (`signals` holds one 0 per name of [`EvictionPolicy::signals`]).
    fn on_queued(&self, message: &Message, signals: &mut [f32]) {
        let _ = (message, signals);
    }

    /// A queued message was used (retrieved by a search, referenced): after its recency and
    /// use count, its signals may change too.
    fn on_touched(&self, signals: &mut [f32]) {
        let _ = signals;
    }

    /// The model paid `weight` of its attention to a queued message in one LLM call (a
    /// provider's report, for a policy that [`wants_attention`](Self::wants_attention)).
    fn on_attended(&self, weight: f32, signals: &mut [f32]) {
        let _ = (weight, signals);
    }
}

/// MemGPT's policy: warn at 70% of the window, flush at 100%, and evict the oldest messages
/// until about 50% of the queue's tokens are freed.
///
/// ```
/// use memgpt_core::queue::{EvictionPolicy, PaperPolicy};
///
/// let policy = PaperPolicy::default();
/// assert_eq!((policy.warn_at, policy.flush_at, policy.evict_fraction), (0.7, 1.0, 0.5));
/// assert_eq!(policy.name(), "paper");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperPolicy {
    /// Fraction of the window at which to warn.
    pub warn_at: f64,
    /// Fraction of the window at which to flush.
    pub flush_at: f64,
    /// Fraction of the queue's tokens to evict in a flush.
    pub evict_fraction: f64,
}

impl Default for PaperPolicy {
    fn default() -> Self {
        Self {
            warn_at: 0.7,
            flush_at: 1.0,
            evict_fraction: 0.5,
        }
    }
}

/// The pressure thresholds every built-in policy shares.
pub(super) fn threshold_pressure(usage: &ContextUsage, warn_at: f64, flush_at: f64) -> Pressure {
    let fraction = usage.fraction();
    if fraction >= flush_at {
        Pressure::Flush
    } else if fraction >= warn_at {
        Pressure::Warn
    } else {
        Pressure::Normal
    }
}

impl EvictionPolicy for PaperPolicy {
    fn name(&self) -> &str {
        "paper"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        threshold_pressure(usage, self.warn_at, self.flush_at)
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        view.take_until_freed(0..view.entries.len(), self.evict_fraction)
    }
}

/// Least recently *used* first: the paper's thresholds, but a flush evicts the messages whose
/// last use is oldest.
///
/// A message is *used* when it is appended, and again each time a search
/// (`conversation_search`, `conversation_search_date`) returns it while it is still in the
/// queue, or a function marks it used ([`FunctionContext::mark_used`](crate::function::FunctionContext::mark_used)).
/// [`EntryView::last_used`] is that logical time. Use counts start afresh when an agent is
/// loaded (they are not stored); then the order is the queue's, as for [`PaperPolicy`].
///
/// ```
/// use memgpt_core::queue::{EvictionPolicy, LruPolicy};
///
/// let policy = LruPolicy::default();
/// assert_eq!((policy.warn_at, policy.flush_at, policy.evict_fraction), (0.7, 1.0, 0.5));
/// assert_eq!(policy.name(), "lru");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LruPolicy {
    /// Fraction of the window at which to warn.
    pub warn_at: f64,
    /// Fraction of the window at which to flush.
    pub flush_at: f64,
    /// Fraction of the queue's tokens to evict in a flush.
    pub evict_fraction: f64,
}

impl Default for LruPolicy {
    fn default() -> Self {
        let paper = PaperPolicy::default();
        Self {
            warn_at: paper.warn_at,
            flush_at: paper.flush_at,
            evict_fraction: paper.evict_fraction,
        }
    }
}

impl EvictionPolicy for LruPolicy {
    fn name(&self) -> &str {
        "lru"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        threshold_pressure(usage, self.warn_at, self.flush_at)
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        let mut order: Vec<usize> = (0..view.entries.len()).collect();
        // Stable: equal recency keeps queue order (oldest first).
        order.sort_by_key(|&i| view.entries[i].last_used);
        view.take_until_freed(order, self.evict_fraction)
    }
}

/// Attention-weighted eviction: keeps what the recent conversation attends to.
///
/// Each queued message outside the *observation window* (the latest
/// [`observation`](Self::observation) messages, always kept, as in SnapKV) gets a score, and a
/// flush evicts the lowest scores first until [`evict_fraction`](Self::evict_fraction) of the
/// queue's tokens is freed:
///
/// * **relevance** (weight [`relevance_weight`](Self::relevance_weight)): cosine similarity to
///   the observation window ([`EntryView::relevance`], measured with the agent's embedder);
/// * **heavy hitters** ([`heavy_hitter_weight`](Self::heavy_hitter_weight)): accumulated
///   importance, as in H2O/Scissorhands: attention the model paid to the message when its
///   provider reports it (its `attention` signal, see [`EvictionPolicy::on_attended`]) plus how often it was used (retrieved by a
///   search or marked), normalised by the queue's maximum;
/// * **recency** ([`recency_weight`](Self::recency_weight)): rank of its last use.
///
/// The attention sinks of main context (system instructions, working context, the recursive
/// summary) are outside the queue and never evicted; pinned messages stay as always. Without an
/// embedder and without reported attention the score reduces to use counts and recency, an
/// LRU with frequency.
///
/// ```
/// use memgpt_core::queue::{AttentionPolicy, EvictionPolicy};
///
/// let policy = AttentionPolicy::default();
/// assert_eq!(policy.name(), "attention");
/// assert_eq!(policy.relevance_window(), Some(4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionPolicy {
    /// Fraction of the window at which to warn.
    pub warn_at: f64,
    /// Fraction of the window at which to flush.
    pub flush_at: f64,
    /// Fraction of the queue's tokens to evict in a flush.
    pub evict_fraction: f64,
    /// The latest messages that form the observation window (never evicted by the policy).
    pub observation: usize,
    /// Weight of relevance to the observation window.
    pub relevance_weight: f32,
    /// Weight of accumulated importance (attention and uses).
    pub heavy_hitter_weight: f32,
    /// Weight of recency.
    pub recency_weight: f32,
}

impl Default for AttentionPolicy {
    fn default() -> Self {
        let paper = PaperPolicy::default();
        Self {
            warn_at: paper.warn_at,
            flush_at: paper.flush_at,
            evict_fraction: paper.evict_fraction,
            observation: 4,
            relevance_weight: 0.5,
            heavy_hitter_weight: 0.3,
            recency_weight: 0.2,
        }
    }
}

impl AttentionPolicy {
    /// Every entry's score (higher is kept longer); the observation window scores infinity.
    pub fn scores(&self, entries: &[EntryView]) -> Vec<f32> {
        let n = entries.len();
        let observed_from = n.saturating_sub(self.observation);
        let attention = |e: &EntryView| e.signals.first().copied().unwrap_or(0.0);
        let importance = |e: &EntryView| attention(e) + e.uses.saturating_sub(1) as f32;
        let max_importance = entries
            .iter()
            .map(importance)
            .fold(0.0f32, f32::max)
            .max(f32::EPSILON);
        let mut by_recency: Vec<usize> = (0..n).collect();
        by_recency.sort_by_key(|&i| entries[i].last_used);
        let mut recency = vec![0.0f32; n];
        for (rank, &i) in by_recency.iter().enumerate() {
            recency[i] = if n > 1 {
                rank as f32 / (n - 1) as f32
            } else {
                1.0
            };
        }
        entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                if i >= observed_from {
                    return f32::INFINITY;
                }
                let relevance = e.relevance.unwrap_or(0.0).clamp(0.0, 1.0);
                self.relevance_weight * relevance
                    + self.heavy_hitter_weight * importance(e) / max_importance
                    + self.recency_weight * recency[i]
            })
            .collect()
    }
}

impl EvictionPolicy for AttentionPolicy {
    fn name(&self) -> &str {
        "attention"
    }

    fn pressure(&self, usage: &ContextUsage) -> Pressure {
        threshold_pressure(usage, self.warn_at, self.flush_at)
    }

    fn select(&self, view: &QueueView<'_>) -> Vec<usize> {
        let scores = self.scores(view.entries);
        let mut order: Vec<usize> = (0..view.entries.len())
            .filter(|&i| scores[i].is_finite())
            .collect();
        // Lowest score first; ties go to the older message.
        order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(a.cmp(&b)));
        view.take_until_freed(order, self.evict_fraction)
    }

    fn relevance_window(&self) -> Option<usize> {
        Some(self.observation.max(1))
    }

    fn wants_attention(&self) -> bool {
        true
    }

    fn signals(&self) -> &[&'static str] {
        &["attention"]
    }

    /// Sums the attention the model paid to the message (negative weights count as 0).
    fn on_attended(&self, weight: f32, signals: &mut [f32]) {
        if let Some(attention) = signals.first_mut() {
            *attention += weight.max(0.0);
        }
    }
}

crate::register_policy!("paper", PaperPolicy::default());
crate::register_policy!("lru", LruPolicy::default());
crate::register_policy!("attention", AttentionPolicy::default());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::policy_by_name;

    #[test]
    fn lru_evicts_least_recently_used_first_skipping_pinned() {
        let policy = LruPolicy::default();
        // Queue order 0..6; entries 0 and 2 were used recently (retrieved by a search).
        let mut e = entries(&[10, 10, 10, 10, 10, 10]);
        e[0].last_used = 100;
        e[2].last_used = 90;
        e[3].pinned = true;
        let usage = ContextUsage {
            window: 100,
            fixed_tokens: 40,
            queue_tokens: 60,
            queue_messages: 6,
        };
        let view = QueueView { entries: &e, usage };
        // Half of 60 tokens: three entries, least recently used first: 1, 4, 5 (3 is pinned).
        assert_eq!(policy.select(&view), vec![1, 4, 5]);
        // The paper's policy takes the oldest instead.
        assert_eq!(PaperPolicy::default().select(&view), vec![0, 1, 2]);
        assert_eq!(policy.pressure(&usage), Pressure::Flush);
    }

    #[test]
    fn a_call_taken_frees_its_results_too() {
        // A call (10 tokens) with a 30-token result, then messages of 10 tokens.
        let call_then = |tokens: &[usize]| {
            let mut e = entries(tokens);
            e[0].kind = MessageKind::Assistant;
            e[1].kind = MessageKind::FunctionReturn;
            e
        };
        // 80 queued.
        let mut e = call_then(&[10, 30, 10, 10, 10, 10]);
        e[0].last_used = 50;
        e[1].last_used = 0; // the result is the least recently used
        let usage = ContextUsage {
            window: 100,
            fixed_tokens: 40,
            queue_tokens: 80,
            queue_messages: 6,
        };
        let view = QueueView { entries: &e, usage };
        // Half of 80: taking the result takes its call, 40 tokens, enough on its own.
        assert_eq!(LruPolicy::default().select(&view), vec![1]);
        // A pinned call keeps its result: the unit is skipped.
        e[0].pinned = true;
        let view = QueueView { entries: &e, usage };
        assert_eq!(LruPolicy::default().select(&view), vec![2, 3, 4, 5]);
        // A unit is counted once: the call and then its result free 40, not 80, so one more
        // message goes to reach half of 100.
        let e = call_then(&[10, 30, 10, 10, 10, 10, 10, 10]);
        let usage = ContextUsage {
            queue_tokens: 100,
            queue_messages: 8,
            ..usage
        };
        let view = QueueView { entries: &e, usage };
        assert_eq!(LruPolicy::default().select(&view), vec![0, 1, 2]);
    }

    #[test]
    fn attention_keeps_what_the_latest_turns_attend_to() {
        let policy = AttentionPolicy {
            observation: 2,
            ..AttentionPolicy::default()
        };
        // Eight messages of 10 tokens; the last two are the observation window.
        let mut e = entries(&[10; 8]);
        e[0].relevance = Some(0.9); // old but on topic
        e[1].relevance = Some(0.1);
        e[2].relevance = Some(0.2);
        e[3].uses = 5; // a heavy hitter: retrieved again and again
        e[3].relevance = Some(0.1);
        e[4].relevance = Some(0.1);
        e[5].relevance = Some(0.15);
        e[6].relevance = Some(0.0);
        e[7].relevance = Some(0.0);
        let usage = ContextUsage {
            window: 100,
            fixed_tokens: 20,
            queue_tokens: 80,
            queue_messages: 8,
        };
        let view = QueueView { entries: &e, usage };
        let chosen = policy.select(&view);
        // Half of 80 tokens: four messages, the least relevant, least used and oldest.
        assert_eq!(chosen, vec![1, 2, 4, 5]);
        let scores = policy.scores(&e);
        assert!(
            scores[6].is_infinite() && scores[7].is_infinite(),
            "observation window"
        );
        assert!(scores[0] > scores[1], "relevance beats age");
        assert!(scores[3] > scores[4], "a heavy hitter stays");

        // Reported attention counts like uses.
        let mut e2 = entries(&[10; 4]);
        e2[1].signals = vec![3.0];
        let policy = AttentionPolicy {
            observation: 1,
            ..AttentionPolicy::default()
        };
        let s = policy.scores(&e2);
        assert!(s[1] > s[0] && s[1] > s[2], "{s:?}");
        assert!(policy.wants_attention());
    }

    #[test]
    fn attention_without_signals_is_recency_and_frequency() {
        let policy = AttentionPolicy {
            observation: 1,
            ..AttentionPolicy::default()
        };
        let mut e = entries(&[10, 10, 10, 10, 10]);
        e[0].last_used = 50;
        e[0].uses = 2;
        let usage = ContextUsage {
            window: 60,
            fixed_tokens: 10,
            queue_tokens: 50,
            queue_messages: 5,
        };
        let view = QueueView { entries: &e, usage };
        assert_eq!(policy.select(&view), vec![1, 2, 3]);
    }

    #[test]
    fn policies_by_name() {
        assert_eq!(policy_by_name("attention").unwrap().name(), "attention");
        assert_eq!(policy_by_name("paper").unwrap().name(), "paper");
        assert_eq!(policy_by_name("lru").unwrap().name(), "lru");
        assert!(policy_by_name("").is_err());
    }

    fn entries(tokens: &[usize]) -> Vec<EntryView> {
        tokens
            .iter()
            .enumerate()
            .map(|(i, &tokens)| EntryView {
                id: MessageId::new(),
                kind: MessageKind::User,
                tokens,
                created_at: Utc::now(),
                last_used: i as u64,
                uses: 1,
                relevance: None,
                signals: Vec::new(),
                pinned: false,
            })
            .collect()
    }

    #[test]
    fn thresholds() {
        let policy = PaperPolicy::default();
        let usage = |fixed| ContextUsage {
            window: 1000,
            fixed_tokens: fixed,
            queue_tokens: 600,
            queue_messages: 6,
        };
        assert_eq!(policy.pressure(&usage(0)), Pressure::Normal);
        assert_eq!(policy.pressure(&usage(99)), Pressure::Normal);
        assert_eq!(policy.pressure(&usage(100)), Pressure::Warn);
        assert_eq!(policy.pressure(&usage(399)), Pressure::Warn);
        assert_eq!(policy.pressure(&usage(400)), Pressure::Flush);
    }

    #[test]
    fn evicts_oldest_half_by_tokens_skipping_pinned() {
        let policy = PaperPolicy::default();
        let mut e = entries(&[10, 10, 50, 10, 10, 10]);
        e[1].pinned = true;
        let usage = ContextUsage {
            window: 100,
            fixed_tokens: 0,
            queue_tokens: 100,
            queue_messages: 6,
        };
        let view = QueueView { entries: &e, usage };
        // 100 queue tokens: free 50, oldest first, never the pinned one.
        assert_eq!(policy.select(&view), vec![0, 2]);
    }
}
