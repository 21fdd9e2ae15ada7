use memgpt_core::memgpt_fn;

/// The first.
#[memgpt_fn(name = "dup")]
async fn first() -> String {
    String::new()
}

/// The second.
#[memgpt_fn(name = "dup")]
async fn second() -> String {
    String::new()
}

fn main() {}
