use memgpt_core::memgpt_fn;

/// Has a typo in its attribute.
#[memgpt_fn(terminl)]
async fn typo() -> String {
    String::new()
}

fn main() {}
