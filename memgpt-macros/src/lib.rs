//! Procedural macros of memgpt-rs. Use them through `memgpt` (or `memgpt-core`), which
//! re-export them; this crate's paths are not public API.
//!
//! * [`macro@memgpt_fn`]: turns an `async fn` into a function the LLM can call.

#![warn(missing_docs, unreachable_pub)]

mod args;
mod expand;
mod resolve;
mod signature;

use proc_macro::TokenStream;

/// Turns an `async fn` into a function the LLM can call.
///
/// ```ignore
/// use memgpt::function::{FunctionContext, FunctionError};
/// use memgpt::memgpt_fn;
///
/// /// Look up the weather for a city.
/// #[memgpt_fn]
/// async fn get_weather(
///     ctx: &mut FunctionContext<'_>,
///     /// The city, e.g. "Paris".
///     city: String,
///     /// Days ahead (0 = today).
///     days: Option<u32>,
/// ) -> Result<String, FunctionError> {
///     # let _ = (ctx, days);
///     Ok(format!("sunny in {city}"))
/// }
/// ```
///
/// * The doc comment becomes the function's description, and doc comments (or `#[doc]`
///   attributes) on parameters become parameter descriptions. `Option<T>` parameters are
///   optional. `#[serde(..)]` and `#[schemars(..)]` attributes on parameters are forwarded.
/// * A required boolean `request_heartbeat` parameter is added, unless the function is declared
///   `#[memgpt_fn(terminal)]` (it ends the agent's turn, like `send_message`).
/// * The first parameter may be a `&FunctionContext` or `&mut FunctionContext`; every other parameter
///   must implement `serde::Deserialize` and `schemars::JsonSchema`.
/// * The return type must implement `IntoFunctionOutput` (`String`, `()`, `serde_json::Value`,
///   `Json<T>`, or a `Result` of those with a `Display` error).
/// * `#[memgpt_fn(name = "other_name")]` registers it under another name.
#[proc_macro_attribute]
pub fn memgpt_fn(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = syn::parse_macro_input!(attr as args::FnArgs);
    let item = syn::parse_macro_input!(item as syn::ItemFn);
    expand::expand(args, item)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
