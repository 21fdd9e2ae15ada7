//! The [`Function`] trait, its definition ([`FunctionDef`]) and what a call returns
//! ([`FunctionReturn`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use linkme::distributed_slice;

use super::FunctionContext;

/// A boxed, `Send` future (what generated dispatch wrappers return).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The signature of a generated dispatch wrapper: context and raw JSON arguments in.
pub type CallFn =
    for<'a, 'b> fn(&'a mut FunctionContext<'b>, serde_json::Value) -> BoxFuture<'a, FunctionReturn>;

/// What one function call produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionReturn {
    /// `Ok(result text)` or `Err(error text)`; both are shown to the LLM.
    pub result: Result<String, String>,
    /// Whether the LLM asked to run again right after this call.
    pub request_heartbeat: bool,
}

impl FunctionReturn {
    /// A successful result.
    pub fn ok(text: impl Into<String>, request_heartbeat: bool) -> Self {
        Self {
            result: Ok(text.into()),
            request_heartbeat,
        }
    }

    /// A failed call. Failures always give control back to the LLM so it can correct itself.
    pub fn failed(text: impl Into<String>) -> Self {
        Self {
            result: Err(text.into()),
            request_heartbeat: false,
        }
    }

    /// Whether the call failed.
    pub fn is_failure(&self) -> bool {
        self.result.is_err()
    }
}

/// A function registered at compile time by [`memgpt_fn`](crate::memgpt_fn).
///
/// You normally never build one by hand; it is public so generated code can name it.
#[derive(Clone, Copy)]
pub struct FunctionDef {
    /// The function name the LLM calls.
    pub name: &'static str,
    /// The description the LLM reads (the doc comment).
    pub description: &'static str,
    /// Whether the function ends the agent's turn (no `request_heartbeat` parameter).
    pub terminal: bool,
    /// Where it was defined (`module_path!()`), for duplicate-name errors.
    pub module_path: &'static str,
    /// Builds the JSON schema of its parameters.
    pub parameters: fn() -> serde_json::Value,
    /// The dispatch wrapper.
    pub call: CallFn,
}

impl fmt::Debug for FunctionDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionDef")
            .field("name", &self.name)
            .field("terminal", &self.terminal)
            .field("module_path", &self.module_path)
            .finish_non_exhaustive()
    }
}

/// Every function registered with [`memgpt_fn`](crate::memgpt_fn) in the linked binary.
#[distributed_slice]
pub static FUNCTIONS: [FunctionDef];

/// A callable function, static or registered at run time.
///
/// [`memgpt_fn`](crate::memgpt_fn) is the usual way to define one; implement this trait directly
/// for functions whose schema is only known at run time (loaded from configuration, proxied to
/// another service...) and add them with [`FunctionRegistry::register`](super::FunctionRegistry::register).
#[async_trait]
pub trait Function: Send + Sync + fmt::Debug {
    /// The name the LLM calls (letters, digits, `_` and `-`, at most 64).
    fn name(&self) -> &str;

    /// The description the LLM reads.
    fn description(&self) -> &str;

    /// The JSON schema (type `object`) of the arguments, `request_heartbeat` included unless
    /// the function is terminal.
    fn parameters(&self) -> serde_json::Value;

    /// Whether calling it ends the agent's turn.
    fn is_terminal(&self) -> bool {
        false
    }

    /// Where it was defined, for error messages.
    fn origin(&self) -> &str {
        "runtime"
    }

    /// Runs it with the LLM's (parsed but unvalidated) JSON arguments.
    async fn call(
        &self,
        ctx: &mut FunctionContext<'_>,
        arguments: serde_json::Value,
    ) -> FunctionReturn;
}

#[async_trait]
impl Function for &'static FunctionDef {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn parameters(&self) -> serde_json::Value {
        (self.parameters)()
    }

    fn is_terminal(&self) -> bool {
        self.terminal
    }

    fn origin(&self) -> &str {
        self.module_path
    }

    async fn call(
        &self,
        ctx: &mut FunctionContext<'_>,
        arguments: serde_json::Value,
    ) -> FunctionReturn {
        (self.call)(ctx, arguments).await
    }
}
