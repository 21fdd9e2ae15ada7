//! `send_message` and `pause_heartbeats`: talking to the user and pausing timers.

use chrono::Duration;

use crate::function::{FunctionContext, FunctionError};
use crate::memgpt_fn;

/// Longest pause `pause_heartbeats` accepts, in minutes.
const MAX_PAUSE_MINUTES: u32 = 360;

/// Sends a message to the user. This is the only way the user sees anything you say.
#[memgpt_fn(terminal)]
async fn send_message(
    ctx: &mut FunctionContext<'_>,
    /// The message. All unicode (including emojis) is supported.
    message: String,
) -> &'static str {
    ctx.send_message(message);
    "Sent."
}

/// Ignores timed heartbeats (timer events) for a while. User messages and other events still
/// wake you.
#[memgpt_fn]
async fn pause_heartbeats(
    ctx: &mut FunctionContext<'_>,
    /// Minutes to pause, at most 360.
    minutes: u32,
) -> Result<String, FunctionError> {
    if minutes > MAX_PAUSE_MINUTES {
        return Err(FunctionError::new(format!(
            "minutes must be at most {MAX_PAUSE_MINUTES}, got {minutes}"
        )));
    }
    let until = ctx.now() + Duration::minutes(i64::from(minutes));
    ctx.pause_timers_until((minutes > 0).then_some(until));
    Ok(if minutes == 0 {
        "Timed heartbeats resumed.".to_owned()
    } else {
        format!(
            "Timed heartbeats paused until {}.",
            crate::time::format_time(until)
        )
    })
}
