use memgpt_core::memgpt_fn;

#[memgpt_fn]
async fn undocumented(
    /// A number.
    n: u32,
) -> String {
    n.to_string()
}

fn main() {}
