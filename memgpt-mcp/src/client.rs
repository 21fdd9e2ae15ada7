//! MCP servers' tools as agent functions.
//!
//! [`McpServerConfig`] says how to reach a server (a child process over stdio, or a URL over
//! streamable HTTP); [`McpServerConfig::connect`] starts the session and lists the tools;
//! [`McpClient::register`] adds them to a [`FunctionRegistry`] as [`McpTool`]s, named
//! `<server>__<tool>`. The session lives as long as the client or any of its tools.
//!
//! A call goes through the same gates as any function's: the arguments are checked against the
//! tool's JSON schema first (a wrong call never reaches the server; the model reads what to
//! fix), the call has a timeout, and a server error, a tool error or a broken connection comes
//! back to the model as the call's error result.

use std::collections::BTreeMap;
use std::fmt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memgpt_core::function::{
    Function, FunctionContext, FunctionRegistry, FunctionReturn, RegistryError, validate_arguments,
};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, ResourceContents, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;

/// How long a call (and the handshake) may take unless configured: 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What separates the server's name from the tool's in a function name.
pub const NAMESPACE_SEPARATOR: &str = "__";

const HEARTBEAT: &str = "request_heartbeat";
const HEARTBEAT_DOC: &str = "true: run again right after this call, to chain more calls.";

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server's name cannot prefix function names.
    #[error("invalid MCP server name `{0}`: use letters, digits, `_` or `-`")]
    InvalidName(String),
    /// The child process could not be started.
    #[error("could not start the MCP server `{server}` (`{command}`): {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The command.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The session could not be opened or the tools listed.
    #[error("the MCP server `{server}` failed: {message}")]
    Protocol {
        /// The server's name.
        server: String,
        /// What happened.
        message: String,
    },
    /// The server did not answer in time.
    #[error("the MCP server `{server}` did not answer within {seconds} s")]
    Timeout {
        /// The server's name.
        server: String,
        /// The timeout.
        seconds: u64,
    },
    /// A tool could not be registered (its name or schema).
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// How to reach an MCP server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout (its stderr goes to the log).
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        /// Extra environment variables.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
    /// A server speaking streamable HTTP at `url` (e.g. `http://127.0.0.1:8000/mcp`).
    Http {
        /// The endpoint.
        url: String,
        /// Sent as `Authorization: Bearer <token>`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer_token: Option<String>,
    },
}

/// An MCP server to attach: its name (the prefix of its tools' function names), how to reach
/// it, and how long a call may take.
///
/// In TOML (`memgpt.toml`) or JSON:
///
/// ```
/// use memgpt_mcp::client::{McpServerConfig, McpTransport};
///
/// let config: McpServerConfig = serde_json::from_str(
///     r#"{"name": "files", "transport": "stdio", "command": "mcp-server-filesystem", "args": ["/srv"]}"#,
/// ).unwrap();
/// assert_eq!(config, McpServerConfig::stdio("files", "mcp-server-filesystem", ["/srv"]));
/// assert!(matches!(config.transport, McpTransport::Stdio { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerConfig {
    /// The server's name: letters, digits, `_` and `-`.
    pub name: String,
    /// How to reach it.
    #[serde(flatten)]
    pub transport: McpTransport,
    /// Seconds a call (or the handshake) may take; default 60.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
}

fn default_timeout_secs() -> u64 {
    DEFAULT_TIMEOUT.as_secs()
}

impl McpServerConfig {
    /// A server started as `command args...`, speaking over stdio.
    pub fn stdio<S: Into<String>>(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: BTreeMap::new(),
            },
            timeout_secs: default_timeout_secs(),
        }
    }

    /// A server reached over streamable HTTP.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Http {
                url: url.into(),
                bearer_token: None,
            },
            timeout_secs: default_timeout_secs(),
        }
    }

    /// How long a call may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout_secs = timeout.as_secs().max(1);
        self
    }

    /// Starts the session: spawns or connects, shakes hands, lists the tools.
    pub async fn connect(&self) -> Result<McpClient, McpError> {
        McpClient::connect(self).await
    }
}

type Session = RunningService<RoleClient, ClientConfig>;

/// An open session with one MCP server, and the tools it offers.
pub struct McpClient {
    name: String,
    timeout: Duration,
    session: Arc<Session>,
    tools: Vec<Tool>,
}

impl fmt::Debug for McpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClient")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Starts a session with the server `config` names (see [`McpServerConfig::connect`]).
    pub async fn connect(config: &McpServerConfig) -> Result<Self, McpError> {
        let name = config.name.clone();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(McpError::InvalidName(name));
        }
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("memgpt-rs", env!("CARGO_PKG_VERSION")),
        );
        let protocol = |e: &dyn fmt::Display| McpError::Protocol {
            server: name.clone(),
            message: e.to_string(),
        };
        let timed_out = || McpError::Timeout {
            server: name.clone(),
            seconds: timeout.as_secs(),
        };
        let session = match &config.transport {
            McpTransport::Stdio { command, args, env } => {
                let mut process = tokio::process::Command::new(command);
                process.args(args).envs(env).kill_on_drop(true);
                let (transport, stderr) = TokioChildProcess::builder(process)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|source| McpError::Spawn {
                        server: name.clone(),
                        command: command.clone(),
                        source,
                    })?;
                if let Some(stderr) = stderr {
                    let server = name.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(target: "memgpt_mcp::server_log", server = %server, "{line}");
                        }
                    });
                }
                tokio::time::timeout(timeout, info.serve(transport))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| protocol(&e))?
            }
            McpTransport::Http { url, bearer_token } => {
                memgpt_providers::http::install_crypto_provider();
                let mut settings = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                settings.auth_header = bearer_token.clone();
                let transport = StreamableHttpClientTransport::from_config(settings);
                tokio::time::timeout(timeout, info.serve(transport))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| protocol(&e))?
            }
        };
        let tools = tokio::time::timeout(timeout, session.list_all_tools())
            .await
            .map_err(|_| timed_out())?
            .map_err(|e| protocol(&e))?;
        tracing::info!(server = %name, tools = tools.len(), "MCP server attached");
        Ok(Self {
            name,
            timeout,
            session: Arc::new(session),
            tools,
        })
    }

    /// The server's name (the prefix of its function names).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools as the server listed them.
    pub fn server_tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tools as agent functions.
    pub fn tools(&self) -> Vec<McpTool> {
        self.tools
            .iter()
            .map(|tool| McpTool::new(&self.name, tool, Arc::clone(&self.session), self.timeout))
            .collect()
    }

    /// Registers every tool in `registry` and returns their function names, in the server's
    /// order. A name that is taken or invalid is an error and nothing is registered.
    pub fn register(&self, registry: &mut FunctionRegistry) -> Result<Vec<String>, McpError> {
        let mut extended = registry.clone();
        let mut names = Vec::with_capacity(self.tools.len());
        for tool in self.tools() {
            names.push(tool.name().to_owned());
            extended.register(tool)?;
        }
        *registry = extended;
        Ok(names)
    }

    /// Calls `tool` (its name on the server) directly, with the client's timeout; the arguments
    /// are not checked against its schema here (the server checks them).
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<ToolOutput, McpError> {
        run_tool(&self.session, &self.name, tool, arguments, self.timeout).await
    }

    /// Ends the session (and stops a child process). Tools still registered fail their calls
    /// with a clear error afterwards.
    pub async fn close(self) {
        if let Ok(session) = Arc::try_unwrap(self.session) {
            let _ = session.cancel().await;
        } else {
            tracing::debug!(server = %self.name, "MCP session still used by registered tools");
        }
    }
}

/// One MCP tool as an agent function (see the [module](self) documentation).
pub struct McpTool {
    name: String,
    server: String,
    tool: String,
    description: String,
    input_schema: Value,
    parameters: Value,
    session: Arc<Session>,
    timeout: Duration,
}

impl fmt::Debug for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    fn new(server: &str, tool: &Tool, session: Arc<Session>, timeout: Duration) -> Self {
        let name = format!(
            "{server}{NAMESPACE_SEPARATOR}{}",
            tool.name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                })
                .collect::<String>()
        );
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("The tool `{}` of the MCP server `{server}`.", tool.name));
        let input_schema = Value::Object((*tool.input_schema).clone());
        Self {
            parameters: with_heartbeat(&input_schema),
            name,
            server: server.to_owned(),
            tool: tool.name.to_string(),
            description,
            input_schema,
            session,
            timeout,
        }
    }

    /// The tool's name on its server.
    pub fn tool_name(&self) -> &str {
        &self.tool
    }

    /// The server's name.
    pub fn server_name(&self) -> &str {
        &self.server
    }
}

/// The tool's schema with the paper's `request_heartbeat` flag added (required, like the
/// built-in functions'; the until-reply loop style removes it from what the model sees).
fn with_heartbeat(schema: &Value) -> Value {
    let mut schema = schema.clone();
    let Some(object) = schema.as_object_mut() else {
        return schema;
    };
    object
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    if let Some(properties) = object
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
    {
        properties.insert(
            HEARTBEAT.into(),
            serde_json::json!({"type": "boolean", "description": HEARTBEAT_DOC}),
        );
    }
    match object
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(required) => required.push(Value::String(HEARTBEAT.into())),
        other => *other = serde_json::json!([HEARTBEAT]),
    }
    schema
}

#[async_trait]
impl Function for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn origin(&self) -> &str {
        &self.server
    }

    async fn call(&self, _ctx: &mut FunctionContext<'_>, arguments: Value) -> FunctionReturn {
        let mut arguments = match arguments {
            Value::Object(arguments) => arguments,
            other => {
                return FunctionReturn::failed(
                    validate_arguments(&self.name, &self.input_schema, &other)
                        .err()
                        .unwrap_or_default(),
                );
            }
        };
        let heartbeat = match arguments.remove(HEARTBEAT) {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(other) => {
                return FunctionReturn::failed(format!(
                    "invalid arguments for `{}`: `{HEARTBEAT}`: expected a boolean, got {other}",
                    self.name
                ));
            }
        };
        let arguments_value = Value::Object(arguments);
        if let Err(error) = validate_arguments(&self.name, &self.input_schema, &arguments_value) {
            return FunctionReturn::failed(error);
        }
        let Value::Object(arguments) = arguments_value else {
            return FunctionReturn::failed("arguments must be an object");
        };
        match run_tool(
            &self.session,
            &self.server,
            &self.tool,
            arguments,
            self.timeout,
        )
        .await
        {
            Ok(output) if output.ok => FunctionReturn::ok(output.text, heartbeat),
            Ok(output) => FunctionReturn::failed(output.text),
            Err(error) => FunctionReturn::failed(error.for_model(&self.tool)),
        }
    }
}

/// What a tool returned: whether it succeeded, and its text as the model reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// `false` when the tool reported an error.
    pub ok: bool,
    /// Its text blocks, one per line (see the [module](self) documentation).
    pub text: String,
}

impl McpError {
    /// The error as the model reads it when calling `tool` failed.
    fn for_model(&self, tool: &str) -> String {
        match self {
            McpError::Timeout { server, seconds } => format!(
                "the MCP server `{server}` did not answer `{tool}` within {seconds} s; try again later or another way"
            ),
            McpError::Protocol { server, message } => {
                format!("the MCP server `{server}` failed to run `{tool}`: {message}")
            }
            other => other.to_string(),
        }
    }
}

async fn run_tool(
    session: &Session,
    server: &str,
    tool: &str,
    arguments: Map<String, Value>,
    timeout: Duration,
) -> Result<ToolOutput, McpError> {
    let request = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    let result = tokio::time::timeout(timeout, session.call_tool(request))
        .await
        .map_err(|_| McpError::Timeout {
            server: server.to_owned(),
            seconds: timeout.as_secs(),
        })?
        .map_err(|e| McpError::Protocol {
            server: server.to_owned(),
            message: e.to_string(),
        })?;
    Ok(ToolOutput {
        ok: result.is_error != Some(true),
        text: result_text(&result),
    })
}

/// What the model reads of a tool's result: its text blocks, one per line; the structured
/// result when there is no text; a short note for images, audio and links.
fn result_text(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::Image(image) => parts.push(format!("[image, {}]", image.mime_type)),
            ContentBlock::Audio(audio) => parts.push(format!("[audio, {}]", audio.mime_type)),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(format!("[{uri}]\n{text}"));
                }
                other => parts.push(format!("[binary resource {}]", resource_uri(other))),
            },
            ContentBlock::ResourceLink(link) => parts.push(format!("[link: {}]", link.uri)),
            _ => parts.push("[content of a kind this client does not show]".to_owned()),
        }
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    if parts.is_empty() {
        "(no output)".to_owned()
    } else {
        parts.join("\n")
    }
}

fn resource_uri(contents: &ResourceContents) -> String {
    serde_json::to_value(contents)
        .ok()
        .and_then(|v| v.get("uri").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_heartbeat_flag_joins_the_tools_schema() {
        let schema = with_heartbeat(
            &json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
        );
        assert_eq!(schema["required"], json!(["a", "request_heartbeat"]));
        assert_eq!(schema["properties"]["request_heartbeat"]["type"], "boolean");
        let bare = with_heartbeat(&json!({}));
        assert_eq!(bare["type"], "object");
        assert_eq!(bare["required"], json!(["request_heartbeat"]));
    }

    #[test]
    fn configs_read_from_toml_shaped_json() {
        let http: McpServerConfig = serde_json::from_value(json!({
            "name": "search", "transport": "http", "url": "http://127.0.0.1:9/mcp", "timeout_secs": 5,
        }))
        .unwrap();
        assert_eq!(http.timeout_secs, 5);
        assert!(
            matches!(http.transport, McpTransport::Http { ref url, .. } if url == "http://127.0.0.1:9/mcp")
        );
        let bad = serde_json::from_value::<McpServerConfig>(
            json!({"name": "x", "transport": "carrier-pigeon"}),
        );
        assert!(bad.is_err());
    }
}
