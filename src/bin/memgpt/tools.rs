//! MCP servers from `memgpt.toml` (`[mcp_servers.NAME]`): connected when an agent opens, their
//! tools registered as functions named `SERVER__TOOL` and offered to the agents they serve.
//!
//! A server that cannot be attached (a missing command, a process that exits, an unreachable
//! URL, a broken table) stops nothing: a warning names it and why, the agent goes without its
//! tools, and [`Attached::report`] (`/mcp` in `memgpt chat`) lists it as down. A server whose
//! session ends later is restarted on its next call (memgpt-mcp's client does that).

use anyhow::Result;
use memgpt::function::FunctionRegistry;

use crate::settings::Settings;

/// The MCP servers attached to one agent: the registry with their tools, and the sessions
/// (kept open as long as the agent runs).
pub struct Attached {
    /// The linked functions plus the servers' tools.
    pub registry: FunctionRegistry,
    /// Each attached server's name and the functions it brought, in the settings' order.
    pub servers: Vec<(String, Vec<String>)>,
    /// The servers that could not be attached, and why.
    pub down: Vec<(String, String)>,
    #[cfg(feature = "mcp")]
    sessions: Vec<memgpt::mcp::client::McpClient>,
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

    /// Whether `function` belongs to a server that is down.
    pub fn is_down(&self, function: &str) -> bool {
        function
            .split_once("__")
            .is_some_and(|(server, _)| self.down.iter().any(|(name, _)| name == server))
    }

    /// One line per server, as `/mcp` prints them: its state and its functions, or why it is
    /// down.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for (server, names) in &self.servers {
            out.push_str(&format!(
                "MCP server {server}: {} ({})\n",
                names.join(", "),
                self.health(server)
            ));
        }
        for (server, why) in &self.down {
            out.push_str(&format!(
                "MCP server {server}: down since the start, its tools are not offered ({why})\n"
            ));
        }
        out
    }

    #[cfg(feature = "mcp")]
    fn health(&self, server: &str) -> String {
        self.sessions
            .iter()
            .find(|s| s.name() == server)
            .map_or_else(|| "up".to_owned(), |s| s.health().to_string())
    }

    #[cfg(not(feature = "mcp"))]
    fn health(&self, _: &str) -> String {
        "up".to_owned()
    }
}

/// Connects the MCP servers the settings attach to the agent `agent` (every configured server
/// for `None`: a server gives each agent the tools its `tools` list names); `None` when there
/// are none. A server that cannot be attached is left out with a warning on stderr, and listed
/// in [`Attached::down`].
#[cfg(feature = "mcp")]
pub async fn attach(settings: &Settings, agent: Option<&str>) -> Result<Option<Attached>> {
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
    let mut down = Vec::new();
    for entry in entries {
        let attached = async {
            let config: McpServerConfig = serde_json::from_value(entry.config.clone())
                .map_err(|e| format!("its table in memgpt.toml is not valid: {e}"))?;
            let client = config.connect().await.map_err(|e| e.reason())?;
            let names = client.register(&mut registry).map_err(|e| e.to_string())?;
            Ok::<_, String>((client, names))
        }
        .await;
        match attached {
            Ok((client, names)) => {
                servers.push((entry.name.clone(), names));
                sessions.push(client);
            }
            Err(why) => {
                eprintln!(
                    "warning: MCP server `{}` is down, so its tools are left out: {why}",
                    entry.name
                );
                down.push((entry.name.clone(), why));
            }
        }
    }
    Ok(Some(Attached {
        registry,
        servers,
        down,
        sessions,
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
