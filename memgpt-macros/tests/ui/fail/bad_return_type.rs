use memgpt_core::memgpt_fn;

struct Report;

/// Writes a report.
#[memgpt_fn]
async fn report(
    /// The report's text.
    text: String,
) -> Report {
    let _ = text;
    Report
}

fn main() {}
