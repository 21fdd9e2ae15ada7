//! The JSON-schema-to-GBNF converter on any JSON value: a grammar or an error, never a panic or
//! a hang (recursive `$ref`s, deep nesting, odd keywords).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memgpt_providers::structured::{GbnfOptions, json_schema_to_gbnf};

fuzz_target!(|data: &[u8]| {
    if let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = json_schema_to_gbnf(&schema, &GbnfOptions::default());
    }
});
