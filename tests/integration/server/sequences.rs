//! The sequence users reported through the API, on the embedded stack (SQLite + tantivy +
//! usearch, no embedder): a search, a deleted agent, and another agent's new passage and
//! message, which must be found, before and after a restart.

use super::*;

/// The texts a search of `what` (`archival` or `recall`) finds by their own words.
async fn found(s: &Running, key: &str, id: &str, what: &str, query: &str) -> Vec<String> {
    let (status, found) = s
        .post(
            &format!("/v1/agents/{id}/{what}/search"),
            key,
            json!({"query": query}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    found["items"]
        .as_array()
        .unwrap()
        .iter()
        // Recall shows the context around a match too (the reply after it), marked so.
        .filter(|hit| hit["found_by"] != "context")
        .map(|hit| hit["text"].as_str().unwrap().to_owned())
        .collect()
}

#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_agent_leaves_later_writes_findable() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?recall=tantivy&vectors=usearch",
        dir.path().display()
    );
    let llm = Arc::new(ScriptedProvider::new());
    let (key, e) = {
        let server = Server::open(&url, llm.clone(), None, config())
            .await
            .unwrap();
        let s = start_with(server, llm.clone()).await;
        let key = s.tenant("acme").await;
        let a = s.agent(&key, "a").await;
        let e = s.agent(&key, "e").await;

        // Archival, exactly as reported.
        let (status, _) = s
            .post(
                &format!("/v1/agents/{a}/archival"),
                &key,
                json!({"text": "alpha note about zebras"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(
            found(&s, &key, &a, "archival", "zebras").await,
            ["alpha note about zebras"]
        );
        // Recall too: a message of A's, found.
        s.llm
            .push_call("send_message", json!({"message": "Noted."}));
        let (status, _) = s
            .post(
                &format!("/v1/agents/{a}/messages"),
                &key,
                json!({"text": "zebras have stripes"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            found(&s, &key, &a, "recall", "zebras").await,
            ["zebras have stripes"]
        );
        let (status, _) = s
            .call(Method::DELETE, &format!("/v1/agents/{a}"), &key, None)
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);

        let (status, _) = s
            .post(
                &format!("/v1/agents/{e}/archival"),
                &key,
                json!({"text": "the quokka lives on Rottnest"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(
            found(&s, &key, &e, "archival", "quokka").await,
            ["the quokka lives on Rottnest"]
        );
        s.llm
            .push_call("send_message", json!({"message": "Noted."}));
        let (status, _) = s
            .post(
                &format!("/v1/agents/{e}/messages"),
                &key,
                json!({"text": "a quokka smiled at me"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            found(&s, &key, &e, "recall", "quokka").await,
            ["a quokka smiled at me"]
        );
        (key, e)
    };
    // After a restart, still found.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let server = Server::open(&url, llm.clone(), None, config())
        .await
        .unwrap();
    let s = start_with(server, llm).await;
    assert_eq!(
        found(&s, &key, &e, "archival", "quokka").await,
        ["the quokka lives on Rottnest"]
    );
    assert_eq!(
        found(&s, &key, &e, "recall", "quokka").await,
        ["a quokka smiled at me"]
    );
}
