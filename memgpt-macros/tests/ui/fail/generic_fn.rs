use memgpt_core::memgpt_fn;

/// Echoes anything.
#[memgpt_fn]
async fn echo<T: ToString>(
    /// The value.
    value: T,
) -> String {
    value.to_string()
}

fn main() {}
