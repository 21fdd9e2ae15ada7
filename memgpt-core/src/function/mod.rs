//! Functions the LLM can call: definitions, the registry, and the context a call runs in.
//!
//! Write a function with [`memgpt_fn`](crate::memgpt_fn): an `async fn`, optionally taking a
//! [`FunctionContext`] first, then typed parameters. The attribute turns its doc comments into a JSON
//! schema, adds the `request_heartbeat` flag (unless `terminal`), generates a dispatch wrapper
//! that validates the LLM's JSON arguments with precise errors, and registers it in the
//! [`FUNCTIONS`] slice. Built-in memory functions and user functions take exactly the same path.
//!
//! ```
//! use memgpt_core::function::FunctionError;
//! use memgpt_core::memgpt_fn;
//!
//! /// Roll a die and return the number it shows.
//! #[memgpt_fn]
//! async fn roll_die(
//!     /// Number of faces (at least 2).
//!     faces: u32,
//! ) -> Result<String, FunctionError> {
//!     if faces < 2 {
//!         return Err(FunctionError::new("a die needs at least 2 faces"));
//!     }
//!     Ok(format!("{}", 1 + (faces / 2)))
//! }
//!
//! let registry = memgpt_core::function::FunctionRegistry::linked().unwrap();
//! let schema = &registry.get("roll_die").unwrap().schema;
//! assert_eq!(schema.description, "Roll a die and return the number it shows.");
//! assert_eq!(schema.parameters["required"], serde_json::json!(["faces", "request_heartbeat"]));
//! ```
//!
//! # Making sure a tool crate is linked
//!
//! Registrations live in a linker section. If no code of your binary *names* anything from a
//! crate that only defines functions, the linker may drop the crate and its functions with it, even
//! when it is listed in `Cargo.toml`. Name the crate once, e.g. `use my_tools as _;` in
//! `main.rs`, or call any item of it. [`FunctionRegistry::function_set`] reports a missing tool by
//! name at agent creation, so a dropped crate never fails silently.

mod args;
mod context;
mod def;
mod registry;
mod runtime;
mod validate;

pub use args::{FunctionError, IntoFunctionOutput, Json};
pub use context::{Extensions, FunctionContext, FunctionSettings, RecallResults};
pub(crate) use context::{Messaging, StepWrites};
pub(crate) use context::{archival_query, search_recall_hybrid};
pub use def::{BoxFuture, CallFn, FUNCTIONS, Function, FunctionDef, FunctionReturn};
pub use registry::{FunctionRegistry, FunctionSet, RegisteredFunction, RegistryError};
pub(crate) use runtime::{CallLimits, run_call, without_nul};
pub use validate::validate_arguments;

#[doc(hidden)]
pub use args::{FunctionParameter, parameters_schema, parse_arguments};
