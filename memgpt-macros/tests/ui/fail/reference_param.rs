use memgpt_core::memgpt_fn;

/// Echoes its text.
#[memgpt_fn]
async fn echo(
    /// The text.
    text: &str,
) -> String {
    text.to_owned()
}

fn main() {}
