//! `memgpt mcp`: an agent's memory as MCP tools on stdin and stdout.

use anyhow::{Context, Result, bail};
use memgpt::Agent;
use memgpt::mcp::server::MemoryServer;

use crate::embedders::WhenMissing;
use crate::open;
use crate::settings::Settings;

/// Opens the agent and serves its memory until the client hangs up. None of the memory
/// functions calls a model, so no LLM is needed (nor set up): only the store and the embedder
/// (`auto`: the store's model, or the light local model when it is in the model cache; never
/// a download, whose question would land on the protocol's stdin). Nothing but the protocol
/// goes to stdout; notes go to stderr.
pub async fn run(settings: &Settings, name: &str) -> Result<()> {
    let storage = open::session_storage(settings).await?;
    // Serving memory that does not exist helps no client: a typo must not make an empty agent.
    let Some(state) = open::find_agent(&storage, name).await? else {
        bail!(
            "no agent named `{name}` in {} (create it with `memgpt chat --agent {name}` or \
             `memgpt agents import`; `memgpt agents list` shows the agents)",
            settings.store_url()
        );
    };
    let stored = open::stored_space(&storage).await?;
    let embedder =
        crate::embedders::embedder(settings, stored.as_ref(), WhenMissing::GoWithout).await?;
    let mut builder = Agent::builder().without_model().storage(storage);
    if let Some(embedder) = &embedder {
        builder = builder.embedder(embedder.clone());
    }
    // The memory server offers memory functions only: no MCP servers of its own.
    let agent = builder
        .functions(open::functions_for(&state, None))
        .load(state.id)
        .await
        .with_context(|| format!("loading agent {name}"))?;
    let server = MemoryServer::new(agent);
    eprintln!(
        "memgpt mcp: agent {name} in {}; serving {} tools on stdio ({})",
        settings.store_url(),
        server.tools().len(),
        match &embedder {
            Some(embedder) => format!("embedder {}", embedder.model()),
            None => "no embedder: searches match words".to_owned(),
        }
    );
    server.serve_stdio().await.context("serving MCP on stdio")
}
