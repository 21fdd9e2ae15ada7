//! # memgpt-mcp
//!
//! The [Model Context Protocol](https://modelcontextprotocol.io) for memgpt-rs agents, on the
//! official Rust SDK ([`rmcp`]), both ways:
//!
//! * [`client`] (feature `client`): attach MCP servers to an agent, started as a child process
//!   speaking over stdio or reached over streamable HTTP. Each tool becomes an agent function
//!   named `<server>__<tool>`, with the server's JSON schema, arguments checked against it
//!   before the call (the model reads a precise error otherwise), a timeout, and the paper's
//!   `request_heartbeat` flag like every other function. A server whose session ends is
//!   restarted (or reconnected) on its next call, with a backoff while that fails.
//! * [`server`] (feature `server`): serve an agent's memory (its blocks, archival insert and
//!   search, conversation search) as MCP tools, so any MCP client can use a memgpt memory.
//!   `memgpt mcp --agent NAME` runs it over stdio.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use memgpt_core::function::FunctionRegistry;
//! use memgpt_mcp::client::McpServerConfig;
//!
//! let files = McpServerConfig::stdio("files", "mcp-server-filesystem", ["/srv/notes"])
//!     .connect()
//!     .await?;
//! let mut registry = FunctionRegistry::linked()?;
//! let names = files.register(&mut registry)?; // ["files__read_file", ...]
//! let mut agent = memgpt_core::Agent::builder().registry(registry);
//! for name in names {
//!     agent = agent.function(name);
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "server")]
pub mod server;

pub use rmcp;
