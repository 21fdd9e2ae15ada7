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
//!
//! A session that ends (the child process exited, the HTTP connection was lost) is opened
//! again on the next call: the process is restarted, or the server reconnected. A call that
//! finds the session already ended runs on the new one; a call the server stopped in the middle
//! of fails (it may or may not have run), and the next call restarts the server. When a restart
//! fails, calls fail at once with the reason until the next try, 1 s later, then 2 s, 4 s ... up
//! to [`MAX_RESTART_BACKOFF`]. [`McpClient::health`] says how the session is doing.

use std::collections::BTreeMap;
use std::fmt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use memgpt_core::function::{
    Function, FunctionContext, FunctionRegistry, FunctionReturn, RegistryError, validate_arguments,
};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, ResourceContents, Tool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::AsyncBufReadExt;

/// How long a call (and the handshake) may take unless configured: 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest wait between two tries to restart (or reconnect) a server whose session ended.
pub const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(60);

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
    /// The session ended while the server ran a call (the process exited, the connection was
    /// lost): the call may or may not have run. The next call restarts the server.
    #[error(
        "the MCP server `{server}` stopped while running `{tool}` (it may or may not have run); \
         it is restarted on the next call"
    )]
    Lost {
        /// The server's name.
        server: String,
        /// The tool the call was for.
        tool: String,
    },
    /// The session ended and the last try to restart (or reconnect) the server failed; the
    /// next try comes after a backoff.
    #[error(
        "the MCP server `{server}` is down ({reason}); memgpt tries to restart it again in {} s",
        retry_in.as_secs().max(1)
    )]
    Down {
        /// The server's name.
        server: String,
        /// Why the last restart failed.
        reason: String,
        /// How long until the next try.
        retry_in: Duration,
    },
    /// The client was closed ([`McpClient::close`]).
    #[error("the MCP server `{server}` was closed")]
    Closed {
        /// The server's name.
        server: String,
    },
    /// A tool could not be registered (its name or schema).
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// How an MCP server's session is doing ([`McpClient::health`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerHealth {
    /// The session is open.
    Up,
    /// The session ended (the process exited, the connection was lost); the next call
    /// restarts or reconnects the server.
    Lost,
    /// Being restarted or reconnected right now.
    Restarting,
    /// The last restart failed; the next call after `retry_in` tries again.
    Down {
        /// Why the last restart failed.
        reason: String,
        /// How long until the next try.
        retry_in: Duration,
    },
    /// Closed by [`McpClient::close`].
    Closed,
}

impl fmt::Display for ServerHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerHealth::Up => f.write_str("up"),
            ServerHealth::Lost => f.write_str("stopped (restarted on the next call)"),
            ServerHealth::Restarting => f.write_str("restarting"),
            ServerHealth::Down { reason, retry_in } => write!(
                f,
                "down ({reason}); the next call after {} s restarts it",
                retry_in.as_secs().max(1)
            ),
            ServerHealth::Closed => f.write_str("closed"),
        }
    }
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

/// Opens a session with the server `config` names: spawns or connects, and shakes hands.
async fn open_session(config: &McpServerConfig, timeout: Duration) -> Result<Session, McpError> {
    let name = &config.name;
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
    match &config.transport {
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
                .map_err(|e| protocol(&e))
        }
        McpTransport::Http { url, bearer_token } => {
            memgpt_providers::http::install_crypto_provider();
            let mut settings = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            settings.auth_header = bearer_token.clone();
            let transport = StreamableHttpClientTransport::from_config(settings);
            tokio::time::timeout(timeout, info.serve(transport))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| protocol(&e))
        }
    }
}

/// How long to wait before restart number `failures + 1` after `failures` failed in a row:
/// 1 s, 2 s, 4 s ... up to [`MAX_RESTART_BACKOFF`].
fn restart_backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    Duration::from_secs(1u64 << exponent).min(MAX_RESTART_BACKOFF)
}

/// One server's session, shared by the client and its tools, opened again when it ends.
struct Connection {
    config: McpServerConfig,
    timeout: Duration,
    state: tokio::sync::Mutex<ConnectionState>,
}

#[derive(Default)]
struct ConnectionState {
    /// The current session; `None` once it ended and was let go.
    session: Option<Arc<Session>>,
    /// Restarts that failed in a row.
    failures: u32,
    /// When the next restart may run, after a failed one.
    retry_at: Option<Instant>,
    /// Why the last restart failed.
    last_error: String,
    /// Closed by [`McpClient::close`]: never restarted.
    closed: bool,
}

impl Connection {
    fn name(&self) -> &str {
        &self.config.name
    }

    /// The open session: the current one, or a new one when it ended (unless the last try
    /// failed less than its backoff ago).
    async fn session(&self) -> Result<Arc<Session>, McpError> {
        let mut state = self.state.lock().await;
        if state.closed {
            return Err(McpError::Closed {
                server: self.name().to_owned(),
            });
        }
        if let Some(session) = &state.session {
            if !session.is_transport_closed() {
                return Ok(Arc::clone(session));
            }
            tracing::warn!(server = %self.name(), "the MCP server's session ended; restarting it");
            state.session = None;
        }
        let now = Instant::now();
        if let Some(at) = state.retry_at
            && now < at
        {
            return Err(McpError::Down {
                server: self.name().to_owned(),
                reason: state.last_error.clone(),
                retry_in: at - now,
            });
        }
        match open_session(&self.config, self.timeout).await {
            Ok(session) => {
                tracing::info!(server = %self.name(), "MCP server restarted");
                let session = Arc::new(session);
                state.session = Some(Arc::clone(&session));
                state.failures = 0;
                state.retry_at = None;
                state.last_error.clear();
                Ok(session)
            }
            Err(error) => {
                state.failures = state.failures.saturating_add(1);
                let backoff = restart_backoff(state.failures);
                state.retry_at = Some(Instant::now() + backoff);
                state.last_error = error.reason();
                tracing::warn!(
                    server = %self.name(),
                    error = %error,
                    retry_in = ?backoff,
                    "the MCP server could not be restarted"
                );
                Err(McpError::Down {
                    server: self.name().to_owned(),
                    reason: state.last_error.clone(),
                    retry_in: backoff,
                })
            }
        }
    }

    /// Lets `session` go if it is still the current one (its transport failed): the next call
    /// opens a new one.
    async fn forget(&self, session: &Arc<Session>) {
        let mut state = self.state.lock().await;
        if state
            .session
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(current, session))
        {
            state.session = None;
        }
    }

    /// Runs `tool` on the open session (see the [module](self) documentation).
    async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<ToolOutput, McpError> {
        let session = self.session().await?;
        let result = run_tool(&session, self.name(), tool, arguments, self.timeout).await;
        if matches!(result, Err(McpError::Lost { .. })) {
            self.forget(&session).await;
        }
        result
    }

    fn health(&self) -> ServerHealth {
        let Ok(state) = self.state.try_lock() else {
            return ServerHealth::Restarting;
        };
        if state.closed {
            return ServerHealth::Closed;
        }
        match (&state.session, state.retry_at) {
            (Some(session), _) if !session.is_transport_closed() => ServerHealth::Up,
            (None, Some(at)) => ServerHealth::Down {
                reason: state.last_error.clone(),
                retry_in: at.saturating_duration_since(Instant::now()),
            },
            _ => ServerHealth::Lost,
        }
    }

    /// Ends the session for good.
    async fn close(&self) {
        let session = {
            let mut state = self.state.lock().await;
            state.closed = true;
            state.session.take()
        };
        match session.map(Arc::try_unwrap) {
            Some(Ok(session)) => {
                let _ = session.cancel().await;
            }
            Some(Err(_)) => {
                tracing::debug!(server = %self.name(), "MCP session still in a call; it ends with it");
            }
            None => {}
        }
    }
}

/// An open session with one MCP server, and the tools it offers.
pub struct McpClient {
    name: String,
    timeout: Duration,
    connection: Arc<Connection>,
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
        let session = open_session(config, timeout).await?;
        let tools = tokio::time::timeout(timeout, session.list_all_tools())
            .await
            .map_err(|_| McpError::Timeout {
                server: name.clone(),
                seconds: timeout.as_secs(),
            })?
            .map_err(|e| McpError::Protocol {
                server: name.clone(),
                message: e.to_string(),
            })?;
        tracing::info!(server = %name, tools = tools.len(), "MCP server attached");
        let connection = Connection {
            config: config.clone(),
            timeout,
            state: tokio::sync::Mutex::new(ConnectionState {
                session: Some(Arc::new(session)),
                ..ConnectionState::default()
            }),
        };
        Ok(Self {
            name,
            timeout,
            connection: Arc::new(connection),
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

    /// How the session is doing: up, lost (restarted on the next call), down after a failed
    /// restart, or closed.
    pub fn health(&self) -> ServerHealth {
        self.connection.health()
    }

    /// The tools as agent functions.
    pub fn tools(&self) -> Vec<McpTool> {
        self.tools
            .iter()
            .map(|tool| McpTool::new(&self.name, tool, Arc::clone(&self.connection)))
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

    /// Calls `tool` (its name on the server) directly, with the client's timeout (restarting
    /// the server first if its session ended); the arguments are not checked against its
    /// schema here (the server checks them).
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<ToolOutput, McpError> {
        self.connection.call(tool, arguments).await
    }

    /// Ends the session (and stops a child process) for good. Tools still registered fail
    /// their calls with a clear error afterwards.
    pub async fn close(self) {
        self.connection.close().await;
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
    connection: Arc<Connection>,
}

impl fmt::Debug for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("timeout", &self.connection.timeout)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    fn new(server: &str, tool: &Tool, connection: Arc<Connection>) -> Self {
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
            connection,
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
        match self.connection.call(&self.tool, arguments).await {
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
    /// What went wrong, without the server's name (for messages that name it already).
    pub fn reason(&self) -> String {
        match self {
            McpError::Spawn {
                command, source, ..
            } => format!("could not start `{command}`: {source}"),
            McpError::Protocol { message, .. } => message.clone(),
            McpError::Timeout { seconds, .. } => format!("no answer within {seconds} s"),
            other => other.to_string(),
        }
    }

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
    let result = match tokio::time::timeout(timeout, session.call_tool(request)).await {
        Err(_) => {
            return Err(McpError::Timeout {
                server: server.to_owned(),
                seconds: timeout.as_secs(),
            });
        }
        // The session's transport failed under the call: the server is gone (a crashed
        // process, a lost connection), and the next call opens a new session.
        Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
            return Err(McpError::Lost {
                server: server.to_owned(),
                tool: tool.to_owned(),
            });
        }
        Ok(Err(e)) => {
            return Err(McpError::Protocol {
                server: server.to_owned(),
                message: e.to_string(),
            });
        }
        Ok(Ok(result)) => result,
    };
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
    fn restarts_back_off_exponentially_up_to_a_minute() {
        let waits: Vec<u64> = (1..=8).map(|n| restart_backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(restart_backoff(u32::MAX), MAX_RESTART_BACKOFF);
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
