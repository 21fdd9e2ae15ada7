//! Tool-call arguments through the macro-generated dispatchers of the built-in functions: the
//! first byte picks a function, the rest is the raw arguments text, parsed and run exactly as
//! the agent loop does (`Agent::call`). Anything may be refused; nothing may panic.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use memgpt_core::Agent;
use memgpt_core::config::DEFAULT_FUNCTIONS;
use memgpt_core::testing::ScriptedProvider;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, raw)) = data.split_first() else {
        return;
    };
    let function = DEFAULT_FUNCTIONS[pick as usize % DEFAULT_FUNCTIONS.len()];
    let Ok(arguments) = serde_json::from_slice::<serde_json::Value>(raw) else {
        return;
    };
    memgpt_fuzz::runtime().block_on(async {
        let mut agent = Agent::builder()
            .provider(Arc::new(ScriptedProvider::new()))
            .build()
            .await
            .expect("agent");
        let _ = agent.call(function, arguments).await;
    });
});
