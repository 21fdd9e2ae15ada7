//! The agent-file importer on any text: parsed and imported into an in-memory store, or refused
//! with a clear error; never a panic, and a refused import leaves no agent behind.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use memgpt_core::store::{InMemoryStore, Storage};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(file) = memgpt_core::agent_file::parse(&text) else {
        return;
    };
    memgpt_fuzz::runtime().block_on(async {
        let storage = Storage::from_store(Arc::new(InMemoryStore::new()));
        if memgpt_core::agent_file::import(&storage, &file, Default::default())
            .await
            .is_err()
        {
            let agents = storage.agents.list_agents().await.expect("list");
            assert!(
                agents.is_empty(),
                "a refused import left {} agents",
                agents.len()
            );
        }
    });
});
