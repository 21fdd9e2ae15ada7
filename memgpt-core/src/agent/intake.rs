//! Events into messages: what each kind of [`Event`] puts into the queue (and the passages
//! an upload adds).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::run::StepRun;
use super::{Agent, Event, EventKind};
use crate::error::{Error, Result};
use crate::message::{Message, MessageKind};
use crate::store::{Page, RecallQuery};
use crate::time::format_time;

impl Agent {
    /// The message an event puts into the queue (and the passages an upload adds).
    pub(super) async fn event_message(
        &mut self,
        event: &Event,
        run: &mut StepRun,
        now: DateTime<Utc>,
    ) -> Result<Message> {
        let id = self.id();
        Ok(match &event.kind {
            EventKind::UserMessage { text, name } => {
                let mut message = Message::new(id, MessageKind::User, text.clone(), now);
                message.name = name.clone();
                message
            }
            EventKind::SystemAlert { text } => {
                Message::new(id, MessageKind::SystemAlert, text.clone(), now)
            }
            EventKind::Login => {
                let text = match self.last_login().await? {
                    Some(at) => format!(
                        "The user logged in. Their previous login was at {}.",
                        format_time(at)
                    ),
                    None => "The user logged in for the first time.".to_owned(),
                };
                Message::new(id, MessageKind::Login, text, now)
            }
            EventKind::DocumentUpload { name, text } => {
                let mut metadata = serde_json::Map::new();
                metadata.insert("source".into(), Value::String(name.clone()));
                let passages = self
                    .passage_writer()
                    .write(id, text, metadata, true, now)
                    .await
                    .map_err(|e| Error::from_passages(name, e))?;
                let count = passages.len();
                run.writes.passages.extend(passages);
                self.sync_archival_count(run);
                Message::new(
                    id,
                    MessageKind::DocumentUpload,
                    format!(
                        "The user uploaded the document \"{name}\" ({} characters) into your archival memory as {count} \
                         passages. Search it with archival_memory_search.",
                        text.chars().count()
                    ),
                    now,
                )
            }
            // Handled by `run_step`: a resumed step adds no message.
            EventKind::Resume => {
                return Err(Error::Config(
                    "a resumed step has no event message".to_owned(),
                ));
            }
            // Handled by `run_step` before any event message is made.
            EventKind::Approval { call_id, .. } => {
                return Err(Error::NoPendingApproval {
                    call_id: call_id.clone(),
                });
            }
            EventKind::AgentMessage {
                from,
                from_name,
                text,
                waiting,
                ..
            } => {
                let answer = if waiting.last() == Some(from) {
                    "it waits: what you say with send_message goes back to it"
                } else {
                    "it does not wait: write back with send_message_to_agent if you need to"
                };
                let mut message = Message::new(
                    id,
                    MessageKind::User,
                    format!("[A message from agent {from_name} ({from}); {answer}] {text}"),
                    now,
                );
                message.name = Some(from_name.clone());
                message
            }
            EventKind::Consolidation { text, .. } => {
                Message::new(id, MessageKind::SystemAlert, text.clone(), now)
            }
            EventKind::Timer { reason } => Message::new(
                id,
                MessageKind::Timer,
                format!(
                    "Timer: {reason}. You may act on your own now; the user may not be present."
                ),
                now,
            ),
        })
    }

    async fn last_login(&self) -> Result<Option<DateTime<Utc>>> {
        let mut query = RecallQuery::kinds([MessageKind::Login], Page::first(1));
        let first = self.rt.storage.recall.search(self.id(), &query).await?;
        if first.total == 0 {
            return Ok(None);
        }
        query.page = Page::new(first.total - 1, 1);
        let last = self.rt.storage.recall.search(self.id(), &query).await?;
        Ok(last.hits.first().map(|hit| hit.item.created_at))
    }
}
