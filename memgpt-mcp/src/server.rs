//! An agent's memory as MCP tools, for any MCP client.
//!
//! [`MemoryServer`] offers the agent's own memory functions (those of
//! [`MEMORY_FUNCTIONS`] the agent has) with the schemas the agent's model reads, minus
//! `request_heartbeat`, plus [`READ_BLOCKS`], which returns the memory blocks. A call runs
//! exactly as the model's would ([`Agent::call`]): the same validation, limits, paging and
//! atomic commit; a refused call (a block over its limit, say) is a tool error with the message
//! the model would read.
//!
//! ```no_run
//! # async fn run(agent: memgpt_core::Agent) -> Result<(), Box<dyn std::error::Error>> {
//! // Serve on this process's stdin and stdout until the client hangs up.
//! memgpt_mcp::server::MemoryServer::new(agent).serve_stdio().await?;
//! # Ok(()) }
//! ```

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use memgpt_core::Agent;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

/// The agent functions a [`MemoryServer`] offers, when the agent has them.
pub const MEMORY_FUNCTIONS: [&str; 9] = [
    "core_memory_append",
    "core_memory_replace",
    "archival_memory_insert",
    "archival_memory_search",
    "archival_memory_update",
    "archival_memory_forget",
    "archival_memory_search_as_of",
    "conversation_search",
    "conversation_search_date",
];

/// The extra tool that returns the memory blocks (label, characters used and limit, value).
pub const READ_BLOCKS: &str = "core_memory_read";

const HEARTBEAT: &str = "request_heartbeat";

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
#[error("the MCP session failed: {0}")]
pub struct ServeError(String);

/// An agent's memory served as MCP tools (see the [module](self) documentation).
#[derive(Clone)]
pub struct MemoryServer {
    agent: Arc<Mutex<Agent>>,
    tools: Arc<[Tool]>,
    takes_heartbeat: Arc<[String]>,
}

impl fmt::Debug for MemoryServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryServer")
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl MemoryServer {
    /// Serves `agent`'s memory.
    pub fn new(agent: Agent) -> Self {
        let functions = agent.function_set();
        let mut tools = vec![Tool::new(
            READ_BLOCKS,
            "Read the agent's core memory: every block with its label, the characters used \
             and its limit, and its text.",
            Arc::new(object_schema()),
        )];
        let mut takes_heartbeat = Vec::new();
        for name in MEMORY_FUNCTIONS {
            let Some(schema) = functions.schema(name) else {
                continue;
            };
            let mut parameters = schema.parameters.clone();
            if strip_heartbeat(&mut parameters) {
                takes_heartbeat.push(name.to_owned());
            }
            single_types(&mut parameters);
            let Value::Object(parameters) = parameters else {
                continue;
            };
            tools.push(Tool::new(
                name,
                schema.description.clone(),
                Arc::new(parameters),
            ));
        }
        Self {
            agent: Arc::new(Mutex::new(agent)),
            tools: tools.into(),
            takes_heartbeat: takes_heartbeat.into(),
        }
    }

    /// The tools offered.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Serves on this process's stdin and stdout until the client ends the session.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ServeError(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| ServeError(e.to_string()))?;
        Ok(())
    }

    async fn run(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut agent = self.agent.lock().await;
        if name == READ_BLOCKS {
            agent
                .refresh()
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            return Ok(CallToolResult::success(vec![ContentBlock::text(
                render_blocks(&agent),
            )]));
        }
        if !self.tools.iter().any(|tool| tool.name == name) {
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool named `{name}`; the tools are {}",
                    self.tools
                        .iter()
                        .map(|t| format!("`{}`", t.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None,
            ));
        }
        let mut arguments = arguments.unwrap_or_default();
        // Checked against the schema this server published (no heartbeat flag), so an error
        // names only fields the client can send. Numbers sent as strings (form-based clients
        // such as the MCP Inspector) are read as numbers first.
        if let Some(tool) = self.tools.iter().find(|tool| tool.name == name) {
            let schema = Value::Object(tool.input_schema.as_ref().clone());
            // `null` for an optional field means leaving it out.
            arguments.retain(|_, value| !value.is_null());
            numbers_from_strings(&schema, &mut arguments);
            if let Err(message) = memgpt_core::function::validate_arguments(
                name,
                &schema,
                &Value::Object(arguments.clone()),
            ) {
                return Ok(CallToolResult::error(vec![ContentBlock::text(message)]));
            }
        }
        if self.takes_heartbeat.iter().any(|f| f == name) {
            arguments.insert(HEARTBEAT.into(), Value::Bool(false));
        }
        let record = agent
            .call(name, Value::Object(arguments))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let content = vec![ContentBlock::text(record.output)];
        Ok(if record.ok {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        })
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memgpt-rs", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "The memory of a memgpt-rs agent: core memory blocks (read, append, replace), \
                 archival memory (insert, search) and the conversation history (search).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name: Cow<'_, str> = request.name;
        self.run(&name, request.arguments).await.map(Into::into)
    }
}

fn object_schema() -> Map<String, Value> {
    let mut schema = Map::new();
    schema.insert("type".into(), Value::String("object".into()));
    schema.insert("properties".into(), Value::Object(Map::new()));
    schema
}

/// Removes `request_heartbeat` from a parameters schema; whether it was there.
fn strip_heartbeat(parameters: &mut Value) -> bool {
    let removed = parameters
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .and_then(|p| p.remove(HEARTBEAT))
        .is_some();
    if let Some(required) = parameters.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|r| r != HEARTBEAT);
    }
    removed
}

/// `"type": ["integer", "null"]` as `"type": "integer"` in each property: an optional field
/// is one that may be left out, and some clients (the MCP Inspector) cannot render a list of
/// types and send strings instead.
fn single_types(parameters: &mut Value) {
    let Some(properties) = parameters
        .get_mut("properties")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for property in properties.values_mut() {
        let Some(types) = property.get("type").and_then(Value::as_array) else {
            continue;
        };
        let kinds: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if let [only] = kinds.as_slice() {
            property["type"] = only.clone();
        }
    }
}

/// Arguments whose property is a number or an integer, sent as a string of one: the number.
fn numbers_from_strings(schema: &Value, arguments: &mut Map<String, Value>) {
    for (name, value) in arguments.iter_mut() {
        let Value::String(text) = value else {
            continue;
        };
        let kind = schema
            .pointer(&format!("/properties/{name}/type"))
            .and_then(Value::as_str);
        let number = match kind {
            Some("integer") => text.trim().parse::<i64>().ok().map(Value::from),
            Some("number") => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number)),
            _ => None,
        };
        if let Some(number) = number {
            *value = number;
        }
    }
}

fn render_blocks(agent: &Agent) -> String {
    let mut out = String::new();
    for block in agent.memory().blocks() {
        out.push_str(&format!(
            "[{}] {}/{} characters{}\n{}\n\n",
            block.label(),
            block.chars(),
            block.limit(),
            if block.is_read_only() {
                ", read-only"
            } else {
                ""
            },
            block.value()
        ));
    }
    out.trim_end().to_owned()
}
