//! The agent's external context for callers other than its LLM (a server, an inspector, a
//! test): searches ranked exactly as the agent's own functions rank them, and passage deletion.

use chrono::{DateTime, Utc};

use super::Agent;
use crate::error::{Error, Result};
use crate::function::RecallResults;
use crate::ids::PassageId;
use crate::store::{
    Page, Passage, PassageRetirement, RecallQuery, SearchMode, SearchPage, TimeRange, Validity,
};

impl Agent {
    /// Searches recall storage as `conversation_search` does: the agent's ranking, by meaning
    /// and words when it has an embedder (messages still waiting for their embeddings are
    /// matched by words, with a note: the next step, [`Agent::call`] or [`Agent::reindex`]
    /// embeds them). Unlike the function, the hits do not count as uses of the messages, and
    /// nothing is written.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> memgpt_core::Result<()> {
    /// use std::sync::Arc;
    /// use memgpt_core::Agent;
    /// use memgpt_core::store::{Page, RecallQuery};
    /// use memgpt_core::testing::ScriptedProvider;
    /// use serde_json::json;
    ///
    /// let llm = Arc::new(ScriptedProvider::new());
    /// llm.push_call("send_message", json!({"message": "Noted!"}));
    /// let mut agent = Agent::builder().provider(llm).build().await?;
    /// agent.step("My cat is called Miso.").await?;
    /// let found = agent.search_recall(&RecallQuery::text("cat", Page::first(5))).await?;
    /// assert_eq!(found.page.hits[0].item.text, "My cat is called Miso.");
    /// # Ok(()) }
    /// ```
    pub async fn search_recall(&self, query: &RecallQuery) -> Result<RecallResults> {
        Ok(crate::function::search_recall_hybrid(
            &self.rt.storage,
            self.rt.embedder.as_deref(),
            self.id(),
            self.rt.settings.recall_ranking,
            self.embedding_backlog,
            query,
        )
        .await?)
    }

    /// Searches archival storage as `archival_memory_search` does, with the caller's page:
    /// `mode` `None` is the agent's configured mode; without an embedder (or in
    /// [`SearchMode::Text`]) the search is by words alone. `validity` chooses the facts:
    /// [`Validity::Current`] (those valid now by the agent's clock), [`Validity::AsOf`] an
    /// earlier instant, or [`Validity::Any`] (superseded and forgotten ones included).
    pub async fn search_archival(
        &self,
        text: &str,
        mode: Option<SearchMode>,
        page: Page,
        tags: &[String],
        range: TimeRange,
        validity: Validity,
    ) -> Result<SearchPage<Passage>> {
        // "Now" is the agent's clock, as for its functions.
        let validity = match validity {
            Validity::Current => Validity::AsOf(self.rt.clock.now()),
            other => other,
        };
        let query = crate::function::archival_query(
            self.rt.embedder.as_deref(),
            mode.unwrap_or(self.rt.settings.archival_search),
            text,
            page,
            tags,
            range,
            validity,
        )
        .await?;
        Ok(self.rt.storage.archival.search(self.id(), &query).await?)
    }

    /// Replaces the fact in passage `id` with `text`, as `archival_memory_update` does, in one
    /// commit: the new version (split and embedded like an insert, with the old one's tags)
    /// is stored, true from now, and the old one stops being current now, superseded by it. Returns the new
    /// passages' ids. Fails with [`Error::PassageNotFound`] or [`Error::PassageRetired`].
    pub async fn update_archival(&mut self, id: PassageId, text: &str) -> Result<Vec<PassageId>> {
        self.sync_with_store().await?;
        let now = self.rt.clock.now();
        let old = self.current_passage(id, now).await?;
        let mut added = self
            .passage_writer()
            .write(self.id(), text, old.metadata, false, now)
            .await
            .map_err(|e| Error::from_passages("archival update", e))?;
        let retired = vec![PassageRetirement::superseded(id, &mut added, now)];
        let ids: Vec<PassageId> = added.iter().map(|p| p.id).collect();
        self.commit_archival(
            now,
            super::ArchivalChanges {
                added,
                retired,
                ..Default::default()
            },
        )
        .await?;
        Ok(ids)
    }

    /// Retires passage `id` now, for `reason`, as `archival_memory_forget` does: searches no
    /// longer return it as a current fact; it stays as history (found as of an earlier time).
    /// Fails with [`Error::PassageNotFound`] or [`Error::PassageRetired`].
    pub async fn forget_archival(&mut self, id: PassageId, reason: &str) -> Result<()> {
        let now = self.rt.clock.now();
        self.forget_archival_at(id, reason, now).await
    }

    /// [`Agent::forget_archival`] from `at` on (a time to live; an `at` in the past counts as
    /// now): the passage stays a current fact until then.
    pub async fn forget_archival_at(
        &mut self,
        id: PassageId,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.sync_with_store().await?;
        let now = self.rt.clock.now();
        self.current_passage(id, now).await?;
        let retired = vec![PassageRetirement {
            id,
            at: at.max(now),
            superseded_by: None,
            reason: reason.to_owned(),
        }];
        self.commit_archival(
            now,
            super::ArchivalChanges {
                retired,
                ..Default::default()
            },
        )
        .await
    }

    /// The agent's passage `id` if it is a current fact at `now`.
    async fn current_passage(&self, id: PassageId, now: DateTime<Utc>) -> Result<Passage> {
        let passage = self
            .rt
            .storage
            .archival
            .get_passages(self.id(), &[id])
            .await?
            .pop()
            .ok_or(Error::PassageNotFound(id))?;
        match passage.not_valid_because(now) {
            Some(why) => Err(Error::PassageRetired { id, why }),
            None => Ok(passage),
        }
    }

    /// Commits archival changes alone; a failed commit leaves the agent as it was.
    async fn commit_archival(
        &mut self,
        now: DateTime<Utc>,
        changes: super::ArchivalChanges,
    ) -> Result<()> {
        let guard = super::Rollback::new(self);
        guard
            .agent
            .commit_with(now, Vec::new(), Vec::new(), changes)
            .await?;
        guard.keep();
        Ok(())
    }

    /// Deletes those of `ids` that are the agent's passages, in one commit, and returns them
    /// (ids that are not the agent's are ignored). A failed commit leaves everything as it was.
    pub async fn delete_archival(&mut self, ids: &[PassageId]) -> Result<Vec<PassageId>> {
        self.sync_with_store().await?;
        let found: Vec<PassageId> = self
            .rt
            .storage
            .archival
            .get_passages(self.id(), ids)
            .await?
            .into_iter()
            .map(|p| p.id)
            .collect();
        if found.is_empty() {
            return Ok(found);
        }
        let now = self.rt.clock.now();
        self.commit_archival(
            now,
            super::ArchivalChanges {
                deleted: found.clone(),
                ..Default::default()
            },
        )
        .await?;
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::Agent;
    use crate::ids::PassageId;
    use crate::store::{Page, RecallQuery, SearchMode, Storage, TimeRange, Validity};
    use crate::testing::ScriptedProvider;

    #[tokio::test]
    async fn passages_are_searched_and_deleted_only_for_their_agent() {
        let storage = Storage::in_memory();
        let build = || {
            Agent::builder()
                .provider(Arc::new(ScriptedProvider::new()))
                .storage(storage.clone())
        };
        let mut a = build().name("a").build().await.unwrap();
        let mut b = build().name("b").build().await.unwrap();
        let mine = a
            .insert_archival("the launch code is 4242", Default::default())
            .await
            .unwrap();
        let theirs = b
            .insert_archival("the launch code is 1111", Default::default())
            .await
            .unwrap();
        let found = a
            .search_archival(
                "launch code",
                Some(SearchMode::Text),
                Page::first(5),
                &[],
                TimeRange::default(),
                Validity::Current,
            )
            .await
            .unwrap();
        assert_eq!(found.total, 1);
        assert_eq!(found.hits[0].item.id, mine[0]);

        // Another agent's passage and an unknown id are ignored; nothing is committed for them.
        let version = a.version();
        let unknown = PassageId::new();
        assert!(
            a.delete_archival(&[theirs[0], unknown])
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(a.version(), version);
        assert_eq!(
            a.delete_archival(&[mine[0], theirs[0]]).await.unwrap(),
            mine
        );
        assert_eq!(a.version(), version + 1);
        assert_eq!(a.context().counts().archival, 0);
        assert_eq!(storage.archival.count_passages(b.id()).await.unwrap(), 1);
        let found = a
            .search_archival(
                "launch",
                None,
                Page::first(5),
                &[],
                TimeRange::default(),
                Validity::Current,
            )
            .await
            .unwrap();
        assert_eq!(found.total, 0);
        // Nothing was said yet, so recall is empty and says how it ranked.
        let recalled = a
            .search_recall(&RecallQuery::text("launch", Page::first(5)))
            .await
            .unwrap();
        assert_eq!(recalled.page.total, 0);
        assert!(!recalled.semantic);
        assert!(recalled.note.is_some());
    }
}
