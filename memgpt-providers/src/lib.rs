//! LLM and embedding providers for memgpt-rs.
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
