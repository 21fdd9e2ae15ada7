//! MCP servers from `memgpt.toml` (`[mcp_servers.NAME]`): connected when an agent opens, their
//! tools registered as functions named `SERVER__TOOL` and offered to the agents they serve.

use anyhow::Result;
use memgpt::function::FunctionRegistry;

use crate::settings::Settings;

/// The MCP servers attached to one agent: the registry with their tools, and the sessions
/// (kept open as long as the agent runs).
pub struct Attached {
    /// The linked functions plus the servers' tools.
    pub registry: FunctionRegistry,
    /// Each server's name and the functions it brought, in the settings' order.
    pub servers: Vec<(String, Vec<String>)>,
    #[cfg(feature = "mcp")]
    _sessions: Vec<memgpt::mcp::client::McpClient>,
}

impl Attached {
    /// Every function the servers brought.
    pub fn functions(&self) -> impl Iterator<Item = &String> {
        self.servers.iter().flat_map(|(_, names)| names)
    }

    /// Whether `function` is named like an MCP tool (`SERVER__TOOL`).
    pub fn is_mcp_name(function: &str) -> bool {
        function.contains("__")
    }
}

/// Connects the MCP servers the settings attach to the agent `agent` (every configured server
/// for `None`: a server gives each agent the tools its `tools` list names); `None` when there
/// are none.
#[cfg(feature = "mcp")]
pub async fn attach(settings: &Settings, agent: Option<&str>) -> Result<Option<Attached>> {
    use anyhow::Context;
    use memgpt::mcp::client::McpServerConfig;

    let entries: Vec<_> = settings
        .mcp_servers
        .iter()
        .filter(|e| agent.is_none_or(|agent| e.serves(agent)))
        .collect();
    if entries.is_empty() {
        return Ok(None);
    }
    let mut registry = FunctionRegistry::linked()?;
    let mut servers = Vec::new();
    let mut sessions = Vec::new();
    for entry in entries {
        let config: McpServerConfig = serde_json::from_value(entry.config.clone())
            .with_context(|| format!("memgpt.toml: [mcp_servers.{}]", entry.name))?;
        let client = config
            .connect()
            .await
            .with_context(|| format!("attaching the MCP server `{}`", entry.name))?;
        let names = client.register(&mut registry)?;
        servers.push((entry.name.clone(), names));
        sessions.push(client);
    }
    Ok(Some(Attached {
        registry,
        servers,
        _sessions: sessions,
    }))
}

/// Without the `mcp` feature, configured MCP servers are an error, not silently ignored.
#[cfg(not(feature = "mcp"))]
pub async fn attach(settings: &Settings, agent: Option<&str>) -> Result<Option<Attached>> {
    if settings
        .mcp_servers
        .iter()
        .any(|e| agent.is_none_or(|agent| e.serves(agent)))
    {
        anyhow::bail!(
            "memgpt.toml attaches MCP servers, but this memgpt was built without the `mcp` \
             feature (cargo install memgpt --features mcp)"
        );
    }
    Ok(None)
}
