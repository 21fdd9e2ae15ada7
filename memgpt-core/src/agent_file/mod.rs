//! Agent files: an agent's whole state in one JSON document, in Letta's agent-file format
//! (`.af`, schema v2), so agents move between memgpt stores and between memgpt and Letta.
//!
//! Letta's part holds the agent (system instructions, model, tags), its memory blocks, its
//! tools and the messages in its context window, with file-local ids (`agent-0`, `block-0`,
//! `tool-0`, `message-0`) whose references all resolve. What Letta has no place for goes under
//! the top-level key `memgpt`, which Letta ignores: archival passages (with embeddings), recall
//! history older than the context window, the recursive summary, the configuration (policy,
//! functions, window) and the embedding model. The file's `skills` (Letta's, top level) become
//! the skills of its first agent ([`Skill`](crate::memory::Skill)) and are written back there.
//!
//! [`import`] reads Letta's own exports too (including files whose JSON is itself a JSON
//! string), maps Letta's memory tools onto memgpt's functions, reports what it could not map,
//! and writes everything in one store transaction where the store offers one
//! ([`AgentStore::create_agent_with`](crate::store::AgentStore::create_agent_with)): an import
//! either lands whole or not at all.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use memgpt_core::agent_file::{self, ImportOptions};
//! use memgpt_core::store::Storage;
//! use memgpt_core::testing::ScriptedProvider;
//! use memgpt_core::Agent;
//! use serde_json::json;
//!
//! let storage = Storage::in_memory();
//! let llm = Arc::new(ScriptedProvider::new());
//! llm.push_call("send_message", json!({"message": "Hello Ann!"}));
//! let mut agent = Agent::builder().name("sam").provider(llm).storage(storage.clone()).build().await?;
//! agent.step("Hi, I'm Ann").await?;
//!
//! let file = agent_file::export(&storage, agent.id()).await?;
//! let json = serde_json::to_string(&file)?;
//!
//! let elsewhere = Storage::in_memory();
//! let report = agent_file::import(&elsewhere, &agent_file::parse(&json)?, ImportOptions::default()).await?;
//! assert_eq!((report.name.as_str(), report.messages), ("sam", 3));
//! # Ok(()) }
//! ```

mod export;
mod import;
mod schema;
mod skills;

pub use export::export;
pub use import::{ImportOptions, ImportReport, import};
pub use schema::{
    AgentExtras, AgentFile, AgentSchema, BlockSchema, Content, EmbeddingConfig, Extension,
    FunctionCallSchema, LlmConfig, MessageSchema, PassageSchema, SkillSchema, ToolCallSchema,
    ToolSchema,
};

use crate::store::StoreError;

/// Why an agent file could not be read, written or imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentFileError {
    /// The text is not JSON of an agent file.
    #[error("not an agent file: {0}")]
    Json(#[from] serde_json::Error),
    /// The file is well-formed JSON but breaks the format's rules.
    #[error("invalid agent file: {0}")]
    Invalid(String),
    /// The store failed (nothing was imported).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads an agent file. Accepts the JSON document itself or, as some published files are, a
/// JSON string containing it.
pub fn parse(text: &str) -> Result<AgentFile, AgentFileError> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let value = match value {
        serde_json::Value::String(inner) => serde_json::from_str(&inner)?,
        other => other,
    };
    if value.get("agents").is_none() {
        return Err(AgentFileError::Invalid(
            "no `agents` list: this is not a schema-v2 agent file (Letta's older single-agent \
             format is not supported; re-export it from a current Letta)"
                .into(),
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            AgentFileError::Invalid(inner.to_string())
        } else {
            AgentFileError::Invalid(format!("{path}: {inner}"))
        }
    })
}
