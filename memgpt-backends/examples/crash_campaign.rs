//! The crash campaign as a command: SIGKILL a child process (this program again) at every
//! failpoint and at random times, verify everything it acknowledged after each kill, and print
//! the tally. RELIABILITY.md records its results.
//!
//! ```text
//! cargo run -p memgpt-backends --features tantivy,usearch,postgres,conformance \
//!     --example crash_campaign -- --kills 1000 --store sqlite
//! cargo run -p memgpt-backends --features tantivy,usearch,postgres,conformance \
//!     --example crash_campaign -- --kills 1000 --store postgres://user@host/db
//! ```
//!
//! `--store sqlite` uses the embedded stack (SQLite + tantivy + usearch) in a fresh temporary
//! directory; any other value is a store URL (a PostgreSQL campaign gets its own schema).
//! `--seed N` changes the kill schedule, `--kills-per-agent N` how long one agent's history
//! grows. Exits with status 1 if anything was lost or corrupted.

use std::process::{Command, ExitCode};

use memgpt_backends::conformance::crash::{Campaign, child_main};

fn usage() -> ExitCode {
    eprintln!(
        "usage: crash_campaign [--kills N] [--store sqlite|URL] [--seed N] [--kills-per-agent N]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    // A child of the campaign runs the agent here and never returns; otherwise this returns.
    child_main();

    let mut kills = 1_000;
    let mut store = "sqlite".to_owned();
    let mut seed = 1;
    let mut per_agent = 100;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            return usage();
        };
        let number = value.parse::<u64>();
        match (flag.as_str(), number) {
            ("--kills", Ok(n)) => kills = n as usize,
            ("--seed", Ok(n)) => seed = n,
            ("--kills-per-agent", Ok(n)) => per_agent = n as usize,
            ("--store", _) => store = value,
            _ => return usage(),
        }
    }

    let dir = match tempfile_dir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("crash_campaign: no temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let url = match store.as_str() {
        "sqlite" => format!(
            "sqlite://{}?recall=tantivy&vectors=usearch&save_every=8",
            dir.display()
        ),
        url if url.starts_with("postgres") => {
            let separator = if url.contains('?') { '&' } else { '?' };
            format!(
                "{url}{separator}schema=crash_campaign_{}",
                std::process::id()
            )
        }
        url => url.to_owned(),
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("crash_campaign: cannot find this program: {e}");
            return ExitCode::FAILURE;
        }
    };
    let campaign = Campaign::new(url, move || Command::new(&exe))
        .kills(kills)
        .seed(seed)
        .kills_per_agent(per_agent);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("crash_campaign: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(campaign.run());
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(report) => {
            print!("{report}");
            if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("crash_campaign: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A fresh directory for the SQLite store.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("memgpt-crash-campaign-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
