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
        bail!("{}", crate::pull::HOW_TO_CONFIGURE);
    };
    // Serving memory that does not exist helps no client: a typo must not make an empty agent.
    if open::find_agent(&storage, name).await?.is_none() {
        bail!(
            "no agent named `{name}` in {} (create it with `memgpt chat --agent {name}` or \
             `memgpt agents import`; `memgpt agents list` shows the agents)",
            settings.store_url()
        );
    }
    // The memory server offers memory functions only: no MCP servers of its own.
    let opened = open::open_or_create(settings, &llm, storage, name, false).await?;
    let server = MemoryServer::new(opened.agent);
    eprintln!(
        "memgpt mcp: agent {name} in {}; serving {} tools on stdio",
        settings.store_url(),
        server.tools().len()
    );
    server.serve_stdio().await.context("serving MCP on stdio")
}
