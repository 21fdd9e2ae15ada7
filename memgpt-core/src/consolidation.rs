//! Memory consolidation in the background: a *companion* agent (Letta's sleep-time agent)
//! that shares its primary's memory blocks and, every few steps of the primary or after it has
//! been idle a while, reads what was said since its last run and rewrites the shared blocks and
//! archival memory, so the primary answers from clean, current memory without spending its own
//! turns on it.
//!
//! * The relation is an [`AgentGroup`] of kind [`SLEEPTIME`] on both agents: the primary is
//!   its manager, the companion its member (as Letta's agent files write it, so their sleep-time
//!   pairs import into this). [`Consolidation::of`] reads it, with the trigger: every
//!   [`Consolidation::every_steps`] user messages of the primary, or
//!   [`Consolidation::idle`] after its last step.
//! * [`Agent::consolidate`](crate::Agent::consolidate) runs one companion step over the
//!   primary's conversation since the companion's cursor
//!   ([`AgentState::consolidated_until`](crate::store::AgentState::consolidated_until)), which
//!   the step advances in its own commit: a failed or interrupted run reads the same messages
//!   again next time, and the step is recorded like any other.
//! * [`Agent::add_companion`](crate::Agent::add_companion) makes a companion for an agent,
//!   sharing its blocks. `memgpt serve` runs companions on its persisted timers after the
//!   primary's steps; the primary never waits for them.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::config::{AgentConfig, AgentGroup};
use crate::ids::AgentId;
use crate::message::{Message, MessageKind};
use crate::store::{Page, RecallQuery, Storage, StoreError, TimeRange};
use crate::time::format_time;

/// The [`AgentGroup::kind`] of a primary and its consolidation companion (Letta's name).
pub const SLEEPTIME: &str = "sleeptime";

/// The group setting of how many user messages of the primary start a consolidation (Letta's
/// name).
pub const FREQUENCY_SETTING: &str = "sleeptime_agent_frequency";

/// The group setting of how many minutes after the primary's last step a consolidation starts,
/// if anything is left to consolidate.
pub const IDLE_SETTING: &str = "sleeptime_idle_minutes";

/// Letta's default frequency, used when the group does not say.
pub const DEFAULT_EVERY_STEPS: u32 = 5;

/// The most messages of the primary one consolidation reads; the rest wait for the next.
pub const MAX_MESSAGES: usize = 100;

/// The most characters of one message a consolidation shows.
const MAX_MESSAGE_CHARS: usize = 2_000;

/// A primary and its consolidation companion, with when the companion runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consolidation {
    /// The agent whose memory is consolidated.
    pub primary: AgentId,
    /// The companion that consolidates it.
    pub companion: AgentId,
    /// Runs after this many user messages of the primary since the last run.
    pub every_steps: u32,
    /// Also runs this long after the primary's last step, if anything is left.
    pub idle: Option<Duration>,
}

impl Consolidation {
    /// The consolidation agent `agent` (with configuration `config`) takes part in, as
    /// primary or as companion, from its [`AgentGroup`] of kind [`SLEEPTIME`]; `None` for
    /// other agents.
    pub fn of(agent: AgentId, config: &AgentConfig) -> Option<Self> {
        let group = config.group.as_ref()?;
        if group.kind != SLEEPTIME {
            return None;
        }
        let primary = group.manager?;
        let companion = if primary == agent {
            *group.members.first()?
        } else if group.members.contains(&agent) {
            agent
        } else {
            return None;
        };
        let setting = |name: &str| group.settings.get(name).and_then(Value::as_u64);
        Some(Self {
            primary,
            companion,
            every_steps: setting(FREQUENCY_SETTING)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(DEFAULT_EVERY_STEPS)
                .max(1),
            idle: setting(IDLE_SETTING)
                .and_then(|m| i64::try_from(m).ok())
                .filter(|m| *m > 0)
                .map(Duration::minutes),
        })
    }

    /// The group both agents carry for this consolidation.
    pub fn group(&self) -> AgentGroup {
        let mut settings = serde_json::Map::new();
        settings.insert(FREQUENCY_SETTING.into(), Value::from(self.every_steps));
        if let Some(idle) = self.idle {
            settings.insert(IDLE_SETTING.into(), Value::from(idle.num_minutes()));
        }
        AgentGroup {
            kind: SLEEPTIME.to_owned(),
            manager: Some(self.primary),
            members: vec![self.companion],
            settings,
        }
    }
}

/// How many user messages of `primary` wait for a consolidation whose cursor is `cursor` (the
/// companion's [`AgentState::consolidated_until`](crate::store::AgentState::consolidated_until)):
/// one count query.
pub async fn waiting(
    storage: &Storage,
    primary: AgentId,
    cursor: Option<DateTime<Utc>>,
) -> Result<usize, StoreError> {
    let range = TimeRange {
        start: cursor,
        end: None,
    };
    let mut query = RecallQuery::range(range, Page::first(1));
    query.kinds = vec![MessageKind::User];
    Ok(storage.recall.list_messages(primary, &query).await?.total)
}

/// The companion's input: the primary's messages since its last run, as a transcript, and the
/// instant the run consolidates up to.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    /// The text the companion reads.
    pub text: String,
    /// How many messages of the primary it holds.
    pub messages: usize,
    /// Just after the newest message it holds: the companion's next cursor.
    pub until: DateTime<Utc>,
}

impl Transcript {
    /// The transcript of `messages` (the primary's conversation, oldest first) of the agent
    /// named `primary`; `None` when they hold nothing said (only memory calls, say).
    pub fn of(primary: &str, messages: &[Message]) -> Option<Self> {
        let newest = messages.last()?.created_at;
        let mut lines = Vec::new();
        for message in messages {
            let said = match message.kind {
                MessageKind::User => message.text.clone(),
                MessageKind::Assistant => replies(message).join("\n"),
                _ => continue,
            };
            if said.trim().is_empty() {
                continue;
            }
            let who = match message.kind {
                MessageKind::User => message.name.as_deref().unwrap_or("user"),
                _ => primary,
            };
            lines.push(format!(
                "[{}] {who}: {}",
                format_time(message.created_at),
                shortened(&said)
            ));
        }
        if lines.is_empty() {
            return None;
        }
        let text = format!(
            "[automated, consolidation] New conversation of {primary} since your last run \
             ({} messages). Update the memory blocks you share with {primary} so that they hold \
             what is true now: add what is new, correct what changed, remove what is outdated \
             (memory_rethink rewrites a block as a whole; core_memory_append and \
             core_memory_replace edit it), and keep details in archival memory. Then call \
             memory_finish_edits.\n\n{}",
            lines.len(),
            lines.join("\n")
        );
        Some(Self {
            text,
            messages: lines.len(),
            until: newest + Duration::microseconds(1),
        })
    }
}

/// What an assistant message said to the user: its `send_message` texts.
fn replies(message: &Message) -> Vec<String> {
    message
        .tool_calls
        .iter()
        .filter(|call| call.name == "send_message")
        .filter_map(|call| {
            let args: Value = serde_json::from_str(&call.arguments).ok()?;
            args.get("message")?.as_str().map(str::to_owned)
        })
        .collect()
}

fn shortened(text: &str) -> String {
    let flat = text.replace('\n', " ");
    match flat.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}... (cut)", &flat[..cut]),
        None => flat,
    }
}

/// The default instructions of a consolidation companion.
pub const DEFAULT_COMPANION_PROMPT: &str = "You maintain the memory of another agent, in the background. You \
never talk to the user: you receive stretches of that agent's conversation and keep the memory blocks you share \
with it clean and current, so that it answers from what is true now.

- Blocks are always in the other agent's view and have character limits: keep them short, organised and free of \
duplicates. Move details that are not needed in every answer to archival memory (archival_memory_insert).
- When something changed (a new address, a moved date), replace the old fact; do not keep both.
- memory_rethink rewrites a block as a whole (it must keep everything still true); core_memory_append and \
core_memory_replace make small edits. An edit is refused if another writer changed the block since you read it: \
read the new text and edit again.
- When memory is up to date, call memory_finish_edits.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use crate::store::AgentState;

    #[test]
    fn the_transcript_holds_what_was_said_and_the_next_cursor() {
        let agent = AgentId::new();
        let t = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let mut user = Message::new(agent, MessageKind::User, "My sister is Ada.", t);
        user.name = Some("Sam".into());
        let mut reply = Message::new(agent, MessageKind::Assistant, "thinking", t);
        reply.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "send_message".into(),
            arguments: r#"{"message":"Nice to meet her!"}"#.into(),
        }];
        let memory_only = Message::new(agent, MessageKind::Assistant, "noting", t);
        let transcript = Transcript::of("Evie", &[user, reply, memory_only]).unwrap();
        assert_eq!(transcript.messages, 2);
        assert!(transcript.text.contains("Sam: My sister is Ada."));
        assert!(transcript.text.contains("Evie: Nice to meet her!"));
        assert!(!transcript.text.contains("thinking"));
        assert_eq!(transcript.until, t + Duration::microseconds(1));
        assert!(Transcript::of("Evie", &[]).is_none());
    }

    #[test]
    fn the_group_says_who_consolidates_whom_and_when() {
        let (primary, companion) = (AgentId::new(), AgentId::new());
        let consolidation = Consolidation {
            primary,
            companion,
            every_steps: 3,
            idle: Some(Duration::minutes(20)),
        };
        let t = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let mut state = AgentState {
            id: primary,
            name: "evie".into(),
            version: 0,
            config: AgentConfig::default(),
            system: String::new(),
            memory: Default::default(),
            summary: Default::default(),
            fifo: Vec::new(),
            pinned: Vec::new(),
            pressure_warned: false,
            heartbeats_paused_until: None,
            memory_updated_at: t,
            created_at: t,
            updated_at: t,
            pending_approval: None,
            consolidated_until: None,
        };
        state.config.group = Some(consolidation.group());
        assert_eq!(
            Consolidation::of(state.id, &state.config),
            Some(consolidation.clone())
        );
        state.id = companion;
        assert_eq!(
            Consolidation::of(state.id, &state.config),
            Some(consolidation)
        );
        state.id = AgentId::new();
        assert_eq!(Consolidation::of(state.id, &state.config), None);
        // Letta's files give the frequency only.
        state.id = primary;
        let group = state.config.group.as_mut().unwrap();
        group.settings.remove(IDLE_SETTING);
        group.settings.remove(FREQUENCY_SETTING);
        let read = Consolidation::of(state.id, &state.config).unwrap();
        assert_eq!((read.every_steps, read.idle), (DEFAULT_EVERY_STEPS, None));
    }
}
