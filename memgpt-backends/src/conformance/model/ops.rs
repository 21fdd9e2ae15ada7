//! The operations a model-based run draws, as plain data that shrinks: agents, passages and
//! blocks are named by slot numbers, resolved against what exists when the operation runs, so
//! any subsequence of a sequence is still a sequence.

use std::fmt;

use proptest::prelude::*;

/// The words texts and queries are made of: few, so that searches match often.
pub(super) const WORDS: [&str; 10] = [
    "zebra", "quokka", "wombat", "numbat", "dingo", "bilby", "kiwi", "garden", "river", "lamp",
];

/// A word no text holds, and a query word that analyses to nothing (a stop word).
pub(super) const ABSENT: &str = "platypus";

/// Tags passages carry and archival searches filter by.
pub(super) const TAGS: [&str; 3] = ["red", "green", "blue"];

/// One operation on the store (and on the model).
#[derive(Clone)]
pub(crate) enum Op {
    /// Creates an agent.
    CreateAgent,
    /// Deletes the agent in `agent`'s slot.
    DeleteAgent { agent: usize },
    /// Commits one step of an agent: messages, passages, deletions and retirements of its
    /// passages.
    Step {
        /// The agent's slot.
        agent: usize,
        /// The step's messages.
        messages: Vec<MessageSpec>,
        /// Embed the conversation messages in the commit (else they wait for a backfill).
        embed_messages: bool,
        /// The step's new passages.
        passages: Vec<PassageSpec>,
        /// Slots of the agent's passages to delete.
        delete: Vec<usize>,
        /// Slots of the agent's passages to retire, each at a minute.
        retire: Vec<(usize, u16)>,
    },
    /// Stores embeddings of the agent's messages and passages that have none.
    Backfill { agent: usize },
    /// Creates a shared block.
    CreateBlock { words: Vec<u8> },
    /// Attaches a block to an agent (a commit of the agent).
    Attach { agent: usize, block: usize },
    /// Detaches a block from an agent (a commit of the agent).
    Detach { agent: usize, block: usize },
    /// Appends words to a shared block.
    EditBlock { block: usize, words: Vec<u8> },
    /// Deletes a shared block (refused while attached).
    DeleteBlock { block: usize },
    /// A recall search (a listing when the query has no words), or one dropped at its
    /// `drop_at`-th pending await.
    Recall {
        agent: usize,
        query: RecallSpec,
        drop_at: Option<u8>,
    },
    /// An archival search, or one dropped at its `drop_at`-th pending await.
    Archival {
        agent: usize,
        query: ArchivalSpec,
        drop_at: Option<u8>,
    },
    /// Reads an agent back: state, counts, listings, messages and passages by id.
    Read { agent: usize },
    /// Drops every handle and opens the store again.
    Reopen,
}

/// A message of a step.
#[derive(Clone, Debug)]
pub(crate) struct MessageSpec {
    /// 0 user, 1 assistant, 2 function result, 3 system alert, 4 heartbeat.
    pub(crate) kind: u8,
    /// Indexes into [`WORDS`].
    pub(crate) words: Vec<u8>,
    /// Minutes after the fixtures' first instant.
    pub(crate) minute: u16,
}

/// A passage of a step.
#[derive(Clone, Debug)]
pub(crate) struct PassageSpec {
    pub(crate) words: Vec<u8>,
    /// Indexes into [`TAGS`].
    pub(crate) tags: Vec<u8>,
    pub(crate) minute: u16,
    /// Stored with its embedding (else it waits for a backfill).
    pub(crate) embedded: bool,
    /// When it stops being true, in minutes (a time to live).
    pub(crate) until: Option<u16>,
}

/// A recall query.
#[derive(Clone, Debug)]
pub(crate) struct RecallSpec {
    /// Indexes into [`WORDS`]; an index past them is [`ABSENT`]. Empty: a listing.
    pub(crate) words: Vec<u8>,
    /// With the query's embedding.
    pub(crate) embedded: bool,
    /// 0 every kind, 1 the conversation, 2 user, 3 assistant, 4 function results and alerts.
    pub(crate) kinds: u8,
    /// Minutes `[start, end)`.
    pub(crate) range: (Option<u16>, Option<u16>),
    /// Page size and number.
    pub(crate) page: (u8, u8),
}

/// An archival query.
#[derive(Clone, Debug)]
pub(crate) struct ArchivalSpec {
    pub(crate) words: Vec<u8>,
    /// 0 vector, 1 text, 2 hybrid, 3 hybrid without an embedding.
    pub(crate) mode: u8,
    pub(crate) tags: Vec<u8>,
    pub(crate) range: (Option<u16>, Option<u16>),
    /// 0 current, 1 as of a minute, 2 any version.
    pub(crate) validity: (u8, u16),
    pub(crate) page: (u8, u8),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words = |w: &[u8]| -> String {
            w.iter()
                .map(|&i| WORDS.get(i as usize).copied().unwrap_or(ABSENT))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match self {
            Op::CreateAgent => write!(f, "create agent"),
            Op::DeleteAgent { agent } => write!(f, "delete agent #{agent}"),
            Op::Step {
                agent,
                messages,
                embed_messages,
                passages,
                delete,
                retire,
            } => {
                write!(f, "step of agent #{agent}:")?;
                for m in messages {
                    let kind = ["user", "assistant", "result", "alert", "heartbeat"]
                        .get(m.kind as usize)
                        .unwrap_or(&"?");
                    write!(f, " {kind} {:?} @{}m;", words(&m.words), m.minute)?;
                }
                if !messages.is_empty() && !embed_messages {
                    write!(f, " (messages not embedded)")?;
                }
                for p in passages {
                    write!(
                        f,
                        " passage {:?} tags {:?} @{}m{}{};",
                        words(&p.words),
                        p.tags
                            .iter()
                            .map(|&t| TAGS[t as usize % TAGS.len()])
                            .collect::<Vec<_>>(),
                        p.minute,
                        if p.embedded { "" } else { " unembedded" },
                        p.until.map(|u| format!(" until {u}m")).unwrap_or_default()
                    )?;
                }
                for d in delete {
                    write!(f, " delete passage #{d};")?;
                }
                for (r, at) in retire {
                    write!(f, " retire passage #{r} at {at}m;")?;
                }
                Ok(())
            }
            Op::Backfill { agent } => write!(f, "embed what agent #{agent} has unembedded"),
            Op::CreateBlock { words: w } => write!(f, "create block {:?}", words(w)),
            Op::Attach { agent, block } => write!(f, "attach block #{block} to agent #{agent}"),
            Op::Detach { agent, block } => write!(f, "detach block #{block} from agent #{agent}"),
            Op::EditBlock { block, words: w } => {
                write!(f, "append {:?} to block #{block}", words(w))
            }
            Op::DeleteBlock { block } => write!(f, "delete block #{block}"),
            Op::Recall {
                agent,
                query,
                drop_at,
            } => {
                match drop_at {
                    Some(n) => write!(f, "recall search dropped at its await #{n}")?,
                    None => write!(f, "recall search")?,
                }
                write!(
                    f,
                    " of agent #{agent}: {:?}{} kinds {} range {:?} page {:?}",
                    words(&query.words),
                    if query.embedded { " (embedded)" } else { "" },
                    ["any", "conversation", "user", "assistant", "results+alerts"]
                        [query.kinds as usize % 5],
                    query.range,
                    query.page
                )
            }
            Op::Archival {
                agent,
                query,
                drop_at,
            } => {
                match drop_at {
                    Some(n) => write!(f, "archival search dropped at its await #{n}")?,
                    None => write!(f, "archival search")?,
                }
                write!(
                    f,
                    " of agent #{agent}: {:?} {} tags {:?} range {:?} validity {} page {:?}",
                    words(&query.words),
                    ["vector", "text", "hybrid", "hybrid without embedding"]
                        [query.mode as usize % 4],
                    query
                        .tags
                        .iter()
                        .map(|&t| TAGS[t as usize % TAGS.len()])
                        .collect::<Vec<_>>(),
                    query.range,
                    match query.validity.0 % 3 {
                        0 => "current".to_owned(),
                        1 => format!("as of {}m", query.validity.1),
                        _ => "any".to_owned(),
                    },
                    query.page
                )
            }
            Op::Read { agent } => write!(f, "read agent #{agent} back"),
            Op::Reopen => write!(f, "reopen the store"),
        }
    }
}

fn words(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0..WORDS.len() as u8, 1..=max)
}

/// Query words: mostly known words, sometimes [`ABSENT`].
fn query_words() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0..(WORDS.len() as u8 + 1), 1..=2)
}

/// A time: quarter hours over ten hours, so that items often sit exactly on the edge of a
/// query's time range or lifetime.
fn minute() -> impl Strategy<Value = u16> {
    (0..40u16).prop_map(|quarter| quarter * 15)
}

fn range() -> impl Strategy<Value = (Option<u16>, Option<u16>)> {
    prop_oneof![
        3 => Just((None, None)),
        1 => (minute(), prop::option::of(minute())).prop_map(|(a, b)| (Some(a), b)),
        1 => minute().prop_map(|b| (None, Some(b))),
    ]
}

fn page() -> impl Strategy<Value = (u8, u8)> {
    (1..6u8, 0..4u8)
}

/// Whether to drop a search at one of its awaits (one search in four).
fn drop_at() -> impl Strategy<Value = Option<u8>> {
    prop_oneof![3 => Just(None), 1 => (0..12u8).prop_map(Some)]
}

fn message() -> impl Strategy<Value = MessageSpec> {
    (
        prop_oneof![4 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8), 1 => Just(4u8)],
        words(4),
        minute(),
    )
        .prop_map(|(kind, words, minute)| MessageSpec {
            kind,
            words,
            minute,
        })
}

fn passage() -> impl Strategy<Value = PassageSpec> {
    (
        words(4),
        prop::collection::vec(0..TAGS.len() as u8, 0..=2),
        minute(),
        prop::bool::weighted(0.8),
        prop::option::weighted(0.2, minute()),
    )
        .prop_map(|(words, tags, minute, embedded, until)| PassageSpec {
            words,
            tags,
            minute,
            embedded,
            until,
        })
}

fn recall_query() -> impl Strategy<Value = RecallSpec> {
    (
        prop_oneof![4 => query_words(), 1 => Just(Vec::new())],
        any::<bool>(),
        0..5u8,
        range(),
        page(),
    )
        .prop_map(|(words, embedded, kinds, range, page)| RecallSpec {
            words,
            embedded,
            kinds,
            range,
            page,
        })
}

fn archival_query() -> impl Strategy<Value = ArchivalSpec> {
    (
        query_words(),
        0..4u8,
        prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(0..TAGS.len() as u8, 1..=2)],
        range(),
        (0..3u8, minute()),
        page(),
    )
        .prop_map(|(words, mode, tags, range, validity, page)| ArchivalSpec {
            words,
            mode,
            tags,
            range,
            validity,
            page,
        })
}

fn slot() -> impl Strategy<Value = usize> {
    0..8usize
}

/// One operation, weighted towards writes and searches.
pub(crate) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::CreateAgent),
        1 => slot().prop_map(|agent| Op::DeleteAgent { agent }),
        10 => (
            slot(),
            prop::collection::vec(message(), 0..4),
            prop::bool::weighted(0.7),
            prop::collection::vec(passage(), 0..3),
            prop::collection::vec(0..16usize, 0..2),
            prop::collection::vec((0..16usize, minute()), 0..2),
        )
            .prop_map(|(agent, messages, embed_messages, passages, delete, retire)| Op::Step {
                agent,
                messages,
                embed_messages,
                passages,
                delete,
                retire,
            }),
        1 => slot().prop_map(|agent| Op::Backfill { agent }),
        1 => words(2).prop_map(|words| Op::CreateBlock { words }),
        1 => (slot(), slot()).prop_map(|(agent, block)| Op::Attach { agent, block }),
        1 => (slot(), slot()).prop_map(|(agent, block)| Op::Detach { agent, block }),
        1 => (slot(), words(2)).prop_map(|(block, words)| Op::EditBlock { block, words }),
        1 => slot().prop_map(|block| Op::DeleteBlock { block }),
        6 => (slot(), recall_query(), drop_at()).prop_map(|(agent, query, drop_at)| Op::Recall {
            agent,
            query,
            drop_at
        }),
        6 => (slot(), archival_query(), drop_at()).prop_map(|(agent, query, drop_at)| Op::Archival {
            agent,
            query,
            drop_at
        }),
        2 => slot().prop_map(|agent| Op::Read { agent }),
        1 => Just(Op::Reopen),
    ]
}
