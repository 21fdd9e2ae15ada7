//! Failpoints: named places in the commit, flush and indexing paths where a crash test can stop
//! the process.
//!
//! A crash test needs to kill a process *inside* a commit, not merely near one: between a
//! transaction's inserts and its `COMMIT`, between a summary and the eviction it belongs to,
//! between a derived index's data and its watermark. Stores and the agent loop call [`hit`] at
//! those places. Without the `failpoints` feature [`hit`] is an empty inline function; with it,
//! the `MEMGPT_FAILPOINTS` environment variable (read once) arms some of them:
//!
//! ```text
//! MEMGPT_FAILPOINTS="commit.before=pause@3;flush.summarized=abort"
//! ```
//!
//! Each entry is `name=action`, optionally `@n` to act on the n-th time the point is reached in
//! this process (the first by default). Actions:
//!
//! * `pause`: print `FAILPOINT <name>` on standard output and stop the calling thread for good,
//!   so a supervising process that reads the line can SIGKILL the child at exactly that place;
//! * `abort`: abort the process at once (no destructors, no flushing: as abrupt as SIGKILL).
//!
//! * `fault`: no stop at all; [`fault`] returns `true` for the name from then on. The stores
//!   use it for *seeded faults* ([`FAULTS`]): a known bug put back on purpose, to show that a
//!   test finds it (`MEMGPT_FAILPOINTS="fault.sqlite.reused_sequence_numbers=fault"`).
//!
//! The points this workspace defines are listed in [`POINTS`], its seeded faults in
//! [`FAULTS`]; a store of your own may add its own names.

/// The environment variable that arms failpoints (with the `failpoints` feature).
pub const ENV: &str = "MEMGPT_FAILPOINTS";

/// The failpoints of this workspace's agent loop and stores, with where each one sits.
pub const POINTS: &[(&str, &str)] = &[
    (
        "commit.before",
        "a store's commit: every row of the step inserted, the transaction not yet committed",
    ),
    (
        "commit.after",
        "a store's commit: the transaction committed, the caller not yet told",
    ),
    (
        "passages.insert",
        "a store's commit: as each passage row is prepared (a bulk insert stops part way)",
    ),
    (
        "passages.retire",
        "a store's commit: the new version of an updated fact prepared, the old one not yet retired",
    ),
    (
        "flush.summarized",
        "a flush: messages taken out of the queue and summarised, the summary not yet set",
    ),
    (
        "tantivy.catch_up",
        "the tantivy recall index: new documents written and the commit prepared, not yet committed",
    ),
    (
        "usearch.save",
        "a usearch index save: the new index file in place, its watermark sidecar not yet",
    ),
];

/// The seeded faults of this workspace's stores, with what each one breaks (see [`fault`]).
pub const FAULTS: &[(&str, &str)] = &[
    (
        "fault.sqlite.reused_sequence_numbers",
        "SQLite gives the numbers of deleted newest messages and passages again (the bug fixed by \
         migration 12): derived indexes take the new rows for rows they have seen",
    ),
    (
        "fault.tantivy.archival_tags_ignored",
        "the tantivy archival index leaves the query's tag filter out",
    ),
    (
        "fault.postgres.recall_range_end_included",
        "PostgreSQL's recall filter admits messages at the end of a time range (it is exclusive)",
    ),
    (
        "fault.usearch.dirty_mark_lost",
        "a usearch catch-up dropped half-way no longer marks the agent's index as behind",
    ),
];

/// Whether the seeded fault `name` is armed (`name=fault` in [`ENV`]); always `false` without
/// the `failpoints` feature.
#[inline(always)]
pub fn fault(name: &'static str) -> bool {
    #[cfg(feature = "failpoints")]
    return armed::fault(name);
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = name;
        false
    }
}

/// Marks the failpoint `name`: does nothing unless the `failpoints` feature is on and
/// [`ENV`] arms this point (see the [module documentation](self)).
#[inline(always)]
pub fn hit(name: &'static str) {
    #[cfg(feature = "failpoints")]
    armed::hit(name);
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

#[cfg(feature = "failpoints")]
mod armed {
    use std::io::Write;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Action {
        Pause,
        Abort,
        Fault,
    }

    #[derive(Debug)]
    pub(super) struct Point {
        pub(super) name: String,
        pub(super) action: Action,
        pub(super) on_hit: u64,
        hits: AtomicU64,
    }

    static PLAN: OnceLock<Vec<Point>> = OnceLock::new();

    /// Parses `name=action[@n]` entries separated by `;`. A malformed entry is reported on
    /// standard error and ignored (a crash test then sees its point never reached).
    pub(super) fn parse(spec: &str) -> Vec<Point> {
        let mut points = Vec::new();
        for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let parsed = entry.split_once('=').and_then(|(name, rest)| {
                let (action, on_hit) = match rest.split_once('@') {
                    Some((action, n)) => (action, n.trim().parse::<u64>().ok()?),
                    None => (rest, 1),
                };
                let action = match action.trim() {
                    "pause" => Action::Pause,
                    "abort" => Action::Abort,
                    "fault" => Action::Fault,
                    _ => return None,
                };
                Some(Point {
                    name: name.trim().to_owned(),
                    action,
                    on_hit: on_hit.max(1),
                    hits: AtomicU64::new(0),
                })
            });
            match parsed {
                Some(point) => points.push(point),
                None => eprintln!(
                    "memgpt: ignoring the malformed failpoint {entry:?} (expected name=pause|abort|fault[@n])"
                ),
            }
        }
        points
    }

    fn plan() -> &'static [Point] {
        PLAN.get_or_init(|| {
            std::env::var(crate::failpoint::ENV)
                .map(|spec| parse(&spec))
                .unwrap_or_default()
        })
    }

    pub(super) fn fault(name: &'static str) -> bool {
        plan()
            .iter()
            .any(|p| p.name == name && p.action == Action::Fault)
    }

    pub(super) fn hit(name: &'static str) {
        let plan = plan();
        for point in plan
            .iter()
            .filter(|p| p.name == name && p.action != Action::Fault)
        {
            if point.hits.fetch_add(1, Ordering::SeqCst) + 1 != point.on_hit {
                continue;
            }
            match point.action {
                Action::Fault => {}
                Action::Abort => std::process::abort(),
                Action::Pause => {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "FAILPOINT {name}");
                    let _ = out.flush();
                    drop(out);
                    loop {
                        std::thread::park();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "failpoints")]
    #[test]
    fn entries_parse_with_counts_and_bad_ones_are_skipped() {
        use super::armed::{Action, parse};

        let points = parse("commit.before=pause@3; flush.summarized=abort;x=explode;y");
        let got: Vec<_> = points
            .iter()
            .map(|p| (p.name.as_str(), p.action, p.on_hit))
            .collect();
        assert_eq!(
            got,
            [
                ("commit.before", Action::Pause, 3),
                ("flush.summarized", Action::Abort, 1)
            ]
        );
    }
}
