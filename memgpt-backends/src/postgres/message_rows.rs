//! Messages as the column arrays one `INSERT ... SELECT FROM UNNEST` appends, with their
//! search documents: what the careful commit and the one-statement step both send.

use chrono::{DateTime, Utc};
use memgpt_core::backend::DocumentBuilder;
use memgpt_core::message::Message;
use memgpt_core::store::StoreError;
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;

use crate::codec::db;

/// The insert of a [`MessageRows`] bound at `$1..$11`, in the order given (`seq` follows it);
/// `$when` is a condition the rows are inserted under (`true` for none).
macro_rules! insert_message_rows {
    ($when:literal) => {
        concat!(
            "INSERT INTO messages (id, agent_id, kind, text, tool_calls, tool_call_id, name, created_at, \
                                   search_text, turn, document_length) \
             SELECT u.id, u.agent_id, u.kind, u.text, u.tool_calls::jsonb, u.tool_call_id, u.name, \
                    u.created_at, u.search_text, u.turn, u.len \
             FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], \
                         $8::timestamptz[], $9::text[], $10::bigint[], $11::int4[]) WITH ORDINALITY \
                  AS u(id, agent_id, kind, text, tool_calls, tool_call_id, name, created_at, search_text, turn, len, ord) \
             WHERE ",
            $when,
            " ORDER BY u.ord"
        )
    };
}
pub(super) use insert_message_rows;

/// Messages as columns, with the documents a [`DocumentBuilder`] gave them.
pub(super) struct MessageRows<'a> {
    ids: Vec<uuid::Uuid>,
    agents: Vec<uuid::Uuid>,
    kinds: Vec<&'a str>,
    texts: Vec<&'a str>,
    calls: Vec<Option<String>>,
    call_ids: Vec<Option<&'a str>>,
    names: Vec<Option<&'a str>>,
    times: Vec<DateTime<Utc>>,
    searches: Vec<String>,
    turns: Vec<Option<i64>>,
    lengths: Vec<i32>,
    /// How many terms the documents hold together.
    pub(super) terms: i64,
}

impl<'a> MessageRows<'a> {
    /// The rows of `messages`, their documents continuing `builder`.
    pub(super) fn new(
        messages: &'a [Message],
        builder: &mut DocumentBuilder,
    ) -> Result<Self, StoreError> {
        let n = messages.len();
        let mut rows = Self {
            ids: Vec::with_capacity(n),
            agents: Vec::with_capacity(n),
            kinds: Vec::with_capacity(n),
            texts: Vec::with_capacity(n),
            calls: Vec::with_capacity(n),
            call_ids: Vec::with_capacity(n),
            names: Vec::with_capacity(n),
            times: Vec::with_capacity(n),
            searches: Vec::with_capacity(n),
            turns: Vec::with_capacity(n),
            lengths: Vec::with_capacity(n),
            terms: 0,
        };
        for m in messages {
            rows.ids.push(*m.id.as_uuid());
            rows.agents.push(*m.agent_id.as_uuid());
            rows.kinds.push(m.kind.as_str());
            rows.texts.push(m.text.as_str());
            rows.calls.push(if m.tool_calls.is_empty() {
                None
            } else {
                Some(
                    serde_json::to_string(&m.tool_calls)
                        .map_err(|e| db("encoding tool calls", e))?,
                )
            });
            rows.call_ids.push(m.tool_call_id.as_deref());
            rows.names.push(m.name.as_deref());
            rows.times.push(m.created_at);
            let document = builder.add(m);
            rows.terms += document.len() as i64;
            rows.turns.push(document.turn.map(|t| t as i64));
            rows.lengths.push(document.len() as i32);
            rows.searches.push(document.text());
        }
        Ok(rows)
    }

    /// How many messages there are.
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Binds the columns as `$1..$11` of [`insert_message_rows`] (the query's first
    /// parameters).
    pub(super) fn bind<'q>(
        self,
        query: Query<'q, Postgres, PgArguments>,
    ) -> Query<'q, Postgres, PgArguments> {
        query
            .bind(self.ids)
            .bind(self.agents)
            .bind(self.kinds)
            .bind(self.texts)
            .bind(self.calls)
            .bind(self.call_ids)
            .bind(self.names)
            .bind(self.times)
            .bind(self.searches)
            .bind(self.turns)
            .bind(self.lengths)
    }
}
