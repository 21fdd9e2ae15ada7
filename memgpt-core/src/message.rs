//! Messages: what recall storage keeps and what the FIFO queue holds.
//!
//! A [`Message`] stores *plain* text plus its [`MessageKind`]; what the LLM sees is rendered
//! from it by [`Message::to_chat`] (user messages, heartbeats and alerts become small JSON
//! envelopes with a timestamp, as in MemGPT). Keeping the plain text makes recall search match
//! what was said, not the envelope around it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::ids::{AgentId, MessageId};
pub use crate::llm::ToolCall;
use crate::llm::{ChatMessage, Role};
use crate::time::format_time;

/// What a message is, which decides its role and how it is rendered for the LLM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MessageKind {
    /// A message typed by the user.
    User,
    /// A system event for the agent, e.g. the memory-pressure warning.
    SystemAlert,
    /// An automatic re-run of the agent after a function call (requested or failed).
    Heartbeat,
    /// The user logged in.
    Login,
    /// A scheduled timer fired.
    Timer,
    /// The user uploaded a document (its passages went to archival storage).
    DocumentUpload,
    /// The assistant's turn: inner monologue plus function calls.
    Assistant,
    /// A function's successful result.
    FunctionReturn,
    /// A function call that failed (unknown function, bad arguments, tool error).
    FunctionError,
}

impl MessageKind {
    /// Every kind, in declaration order.
    pub const ALL: [MessageKind; 9] = [
        MessageKind::User,
        MessageKind::SystemAlert,
        MessageKind::Heartbeat,
        MessageKind::Login,
        MessageKind::Timer,
        MessageKind::DocumentUpload,
        MessageKind::Assistant,
        MessageKind::FunctionReturn,
        MessageKind::FunctionError,
    ];

    /// The kinds that make up the conversation proper (what `conversation_search` looks at):
    /// user messages and the assistant's turns.
    pub const CONVERSATION: [MessageKind; 2] = [MessageKind::User, MessageKind::Assistant];

    /// The chat role this kind is sent with. Events are sent as `user` messages carrying a JSON
    /// envelope, because many chat templates accept a system message only at the start.
    pub fn role(self) -> Role {
        match self {
            MessageKind::Assistant => Role::Assistant,
            MessageKind::FunctionReturn | MessageKind::FunctionError => Role::Tool,
            _ => Role::User,
        }
    }

    /// A stable lowercase name (used in storage and in search filters).
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::User => "user",
            MessageKind::SystemAlert => "system_alert",
            MessageKind::Heartbeat => "heartbeat",
            MessageKind::Login => "login",
            MessageKind::Timer => "timer",
            MessageKind::DocumentUpload => "document_upload",
            MessageKind::Assistant => "assistant",
            MessageKind::FunctionReturn => "function_return",
            MessageKind::FunctionError => "function_error",
        }
    }

    /// Parses [`MessageKind::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One message of an agent's history. Recall storage keeps every one of them, forever.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Its id.
    pub id: MessageId,
    /// The agent whose history it belongs to.
    pub agent_id: AgentId,
    /// What it is.
    pub kind: MessageKind,
    /// Plain text: the user's words, the assistant's inner monologue, a function's result, or an
    /// alert's text.
    pub text: String,
    /// Function calls (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call this message answers (function results only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The function name for results; the user's name for user messages, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When it was created (UTC).
    pub created_at: DateTime<Utc>,
}

impl Message {
    /// A new message of `kind` with `text`, created at `at`.
    pub fn new(
        agent_id: AgentId,
        kind: MessageKind,
        text: impl Into<String>,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            id: MessageId::new(),
            agent_id,
            kind,
            text: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            created_at: at,
        }
    }

    /// An assistant turn with inner monologue `text` and `tool_calls`.
    pub fn assistant(
        agent_id: AgentId,
        text: impl Into<String>,
        tool_calls: Vec<ToolCall>,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            tool_calls,
            ..Self::new(agent_id, MessageKind::Assistant, text, at)
        }
    }

    /// The result of the call `call_id` to `function`: `Ok(text)` or `Err(error text)`.
    pub fn function_result(
        agent_id: AgentId,
        call_id: impl Into<String>,
        function: impl Into<String>,
        result: Result<String, String>,
        at: DateTime<Utc>,
    ) -> Self {
        let (kind, text) = match result {
            Ok(text) => (MessageKind::FunctionReturn, text),
            Err(text) => (MessageKind::FunctionError, text),
        };
        Self {
            tool_call_id: Some(call_id.into()),
            name: Some(function.into()),
            ..Self::new(agent_id, kind, text, at)
        }
    }

    /// The chat role this message is sent with.
    pub fn role(&self) -> Role {
        self.kind.role()
    }

    /// Text that search should match: the plain text plus the string values of any function-call
    /// arguments (so what the assistant *said* through `send_message` is findable).
    pub fn searchable_text(&self) -> String {
        let mut out = self.text.clone();
        for call in &self.tool_calls {
            if let Ok(serde_json::Value::Object(args)) =
                serde_json::from_str::<serde_json::Value>(&call.arguments)
            {
                for value in args.values() {
                    if let serde_json::Value::String(s) = value {
                        if !out.is_empty() {
                            out.push('\n');
                        }
                        out.push_str(s);
                    }
                }
            }
        }
        out
    }

    /// Renders the message exactly as the LLM will see it.
    pub fn to_chat(&self) -> ChatMessage {
        let time = format_time(self.created_at);
        let envelope = |kind: &str, field: &str| {
            json!({ "type": kind, field: self.text, "time": time }).to_string()
        };
        match self.kind {
            MessageKind::User => {
                let mut value =
                    json!({ "type": "user_message", "message": self.text, "time": time });
                if let Some(name) = &self.name {
                    value["name"] = json!(name);
                }
                ChatMessage::user(value.to_string())
            }
            MessageKind::SystemAlert => ChatMessage::user(envelope("system_alert", "message")),
            MessageKind::Heartbeat => ChatMessage::user(envelope("heartbeat", "reason")),
            MessageKind::Login => ChatMessage::user(envelope("login", "message")),
            MessageKind::Timer => ChatMessage::user(envelope("timer", "message")),
            MessageKind::DocumentUpload => {
                ChatMessage::user(envelope("document_upload", "message"))
            }
            MessageKind::Assistant => ChatMessage {
                role: Role::Assistant,
                content: self.text.clone(),
                tool_calls: self.tool_calls.clone(),
                tool_call_id: None,
                name: None,
            },
            MessageKind::FunctionReturn | MessageKind::FunctionError => {
                let status = if self.kind == MessageKind::FunctionReturn {
                    "OK"
                } else {
                    "Failed"
                };
                ChatMessage {
                    role: Role::Tool,
                    content: json!({ "status": status, "message": self.text, "time": time })
                        .to_string(),
                    tool_calls: Vec::new(),
                    tool_call_id: self.tool_call_id.clone(),
                    name: self.name.clone(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap()
    }

    #[test]
    fn user_messages_render_as_timestamped_envelopes() {
        let m = Message::new(AgentId::new(), MessageKind::User, "hi \"there\"", at());
        let chat = m.to_chat();
        assert_eq!(chat.role, Role::User);
        let v: serde_json::Value = serde_json::from_str(&chat.content).unwrap();
        assert_eq!(v["type"], "user_message");
        assert_eq!(v["message"], "hi \"there\"");
        assert_eq!(v["time"], "2026-01-02T03:04:05Z");
    }

    #[test]
    fn function_results_carry_status_and_call_id() {
        let ok = Message::function_result(AgentId::new(), "c1", "f", Ok("done".into()), at());
        let chat = ok.to_chat();
        assert_eq!(chat.role, Role::Tool);
        assert_eq!(chat.tool_call_id.as_deref(), Some("c1"));
        assert!(chat.content.contains("\"status\":\"OK\""));
        let err = Message::function_result(AgentId::new(), "c2", "f", Err("boom".into()), at());
        assert_eq!(err.kind, MessageKind::FunctionError);
        assert!(err.to_chat().content.contains("\"status\":\"Failed\""));
    }

    #[test]
    fn searchable_text_includes_call_arguments() {
        let call = ToolCall {
            id: "c".into(),
            name: "send_message".into(),
            arguments: r#"{"message":"the cat is called Mochi"}"#.into(),
        };
        let m = Message::assistant(AgentId::new(), "thinking", vec![call], at());
        assert!(m.searchable_text().contains("Mochi"));
        assert!(m.searchable_text().contains("thinking"));
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in MessageKind::ALL {
            assert_eq!(MessageKind::parse(kind.as_str()), Some(kind));
        }
    }
}
