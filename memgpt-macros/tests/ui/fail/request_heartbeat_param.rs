use memgpt_core::memgpt_fn;

/// Declares the heartbeat flag itself.
#[memgpt_fn]
async fn beat(
    /// The flag.
    request_heartbeat: bool,
) -> String {
    request_heartbeat.to_string()
}

fn main() {}
