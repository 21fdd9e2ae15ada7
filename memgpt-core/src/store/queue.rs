//! The FIFO queue as stores keep it: rows of the agent's queued message ids, changed by each
//! commit in what it changed ([`QueueChange`]), and the rest of the state as one record
//! ([`StateRecord`]).
//!
//! An agent's state holds the ids of its queued messages ([`AgentState::fifo`]): a thousand
//! at a thousand queued messages. A store that rewrote them with the state on every commit
//! would write more per step the longer the conversation. The SQL stores keep the queue as one
//! row per message instead and apply the commit's [`QueueChange`]: the messages the step
//! evicted and the ones it queued, a few rows whatever the history.

use serde::Serialize;

use crate::ids::MessageId;

use super::AgentState;

/// How a commit changes the agent's FIFO queue: the ids it removed, then the ids it appended
/// (in queue order). Applying it to the queue the previous commit left gives the commit's
/// [`AgentState::fifo`] exactly ([`QueueChange::apply`]).
///
/// Messages only join a queue at its end; they leave from anywhere (a policy chooses), so
/// this is every change a step makes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueChange {
    /// Ids whose entries leave the queue (every entry with that id).
    pub removed: Vec<MessageId>,
    /// Ids appended at the end of the queue, oldest first.
    pub appended: Vec<MessageId>,
}

impl QueueChange {
    /// The change from `old` to `new`, or `None` when no change of this shape gives `new`
    /// (an id that leaves the queue while another entry of it stays): then the store writes
    /// the whole queue.
    ///
    /// ```
    /// use memgpt_core::ids::MessageId;
    /// use memgpt_core::store::QueueChange;
    ///
    /// let [a, b, c, d] = [(); 4].map(|_| MessageId::new());
    /// let change = QueueChange::between(&[a, b, c], &[b, c, d]).unwrap();
    /// assert_eq!(change.removed, [a]);
    /// assert_eq!(change.appended, [d]);
    /// let mut queue = vec![a, b, c];
    /// change.apply(&mut queue);
    /// assert_eq!(queue, [b, c, d]);
    /// ```
    pub fn between(old: &[MessageId], new: &[MessageId]) -> Option<Self> {
        // The longest prefix of `new` that is a subsequence of `old`, matched greedily: what
        // stays. Whatever of `old` it skips leaves; the rest of `new` is appended.
        let mut removed = Vec::new();
        let mut next = 0;
        let mut kept = 0;
        for id in new {
            let Some(offset) = old[next..].iter().position(|o| o == id) else {
                break;
            };
            removed.extend_from_slice(&old[next..next + offset]);
            next += offset + 1;
            kept += 1;
        }
        removed.extend_from_slice(&old[next..]);
        let change = Self {
            removed,
            appended: new[kept..].to_vec(),
        };
        // Removal is by id: it must not take an entry that stays (a repeated id). One that is
        // appended again is fine: removal comes first.
        if !change.removed.is_empty() {
            let leaving: std::collections::HashSet<&MessageId> = change.removed.iter().collect();
            if new[..kept].iter().any(|id| leaving.contains(id)) {
                return None;
            }
        }
        Some(change)
    }

    /// Whether the queue stays as it was.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.appended.is_empty()
    }

    /// Applies the change to `queue` (what a store does to its rows).
    pub fn apply(&self, queue: &mut Vec<MessageId>) {
        if !self.removed.is_empty() {
            let leaving: std::collections::HashSet<&MessageId> = self.removed.iter().collect();
            queue.retain(|id| !leaving.contains(id));
        }
        queue.extend_from_slice(&self.appended);
    }
}

/// An [`AgentState`] without its queue, as stores that keep the queue in rows of its own
/// ([`QueueChange`]) serialize it: the same JSON as the state's, without `fifo`. It
/// deserializes as an [`AgentState`] with an empty `fifo`, which the store then fills.
#[derive(Debug, Serialize)]
pub struct StateRecord<'a> {
    id: &'a crate::ids::AgentId,
    name: &'a str,
    version: u64,
    config: &'a crate::config::AgentConfig,
    system: &'a str,
    memory: &'a crate::memory::WorkingContext,
    summary: &'a super::Summary,
    pinned: &'a [MessageId],
    pressure_warned: bool,
    heartbeats_paused_until: &'a Option<chrono::DateTime<chrono::Utc>>,
    memory_updated_at: &'a chrono::DateTime<chrono::Utc>,
    created_at: &'a chrono::DateTime<chrono::Utc>,
    updated_at: &'a chrono::DateTime<chrono::Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending_approval: &'a Option<super::PendingApproval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consolidated_until: &'a Option<chrono::DateTime<chrono::Utc>>,
}

impl<'a> StateRecord<'a> {
    /// The record of `state`.
    pub fn of(state: &'a AgentState) -> Self {
        // Exhaustive: a field added to the state must be added here (or left out on purpose).
        let AgentState {
            id,
            name,
            version,
            config,
            system,
            memory,
            summary,
            fifo: _,
            pinned,
            pressure_warned,
            heartbeats_paused_until,
            memory_updated_at,
            created_at,
            updated_at,
            pending_approval,
            consolidated_until,
        } = state;
        Self {
            id,
            name,
            version: *version,
            config,
            system,
            memory,
            summary,
            pinned,
            pressure_warned: *pressure_warned,
            heartbeats_paused_until,
            memory_updated_at,
            created_at,
            updated_at,
            pending_approval,
            consolidated_until,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(n: usize) -> Vec<MessageId> {
        (0..n).map(|_| MessageId::new()).collect()
    }

    #[test]
    fn a_step_changes_a_few_ids_whatever_the_queue_length() {
        let old = ids(10_000);
        let mut new = old[40..].to_vec();
        new.extend(ids(3));
        let change = QueueChange::between(&old, &new).unwrap();
        assert_eq!(change.removed, old[..40]);
        assert_eq!(change.appended, new[new.len() - 3..]);
        let unchanged = QueueChange::between(&old, &old).unwrap();
        assert!(unchanged.is_empty());
    }

    #[test]
    fn a_removed_id_that_stays_elsewhere_asks_for_the_whole_queue() {
        let [a, b] = [MessageId::new(), MessageId::new()];
        assert_eq!(QueueChange::between(&[a, b, a], &[b, a]), None);
        // Moving an entry to the end is a removal and an append of the same id.
        let change = QueueChange::between(&[a, b], &[b, a]).unwrap();
        let mut queue = vec![a, b];
        change.apply(&mut queue);
        assert_eq!(queue, [b, a]);
    }

    #[test]
    fn the_record_is_the_state_without_its_queue() {
        let mut state = crate::store::memory::tests::state(crate::ids::AgentId::new());
        state.fifo = ids(3);
        state.pinned = state.fifo[..1].to_vec();
        state.consolidated_until = Some(chrono::Utc::now());
        let mut full = serde_json::to_value(&state).unwrap();
        full.as_object_mut().unwrap().remove("fifo");
        let record = serde_json::to_value(StateRecord::of(&state)).unwrap();
        assert_eq!(record, full);
        let back: AgentState = serde_json::from_value(record).unwrap();
        assert!(back.fifo.is_empty());
        assert_eq!(
            AgentState {
                fifo: state.fifo.clone(),
                ..back
            },
            state
        );
    }

    proptest! {
        /// Whatever the old and new queues (repeated ids included), the change either gives
        /// the new queue exactly or asks for the whole queue.
        #[test]
        fn applying_the_change_gives_the_new_queue(
            old in proptest::collection::vec(0u8..12, 0..24),
            new in proptest::collection::vec(0u8..16, 0..24),
        ) {
            let pool = ids(16);
            let old: Vec<MessageId> = old.iter().map(|&i| pool[i as usize]).collect();
            let new: Vec<MessageId> = new.iter().map(|&i| pool[i as usize]).collect();
            if let Some(change) = QueueChange::between(&old, &new) {
                let mut queue = old.clone();
                change.apply(&mut queue);
                prop_assert_eq!(queue, new);
            }
        }

        /// A step's usual change (evict a prefix or any entries, append new ids) is never
        /// refused.
        #[test]
        fn eviction_and_appends_are_always_a_change(
            keep in proptest::collection::vec(any::<bool>(), 0..40),
            appended in 0usize..5,
        ) {
            let old = ids(keep.len());
            let mut new: Vec<MessageId> =
                old.iter().zip(&keep).filter(|(_, k)| **k).map(|(id, _)| *id).collect();
            new.extend(ids(appended));
            let change = QueueChange::between(&old, &new).unwrap();
            prop_assert_eq!(change.appended.len(), appended);
            prop_assert_eq!(change.removed.len(), keep.iter().filter(|k| !**k).count());
        }
    }
}
