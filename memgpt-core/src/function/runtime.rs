//! The function runtime: how one call the model made is checked, run and cleaned up, the same
//! for every caller (the agent loop, [`Agent::call`](crate::Agent::call) and, through it, the
//! MCP server).
//!
//! [`run_call`] never fails: an unknown function, oversize or malformed arguments, a NUL
//! character, an error or a panic of the function all become an error result the model reads.
//! Outputs are capped and cleaned of NUL characters, which no store can hold.

use std::any::Any;
use std::future::poll_fn;
use std::panic::AssertUnwindSafe;
use std::task::Poll;

use serde_json::Value;
use tracing::warn;

use super::registry::HEARTBEAT;
use super::{BoxFuture, FunctionContext, FunctionReturn, FunctionSet};
use crate::message::ToolCall;
use crate::store::json_holds_nul;

/// The limits a call runs under (from the agent's configuration).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallLimits {
    /// The most bytes of raw arguments one call may carry.
    pub(crate) max_argument_bytes: usize,
    /// The most characters of output the model reads; longer outputs are cut with a note.
    pub(crate) max_output_chars: usize,
    /// Fill in `request_heartbeat: false` where the model left it out (the until-reply loop
    /// does not offer the flag, but functions declared with it still require it).
    pub(crate) fill_heartbeat: bool,
}

/// Checks and runs `call` among `functions` in `ctx`: its result, capped and without NUL
/// characters.
pub(crate) async fn run_call(
    functions: &FunctionSet,
    call: &ToolCall,
    limits: CallLimits,
    ctx: &mut FunctionContext<'_>,
) -> FunctionReturn {
    let result = match functions.get(&call.name).cloned() {
        None => FunctionReturn::failed(format!(
            "unknown function `{}`; the available functions are: {}",
            call.name,
            functions.names().collect::<Vec<_>>().join(", ")
        )),
        Some(_) if call.arguments.len() > limits.max_argument_bytes => {
            FunctionReturn::failed(format!(
                "the arguments of `{}` are {} bytes, over the limit of {} bytes per call \
                 (AgentConfig::max_function_argument_bytes): split the content over several \
                 smaller calls",
                call.name,
                call.arguments.len(),
                limits.max_argument_bytes
            ))
        }
        Some(function) => match parse_raw_arguments(&call.name, &call.arguments) {
            Err(message) => FunctionReturn::failed(message),
            Ok(arguments) if json_holds_nul(&arguments) => FunctionReturn::failed(format!(
                "the arguments of `{}` contain a NUL character (\\u0000), which memory cannot \
                 store: send the text without it",
                call.name
            )),
            Ok(mut arguments) => {
                if limits.fill_heartbeat {
                    fill_heartbeat_flag(functions, &call.name, &mut arguments);
                }
                match catch_unwind(function.call(ctx, arguments)).await {
                    Ok(result) => result,
                    Err(panic) => {
                        let message = panic_message(panic.as_ref());
                        warn!(function = %call.name, %message, "function panicked");
                        FunctionReturn::failed(format!(
                            "function `{}` crashed: {message}",
                            call.name
                        ))
                    }
                }
            }
        },
    };
    let limit = limits.max_output_chars;
    FunctionReturn {
        result: match result.result {
            Ok(text) => Ok(cap_output(without_nul(text), limit)),
            Err(text) => Err(cap_output(without_nul(text), limit)),
        },
        ..result
    }
}

/// Sets `request_heartbeat` to `false` where `function` declares it and the model left it out.
fn fill_heartbeat_flag(functions: &FunctionSet, function: &str, arguments: &mut Value) {
    let takes_flag = functions
        .schema(function)
        .and_then(|s| s.parameters.get("properties"))
        .is_some_and(|p| p.get(HEARTBEAT).is_some());
    if let Value::Object(map) = arguments
        && takes_flag
    {
        map.entry(HEARTBEAT).or_insert(Value::Bool(false));
    }
}

/// Cuts a function result to `max_chars` characters, saying how much was left out.
fn cap_output(text: String, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text,
        Some((cut, _)) => {
            let left_out = text[cut..].chars().count();
            format!(
                "{}... (truncated: {left_out} more characters; ask for less, e.g. a narrower query or the next page)",
                &text[..cut]
            )
        }
    }
}

/// Parses the model's raw arguments. Empty arguments mean `{}`; a JSON string holding a JSON
/// object (double-encoded arguments, a common model mistake) is unwrapped.
fn parse_raw_arguments(function: &str, raw: &str) -> Result<Value, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(value @ Value::Object(_)) => Ok(value),
            _ => Ok(Value::String(inner)),
        },
        Ok(value) => Ok(value),
        Err(e) => Err(format!(
            "the arguments to `{function}` are not valid JSON ({e}); send one JSON object of named arguments"
        )),
    }
}

/// `text` with each NUL character (U+0000) replaced by U+FFFD. No store can hold NUL (PostgreSQL
/// text cannot), so text the framework records on the model's or a tool's behalf (the model's
/// words and calls, function results) is cleaned rather than failing the step's commit; text
/// from the caller or in function arguments is refused with an error instead.
pub(crate) fn without_nul(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text
    }
}

/// Polls `future`, turning a panic into an `Err` instead of unwinding through the agent.
async fn catch_unwind<T>(
    mut future: BoxFuture<'_, T>,
) -> std::result::Result<T, Box<dyn Any + Send>> {
    poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    })
    .await
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_outputs_are_capped_with_a_note() {
        assert_eq!(cap_output("short".into(), 10), "short");
        let capped = cap_output("é".repeat(15), 10);
        assert!(capped.starts_with(&"é".repeat(10)));
        assert!(capped.contains("(truncated: 5 more characters;"));
    }

    #[test]
    fn raw_arguments_are_parsed_leniently_but_honestly() {
        assert_eq!(parse_raw_arguments("f", "").unwrap(), serde_json::json!({}));
        assert_eq!(
            parse_raw_arguments("f", r#""{\"a\":1}""#).unwrap(),
            serde_json::json!({"a": 1})
        );
        assert_eq!(
            parse_raw_arguments("f", "[1]").unwrap(),
            serde_json::json!([1])
        );
        let err = parse_raw_arguments("f", "{\"a\": 1,").unwrap_err();
        assert!(
            err.starts_with("the arguments to `f` are not valid JSON (EOF while parsing"),
            "{err}"
        );
    }
}
