//! The tolerant text protocol (and the JSON repairer behind it) and the union-schema call parser
//! on any model output, against the built-in functions' schemas.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use memgpt_core::config::DEFAULT_FUNCTIONS;
use memgpt_core::function::FunctionRegistry;
use memgpt_core::llm::ToolSchema;
use memgpt_providers::structured::{parse_call, parse_lenient};

fn tools() -> &'static [ToolSchema] {
    static TOOLS: OnceLock<Vec<ToolSchema>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        FunctionRegistry::linked()
            .expect("registry")
            .function_set(&DEFAULT_FUNCTIONS)
            .expect("built-in functions")
            .schemas()
            .to_vec()
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_lenient(&text, tools());
    let _ = parse_call(&text, tools());
});
