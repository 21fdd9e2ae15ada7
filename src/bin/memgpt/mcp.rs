//! `memgpt mcp`: an agent's memory as MCP tools on stdin and stdout.

use anyhow::{Context, Result, bail};
use memgpt::mcp::server::MemoryServer;

use crate::open;
use crate::settings::Settings;

/// Opens (or creates) the agent and serves its memory until the client hangs up. Nothing but
/// the protocol goes to stdout; notes go to stderr.
pub async fn run(settings: &Settings, name: &str) -> Result<()> {
    let storage = open::storage(settings).await?;
    let stored = open::stored_space(&storage).await?;
    let Some(llm) = open::llm(settings, stored.as_ref()).await? else {
        bail!("{}", crate::local::HOW_TO_CONFIGURE);
    };
    let (agent, created) = open::open_or_create(settings, &llm, storage, name).await?;
    let server = MemoryServer::new(agent);
    eprintln!(
        "memgpt mcp: {} agent {name} in {}; serving {} tools on stdio",
        if created { "created" } else { "resumed" },
        settings.store_url(),
        server.tools().len()
    );
    server.serve_stdio().await.context("serving MCP on stdio")
}
