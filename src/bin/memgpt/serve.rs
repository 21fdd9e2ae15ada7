//! `memgpt serve`: the REST + streaming API over the configured store and model.

use anyhow::{Context, Result};
use memgpt::server::{Server, ServerConfig};

use crate::open;
use crate::settings::Settings;

/// Serves until Ctrl-C or SIGTERM, then lets requests in flight finish.
pub async fn run(settings: &Settings, listen: &str) -> Result<()> {
    let url = settings.store_url();
    if settings.get("store").is_none() {
        let dir = settings.data_dir();
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating the data directory {}", dir.display()))?;
    }
    // The server opens the store itself; its embedder is the one the settings name, checked
    // against the store's vectors (`auto` follows their model, as `memgpt chat` does), read
    // first without taking the store.
    let stored = {
        let reader = open::reader(settings).await?;
        open::stored_space(&reader).await?
    };
    let Some(llm) = open::llm(settings, stored.as_ref()).await? else {
        anyhow::bail!(
            "no model is configured: set `base_url` (an OpenAI-compatible server), an API key, \
             or `provider = \"local\"`"
        );
    };
    let admin_key = std::env::var("MEMGPT_ADMIN_KEY")
        .ok()
        .filter(|k| !k.is_empty());
    if admin_key.is_none() {
        eprintln!(
            "memgpt serve: MEMGPT_ADMIN_KEY is not set, so no tenant or API key can be created"
        );
    }
    // Every MCP server of memgpt.toml: an agent is given the tools its `tools` list names.
    let tools = crate::tools::attach(settings, None).await?;
    if let Some(tools) = &tools {
        for (server, names) in &tools.servers {
            eprintln!(
                "memgpt serve: MCP server {server} offers {}",
                names.join(", ")
            );
        }
    }
    let config = ServerConfig {
        admin_key,
        functions: tools.as_ref().map(|t| t.registry.clone()),
        ..ServerConfig::default()
    };
    let server = Server::open(&url, llm.provider.clone(), llm.embedder.clone(), config)
        .await
        .map_err(|e| open::explain_busy(&url, e))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let address = listener.local_addr()?;
    eprintln!(
        "memgpt serve: {} on http://{address} (store {})",
        llm.describe(""),
        crate::settings::without_password(&url)
    );
    server.serve(listener, shutdown()).await?;
    drop(tools);
    eprintln!("memgpt serve: stopped");
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
