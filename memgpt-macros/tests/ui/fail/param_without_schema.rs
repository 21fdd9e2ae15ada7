use memgpt_core::memgpt_fn;

struct Point {
    x: f64,
    y: f64,
}

/// Measures a point's distance to the origin.
#[memgpt_fn]
async fn norm(
    /// The point.
    point: Point,
) -> String {
    (point.x * point.x + point.y * point.y).sqrt().to_string()
}

fn main() {}
