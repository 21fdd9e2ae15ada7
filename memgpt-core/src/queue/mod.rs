//! The FIFO queue and page replacement.
//!
//! * [`FifoQueue`]: the recent messages in context, each with its token count cached at append
//!   time, so the running total is O(1) per append.
//! * [`EvictionPolicy`]: decides *when* to warn or flush and *what* to evict, from a read-only
//!   [`QueueView`]. [`PaperPolicy`] is MemGPT's: warn at 70% of the window, flush at 100%, evict
//!   about 50% of the queue, oldest first; [`LruPolicy`] evicts the least recently used
//!   messages instead; [`AttentionPolicy`] keeps what the latest turns attend to (relevance,
//!   heavy hitters, recency); [`SaliencePolicy`] evicts what states least ([`salience`]), a
//!   little at a time. [`register_policy!`](crate::register_policy) registers a policy (built-in
//!   or yours) under a name; [`policy_by_name`] resolves the name an agent's config stores.
//! * [`QueueManager`]: carries a policy's decisions out and enforces the invariants whatever the
//!   policy returns: a function call is never separated from its results, pinned and protected
//!   messages stay, and a flush always frees enough to leave the flush zone when that is
//!   possible.

mod fifo;
mod manager;
mod policy;
mod registry;
mod salience;

pub use fifo::{FifoQueue, QueueEntry};
pub use manager::{EvictionPlan, PressureLines, QueueManager};
pub use policy::{
    AttentionPolicy, ContextUsage, EntryView, EvictionPolicy, LruPolicy, PaperPolicy, Pressure,
    QueueView,
};
pub use registry::{POLICIES, PolicyError, PolicyRegistration, policy_by_name, policy_names};
pub use salience::{SaliencePolicy, salience};
