//! The crash campaign (`memgpt_backends::conformance::crash`) against each persistent store: a
//! child process (this test binary, filtered to `crash_child_entry`) is SIGKILLed at every
//! failpoint and at random times; after each kill everything it acknowledged is verified.
//!
//! `MEMGPT_CRASH_KILLS` sets the kills per store (default [`DEFAULT_KILLS`]); the 1,000-kill
//! figures in RELIABILITY.md come from the `crash_campaign` example.

use std::process::Command;

use memgpt_backends::conformance::crash::{Campaign, KillPoint};

/// Kills per store in an ordinary test run.
const DEFAULT_KILLS: usize = 50;

/// Runs in the child process (returns at once in an ordinary test run).
pub fn child_main() {
    memgpt_backends::conformance::crash::child_main();
}

pub async fn run(name: &str, url: &str) {
    let kills = std::env::var("MEMGPT_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(DEFAULT_KILLS);
    let exe = std::env::current_exe().expect("test binary");
    let campaign = Campaign::new(url, move || {
        let mut command = Command::new(&exe);
        command.args([
            "crash_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ]);
        command
    })
    .kills(kills)
    .kills_per_agent(25);
    let report = campaign.run().await.expect("the campaign runs");
    eprintln!("{report}");
    assert!(report.is_clean(), "{name}: {report}");
    assert_eq!(report.kills, kills, "{name}: {report}");
    // A failpoint that is never reached would make its kills random ones in disguise.
    if kills >= 2 * report.points.len() {
        for (point, tally) in &report.points {
            assert!(
                tally.reached > 0,
                "{name}: the failpoint {point} was never reached: {report}"
            );
        }
    }
    let _ = KillPoint::Random;
}
