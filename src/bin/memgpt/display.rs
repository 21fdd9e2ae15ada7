//! How the chat shows what the agent does: its messages as they arrive, function calls and
//! heartbeats dimmed, memory edits and flushes as one-line notices, and the context bars.

use std::io::Write;

use memgpt::ContextStats;
use memgpt::agent::StepProgress;
use memgpt::message::{Message, MessageKind};

/// ANSI styling, or none (not a terminal, or `NO_COLOR`).
#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset.
    pub fn detect() -> Self {
        use std::io::IsTerminal;
        Self {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }

    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }

    pub fn notice(&self, text: &str) -> String {
        self.paint("36", text)
    }

    pub fn error(&self, text: &str) -> String {
        self.paint("31", text)
    }
}

/// Functions whose calls are memory edits (shown as notices).
const MEMORY_EDITS: &[&str] = &[
    "core_memory_append",
    "core_memory_replace",
    "archival_memory_insert",
];

/// Prints a running step: text as the model writes it (when the provider streams), then each
/// message as it joins the context, without repeating what was already shown.
#[derive(Debug)]
pub struct Live {
    style: Style,
    agent: String,
    state: std::sync::Mutex<Streamed>,
}

/// What of the current response was already printed while streaming.
#[derive(Debug, Default)]
struct Streamed {
    thinking: bool,
    reply: bool,
}

impl Live {
    pub fn new(style: Style, agent: &str) -> Self {
        Self {
            style,
            agent: agent.to_owned(),
            state: Default::default(),
        }
    }

    /// Prints one piece of a running step.
    pub fn progress(&self, progress: StepProgress<'_>) {
        let mut out = std::io::stdout().lock();
        let mut streamed = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let style = self.style;
        let line = match progress {
            StepProgress::ThinkingDelta(text) => {
                if streamed.reply {
                    return;
                }
                if !streamed.thinking {
                    streamed.thinking = true;
                    let _ = write!(out, "{}", style.dim("  (thinks) "));
                }
                let _ = write!(out, "{}", style.dim(text));
                let _ = out.flush();
                return;
            }
            StepProgress::ReplyDelta(text) => {
                if !streamed.reply {
                    if streamed.thinking {
                        let _ = writeln!(out);
                    }
                    streamed.reply = true;
                    let _ = write!(out, "{} ", style.bold(&format!("{}>", self.agent)));
                }
                let _ = write!(out, "{text}");
                let _ = out.flush();
                return;
            }
            StepProgress::Message(message) => {
                let shown = std::mem::take(&mut *streamed);
                if shown.thinking || shown.reply {
                    let _ = writeln!(out);
                }
                message_lines(style, &self.agent, message, &shown)
            }
            StepProgress::Flush(flush) => Some(style.notice(&format!(
                "  [memory] flushed {} messages ({} tokens) to recall storage; prompt {} -> {} tokens{}",
                flush.evicted_messages,
                flush.evicted_tokens,
                flush.tokens_before,
                flush.tokens_after,
                if flush.summary_updated {
                    ", summary updated"
                } else {
                    ", summary kept (summarizer failed)"
                }
            ))),
            _ => None,
        };
        if let Some(line) = line {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

fn message_lines(
    style: Style,
    agent: &str,
    message: &Message,
    streamed: &Streamed,
) -> Option<String> {
    match message.kind {
        MessageKind::User => None,
        MessageKind::Assistant => {
            let mut lines = Vec::new();
            if !message.text.trim().is_empty() && !streamed.thinking {
                lines.push(style.dim(&format!("  (thinks) {}", message.text.trim())));
            }
            for call in &message.tool_calls {
                let arguments: serde_json::Value =
                    serde_json::from_str(&call.arguments).unwrap_or_default();
                if call.name == "send_message" {
                    if streamed.reply {
                        continue;
                    }
                    let said = arguments
                        .get("message")
                        .and_then(|m| m.as_str())
                        .unwrap_or(&call.arguments);
                    lines.push(format!("{} {said}", style.bold(&format!("{agent}>"))));
                } else {
                    lines.push(style.dim(&format!(
                        "  -> {}({})",
                        call.name,
                        shorten(&call.arguments, 160)
                    )));
                }
            }
            (!lines.is_empty()).then(|| lines.join("\n"))
        }
        MessageKind::FunctionReturn | MessageKind::FunctionError => {
            let name = message.name.as_deref().unwrap_or("function");
            if name == "send_message" && message.kind == MessageKind::FunctionReturn {
                return None;
            }
            let failed = message.kind == MessageKind::FunctionError;
            let text = first_line(&message.text);
            if MEMORY_EDITS.contains(&name) {
                let status = if failed { "failed" } else { "ok" };
                Some(style.notice(&format!(
                    "  [memory] {name} {status}: {}",
                    shorten(text, 120)
                )))
            } else if failed {
                Some(style.error(&format!("  <- {name} failed: {}", shorten(text, 160))))
            } else {
                Some(style.dim(&format!("  <- {name}: {}", shorten(text, 160))))
            }
        }
        MessageKind::Heartbeat => Some(style.dim("  (heartbeat)")),
        MessageKind::SystemAlert => {
            Some(style.notice(&format!("  [alert] {}", shorten(&message.text, 200))))
        }
        MessageKind::Login | MessageKind::Timer | MessageKind::DocumentUpload => {
            Some(style.dim(&format!("  [event] {}", shorten(&message.text, 200))))
        }
        _ => None,
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub fn shorten(text: &str, max: usize) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// A bar per section of main context against the window, with the warning line (70% by
/// default) and the flush line (100%).
pub fn context_bars(stats: &ContextStats, warning: f64) -> String {
    const WIDTH: usize = 50;
    let window = stats.window.max(1);
    let sections = [
        ("system", stats.system_tokens),
        ("functions", stats.tools_tokens),
        ("memory", stats.memory_tokens),
        ("summary", stats.summary_tokens),
        ("queue", stats.queue_tokens),
    ];
    let mut out = String::new();
    let cells = |tokens: usize| ((tokens * WIDTH) as f64 / window as f64).round() as usize;
    let warn_at = ((warning * WIDTH as f64).round() as usize).min(WIDTH);
    // The warning line shows through empty cells; on the total it is always drawn.
    let bar = |tokens: usize, over_filled: bool| -> String {
        let filled = cells(tokens).min(WIDTH);
        (0..WIDTH)
            .map(|i| match i {
                i if i == warn_at && (over_filled || i >= filled) => '|',
                i if i < filled => '#',
                _ => '.',
            })
            .collect()
    };
    for (name, tokens) in sections {
        let bar = bar(tokens, false);
        out.push_str(&format!(
            "{name:<10} [{bar}] {tokens:>6} tok {:>5.1}%\n",
            tokens as f64 * 100.0 / window as f64
        ));
    }
    let total = bar(stats.total_tokens, true);
    out.push_str(&format!(
        "{:<10} [{total}] {:>6} tok {:>5.1}% of {} ({} queued messages)\n",
        "total",
        stats.total_tokens,
        stats.fraction * 100.0,
        stats.window,
        stats.queue_messages
    ));
    out.push_str(&format!(
        "{:<10}  '|' = memory-pressure warning at {:.0}%; the queue is flushed at 100%\n",
        "",
        warning * 100.0
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_with_the_window_and_mark_the_warning_line() {
        let stats = ContextStats {
            window: 1000,
            system_tokens: 100,
            tools_tokens: 200,
            memory_tokens: 50,
            summary_tokens: 0,
            queue_tokens: 450,
            queue_messages: 7,
            total_tokens: 800,
            fraction: 0.8,
        };
        let bars = context_bars(&stats, 0.7);
        let queue = bars.lines().find(|l| l.starts_with("queue")).unwrap();
        assert_eq!(queue.matches('#').count(), 23, "{queue}"); // 45% of 50 cells, rounded
        let total = bars.lines().find(|l| l.starts_with("total")).unwrap();
        assert_eq!(total.matches('#').count(), 39, "{total}"); // 40 cells, one is the marker
        assert!(
            total.contains("80.0% of 1000 (7 queued messages)"),
            "{total}"
        );
        assert_eq!(total.find('|').unwrap(), "total      [".len() + 35);
    }

    #[test]
    fn shorten_counts_characters() {
        assert_eq!(shorten("héllo wörld", 5), "héllo…");
        assert_eq!(shorten("short", 10), "short");
    }
}
