//! memgpt
extern crate self as memgpt;
pub use memgpt_core::*;
