//! The offline arm of nested KV: a scripted *oracle policy* in place of the LLM.
//!
//! It never sees the answer. Each time it is called it reads the context the agent compiled
//! (the question's key, its own earlier `archival_memory_search` calls and their results) and
//! emits the ideal next function call: search the current key; when a result shows the key's
//! value, search that value; when a search shows the current value is no key of any pair, send
//! it as the answer. So it proves the machinery (archival insert, lexical search of UUIDs,
//! heartbeats, the chain of steps), not a model's skill.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use memgpt::llm::{ChatRequest, ChatResponse, FinishReason, LlmError, LlmProvider, Role, Usage};
use memgpt::message::ToolCall;
use memgpt::tokens::{TiktokenCounter, TokenCounter};
use serde_json::{Value, json};

/// The oracle policy (see the module docs).
#[derive(Debug)]
pub struct OracleKvPolicy {
    counter: TiktokenCounter,
    calls: AtomicU64,
}

impl OracleKvPolicy {
    pub fn new() -> Self {
        Self {
            counter: TiktokenCounter::cl100k(),
            calls: AtomicU64::new(0),
        }
    }
}

/// The UUIDs in `text`, in order.
pub fn uuids(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 36 <= bytes.len() {
        let candidate = &bytes[i..i + 36];
        let shaped = candidate.iter().enumerate().all(|(j, b)| match j {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
        let bounded = (i == 0 || !bytes[i - 1].is_ascii_alphanumeric())
            && bytes.get(i + 36).is_none_or(|b| !b.is_ascii_alphanumeric());
        if shaped && bounded {
            out.push(&text[i..i + 36]);
            i += 36;
        } else {
            i += 1;
        }
    }
    out
}

/// A tool result's text (results arrive as `{"status", "message", "time"}` envelopes).
fn tool_text(content: &str) -> String {
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Object(o)) => o
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or(content)
            .to_owned(),
        _ => content.to_owned(),
    }
}

/// What to do next, from the context alone.
#[derive(Debug, PartialEq)]
pub enum Next {
    Search(String),
    Answer(String),
}

/// Decides the next call from the messages (see the module docs).
pub fn decide(request: &ChatRequest) -> Option<Next> {
    let messages = &request.messages;
    let question_at = messages
        .iter()
        .rposition(|m| m.role == Role::User && !uuids(&m.content).is_empty())?;
    let mut current = uuids(&messages[question_at].content)[0].to_owned();
    let mut searched_current = false;
    for (i, m) in messages.iter().enumerate().skip(question_at + 1) {
        if m.role != Role::Tool {
            continue;
        }
        // The query of the call this result answers.
        let query = messages[..i].iter().rev().find_map(|a| {
            a.tool_calls
                .iter()
                .find(|c| Some(&c.id) == m.tool_call_id.as_ref())
        });
        let Some(query) = query
            .filter(|c| c.name == "archival_memory_search")
            .and_then(|c| serde_json::from_str::<Value>(&c.arguments).ok())
            .and_then(|a| a["query"].as_str().map(str::to_owned))
        else {
            continue;
        };
        if query != current {
            continue;
        }
        searched_current = true;
        let text = tool_text(&m.content);
        let next = text.lines().find_map(|line| match uuids(line)[..] {
            [key, value] if key == current => Some(value.to_owned()),
            _ => None,
        });
        if let Some(value) = next {
            current = value;
            searched_current = false;
        }
    }
    Some(if searched_current {
        Next::Answer(current)
    } else {
        Next::Search(current)
    })
}

#[async_trait]
impl LlmProvider for OracleKvPolicy {
    fn model(&self) -> &str {
        "oracle-policy"
    }

    fn context_window(&self) -> Option<usize> {
        Some(8192)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let prompt_tokens = request
            .messages
            .iter()
            .map(|m| self.counter.count_message(m))
            .sum::<usize>()
            + self.counter.count_tools(&request.tools);
        let id = format!("call_{}", self.calls.fetch_add(1, Ordering::Relaxed));
        let (content, call) = match decide(request) {
            _ if request.tools.is_empty() => ("Summary: key/value lookups.".to_owned(), None),
            Some(Next::Search(key)) => (
                format!("Looking up {key} in archival memory."),
                Some((
                    "archival_memory_search",
                    json!({"query": key, "request_heartbeat": true}),
                )),
            ),
            Some(Next::Answer(value)) => (
                format!("{value} is not a key of any pair: that is the answer."),
                Some(("send_message", json!({ "message": value }))),
            ),
            None => (
                "No key in the question.".to_owned(),
                Some((
                    "send_message",
                    json!({"message": "I found no key to look up."}),
                )),
            ),
        };
        let tool_calls: Vec<ToolCall> = call
            .map(|(name, arguments)| ToolCall {
                id,
                name: name.to_owned(),
                arguments: arguments.to_string(),
            })
            .into_iter()
            .collect();
        let completion_tokens = self.counter.count_text(&content)
            + tool_calls
                .iter()
                .map(|c| self.counter.count_text(&c.arguments))
                .sum::<usize>();
        Ok(ChatResponse {
            content,
            finish_reason: if tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
            tool_calls,
            usage: Usage {
                prompt_tokens: prompt_tokens as u64,
                completion_tokens: completion_tokens as u64,
                cached_prompt_tokens: 0,
            },
            model: "oracle-policy".to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use memgpt::llm::ChatMessage;

    use super::*;

    const A: &str = "94071d67-86df-455c-8ee9-691e492ff740";
    const B: &str = "0d7ba717-e034-410e-88ab-c13d37cc6499";

    #[test]
    fn uuids_are_found_on_boundaries_only() {
        assert_eq!(
            uuids(&format!("{{\"key\": \"{A}\", \"value\": \"{B}\"}}")),
            [A, B]
        );
        assert!(uuids(&format!("x{A}")).is_empty());
        assert!(uuids("no ids").is_empty());
    }

    #[test]
    fn the_policy_searches_follows_and_answers() {
        let question = ChatMessage::user(format!("What is the value of key {A}?"));
        let mut request = ChatRequest::new("m", vec![ChatMessage::system("s"), question]);
        assert_eq!(decide(&request), Some(Next::Search(A.into())));

        let call = |id: &str, q: &str| {
            let mut m = ChatMessage::new(Role::Assistant, "");
            m.tool_calls.push(ToolCall {
                id: id.into(),
                name: "archival_memory_search".into(),
                arguments: json!({ "query": q }).to_string(),
            });
            m
        };
        let result = |id: &str, text: String| {
            let mut m = ChatMessage::new(
                Role::Tool,
                json!({"status": "OK", "message": text}).to_string(),
            );
            m.tool_call_id = Some(id.into());
            m
        };
        request.messages.push(call("1", A).into());
        request.messages.push(
            result(
                "1",
                format!(
                    "Showing results 1-1 of 1:\n1. [t] {{\"key\": \"{A}\", \"value\": \"{B}\"}}"
                ),
            )
            .into(),
        );
        assert_eq!(decide(&request), Some(Next::Search(B.into())));
        // B appears only as a value: it is not a key, so it is the answer.
        request.messages.push(call("2", B).into());
        request.messages.push(
            result(
                "2",
                format!(
                    "Showing results 1-1 of 1:\n1. [t] {{\"key\": \"{A}\", \"value\": \"{B}\"}}"
                ),
            )
            .into(),
        );
        assert_eq!(decide(&request), Some(Next::Answer(B.into())));
    }
}
