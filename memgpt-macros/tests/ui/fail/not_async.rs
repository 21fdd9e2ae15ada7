use memgpt_core::memgpt_fn;

/// Not async.
#[memgpt_fn]
fn not_async(
    /// A number.
    n: u32,
) -> String {
    n.to_string()
}

fn main() {}
