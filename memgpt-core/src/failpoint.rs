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
//! The points this workspace defines are listed in [`POINTS`]; a store of your own may add its
//! own names.

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
                    "memgpt: ignoring the malformed failpoint {entry:?} (expected name=pause|abort[@n])"
                ),
            }
        }
        points
    }

    pub(super) fn hit(name: &'static str) {
        let plan = PLAN.get_or_init(|| {
            std::env::var(crate::failpoint::ENV)
                .map(|spec| parse(&spec))
                .unwrap_or_default()
        });
        for point in plan.iter().filter(|p| p.name == name) {
            if point.hits.fetch_add(1, Ordering::SeqCst) + 1 != point.on_hit {
                continue;
            }
            match point.action {
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
