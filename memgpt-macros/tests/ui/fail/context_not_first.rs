use memgpt_core::memgpt_fn;

/// Takes its context second.
#[memgpt_fn]
async fn late_context(
    /// A number.
    n: u32,
    ctx: &mut memgpt_core::function::FunctionContext<'_>,
) -> String {
    let _ = ctx;
    n.to_string()
}

fn main() {}
