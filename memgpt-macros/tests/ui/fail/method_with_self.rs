use memgpt_core::memgpt_fn;

struct Counter;

impl Counter {
    /// Counts.
    #[memgpt_fn]
    async fn count(&self) -> String {
        String::new()
    }
}

fn main() {
    let _ = Counter;
}
