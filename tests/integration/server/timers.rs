//! Timers: once or repeating, cancelled, surviving restarts, fired once across servers.

use super::*;

/// A timer due while two servers share the database fires on exactly one of them.
#[cfg(feature = "postgres")]
#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_fires_once_across_two_servers_on_postgres() {
    let Some(url) = postgres_url() else { return };
    let llm = Arc::new(ScriptedProvider::new());
    let a = start_with(
        Server::open(&url, llm.clone(), None, config())
            .await
            .unwrap(),
        llm.clone(),
    )
    .await;
    let b = start_with(
        Server::open(&url, llm.clone(), None, config())
            .await
            .unwrap(),
        llm.clone(),
    )
    .await;
    let key = a.tenant("acme").await;
    let mut agents = Vec::new();
    for i in 0..5 {
        let id = a.agent(&key, &format!("sleeper {i}")).await;
        // Twice the replies needed: a second firing would find one and show up.
        llm.push_call("send_message", json!({"message": "Awake."}));
        llm.push_call("send_message", json!({"message": "Awake."}));
        let (status, _) = b
            .post(
                &format!("/v1/agents/{id}/timers"),
                &key,
                json!({"reason": "wake up", "in_seconds": 0}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        agents.push(id);
    }
    for id in &agents {
        eventually("the timers", async || {
            a.get(&format!("/v1/agents/{id}/timers"), &key).await.1["timers"] == json!([])
        })
        .await;
    }
    // Time for a duplicate firing to show, then exactly one timer event per agent.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for id in &agents {
        let kinds = kinds(&a, &key, id).await;
        assert_eq!(
            kinds.iter().filter(|k| *k == "timer").count(),
            1,
            "{kinds:?}"
        );
    }
}

#[memgpt_test_harness::test]
async fn timers_fire_once_or_repeat_and_can_be_cancelled() {
    let s = start().await;
    let key = s.tenant("acme").await;
    let id = s.agent(&key, "sleepy").await;
    let timers = format!("/v1/agents/{id}/timers");
    let (status, body) = s
        .post(
            &timers,
            &key,
            json!({"reason": "x", "in_seconds": 1, "at": "2030-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );
    let (status, body) = s
        .post(
            &timers,
            &key,
            json!({"reason": "x", "in_seconds": 1, "every_seconds": 0}),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_input")
    );

    // One-off, due now: fires once, then is gone.
    s.llm
        .push_call("send_message", json!({"message": "Time to stretch!"}));
    let (status, timer) = s
        .post(
            &timers,
            &key,
            json!({"reason": "stretch break", "in_seconds": 0}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{timer}");
    eventually("the one-off timer", async || {
        s.get(&timers, &key).await.1["timers"] == json!([])
    })
    .await;
    assert_eq!(
        kinds(&s, &key, &id).await,
        ["timer", "assistant", "function_return"]
    );
    let (_, page) = s.get(&format!("/v1/agents/{id}/messages"), &key).await;
    assert!(
        page["items"][0]["text"]
            .as_str()
            .unwrap()
            .contains("stretch break"),
        "{page}"
    );

    // Repeating every second: fires, stays, moves on.
    s.llm.push_call("send_message", json!({"message": "Tick."}));
    s.llm
        .push_call("send_message", json!({"message": "Tick again."}));
    let (_, timer) = s
        .post(
            &timers,
            &key,
            json!({"reason": "tick", "in_seconds": 0, "every_seconds": 1}),
        )
        .await;
    let first = timer["next_at"].as_str().unwrap().to_owned();
    eventually("the repeating timer to fire and move on", async || {
        let listed = s.get(&timers, &key).await.1;
        listed["timers"][0]["next_at"]
            .as_str()
            .is_some_and(|next| next > first.as_str())
    })
    .await;
    let timer_id = timer["id"].as_str().unwrap();
    let (status, _) = s
        .call(Method::DELETE, &format!("{timers}/{timer_id}"), &key, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(s.get(&timers, &key).await.1["timers"], json!([]));
    let fired = kinds(&s, &key, &id)
        .await
        .iter()
        .filter(|k| *k == "timer")
        .count();
    assert!((2..=3).contains(&fired), "{fired} timer events");
}

/// A timer set just before a restart fires after it: timers live in the data directory.
#[memgpt_test_harness::test]
async fn a_timer_survives_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().display());
    let llm = Arc::new(ScriptedProvider::new());
    let (key, id) = {
        let server = Server::open(&url, llm.clone(), None, config())
            .await
            .unwrap();
        let s = start_with(server, llm.clone()).await;
        let key = s.tenant("acme").await;
        let id = s.agent(&key, "durable").await;
        let (status, _) = s
            .post(
                &format!("/v1/agents/{id}/timers"),
                &key,
                json!({"reason": "wake up", "in_seconds": 1}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        (key, id)
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    llm.push_call("send_message", json!({"message": "Awake."}));
    let server = Server::open(&url, llm.clone(), None, config())
        .await
        .unwrap();
    let s = start_with(server, llm).await;
    eventually("the timer after the restart", async || {
        kinds(&s, &key, &id)
            .await
            .first()
            .is_some_and(|k| k == "timer")
    })
    .await;
}
