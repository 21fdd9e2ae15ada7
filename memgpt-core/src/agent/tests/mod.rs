//! Agent-loop tests against the scripted in-process provider, one module per topic (as axum
//! splits `routing/tests/`); the helpers most of them share are here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use chrono::{Duration, TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::embed::HashingEmbedder;
use crate::llm::{LlmError, LlmProvider};
use crate::message::MessageKind;
use crate::store::{AgentStore, InMemoryStore, Page, RecallQuery, RecallStore, StoreError};
use crate::testing::ScriptedProvider;
use crate::time::ManualClock;

fn llm() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new())
}

async fn agent(llm: &Arc<ScriptedProvider>) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .build()
        .await
        .unwrap()
}

/// A small agent whose context fills after a handful of steps.
async fn small_agent(llm: &Arc<ScriptedProvider>, window: usize) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .system_prompt("You are a test agent.")
        .persona("I am T.")
        .block_limit(200)
        .functions(["send_message", "conversation_search"])
        .context_window(window)
        .build()
        .await
        .unwrap()
}

fn kinds(record: &StepRecord) -> Vec<MessageKind> {
    record.messages.iter().map(|m| m.kind).collect()
}

mod archival;
mod building;
mod companion;
mod durability;
mod embeddings;
mod events;
mod facts;
mod filters;
mod history;
mod limits;
mod messaging;
mod paging;
mod policies;
mod recall;
mod shared;
mod steps;
mod until_reply;

/// An agent on `storage` with a hashing embedder of `dimension` and the default functions.
async fn embedded_agent(
    llm: &Arc<ScriptedProvider>,
    storage: Storage,
    dimension: usize,
    defer: bool,
) -> Agent {
    Agent::builder()
        .provider(llm.clone())
        .storage(storage)
        .embedder(Arc::new(HashingEmbedder::new(dimension)))
        .defer_message_embeddings(defer)
        .build()
        .await
        .unwrap()
}

async fn unembedded(agent: &Agent) -> usize {
    agent
        .storage()
        .recall
        .unembedded_messages(agent.id(), 100)
        .await
        .unwrap()
        .len()
}

mod approval;
mod reindex;
