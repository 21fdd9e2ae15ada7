//! Tenants and agents that outlive a server: SQLite restarts, PostgreSQL shared by servers and processes.

use super::*;

/// On SQLite, tenants, keys and ownership live in the data directory with the agents.
#[memgpt_test_harness::test]
async fn tenants_and_agents_survive_a_restart_on_sqlite() {
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
        s.llm
            .push_call("send_message", json!({"message": "Stored."}));
        let (status, _) = s
            .post(
                &format!("/v1/agents/{id}/messages"),
                &key,
                json!({"text": "remember me"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        (key, id)
    };
    // The first server's connections close with it.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let server = Server::open(&url, llm.clone(), None, config())
        .await
        .unwrap();
    // One process per data directory, said at start.
    let second = Server::open(&url, llm.clone(), None, config()).await;
    let error = second
        .expect_err("a second server on the same directory")
        .to_string();
    assert!(
        error.contains("one process serves a data directory"),
        "{error}"
    );
    let s = start_with(server, llm).await;
    let (status, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(status, StatusCode::OK, "{agents}");
    assert_eq!(agents["agents"][0]["id"], id.as_str());
    let (_, page) = s.get(&format!("/v1/agents/{id}/messages"), &key).await;
    assert_eq!(page["items"][0]["text"], "remember me");
    let (status, health) = s.get("/readyz", "").await;
    assert_eq!((status, &health["status"]), (StatusCode::OK, &json!("ok")));
}

/// Two server processes' worth of servers on one PostgreSQL database: a key made through one
/// works on the other, a revocation is seen by both at once, and concurrent sends to one agent
/// through both run as whole steps one after another.
#[cfg(feature = "postgres")]
#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_tenants_and_serialise_steps_on_postgres() {
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
    let id = b.agent(&key, "shared").await;
    let (status, view) = a.get(&format!("/v1/agents/{id}"), &key).await;
    assert_eq!(status, StatusCode::OK, "{view}");

    const SENDS: usize = 8;
    for i in 0..SENDS {
        llm.push_call("send_message", json!({"message": format!("reply {i}")}));
    }
    let sends: Vec<_> = (0..SENDS)
        .map(|i| {
            let server = if i % 2 == 0 { &a } else { &b };
            let request = server
                .http
                .post(format!("{}/v1/agents/{id}/messages", server.base))
                .bearer_auth(&key)
                .json(&json!({"text": format!("message {i}")}));
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                (response.status(), response.text().await.unwrap())
            })
        })
        .collect();
    for send in sends {
        let (status, body) = send.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, view) = a.get(&format!("/v1/agents/{id}"), &key).await;
    assert_eq!(view["version"], SENDS as u64, "{view}");
    // Whole steps in sequence: each user message is followed by its own reply turn.
    let (_, page) = b
        .get(&format!("/v1/agents/{id}/messages?size=1000"), &key)
        .await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), SENDS * 3, "{page}");
    for step in items.chunks(3) {
        let kinds: Vec<&str> = step.iter().map(|m| m["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["user", "assistant", "function_return"], "{page}");
    }

    // A revocation through one server holds on the other at once.
    let (_, tenants) = a.get("/v1/admin/tenants", ADMIN).await;
    let tenant = tenants["tenants"][0]["id"].as_str().unwrap().to_owned();
    let (_, keys) = b
        .get(&format!("/v1/admin/tenants/{tenant}/keys"), ADMIN)
        .await;
    let key_id = keys["keys"][0]["id"].as_str().unwrap().to_owned();
    let (status, _) = a
        .call(
            Method::DELETE,
            &format!("/v1/admin/keys/{key_id}"),
            ADMIN,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = b.get("/v1/agents", &key).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// Two `memgpt serve` processes on one PostgreSQL database: concurrent sends to one agent
/// through both run as whole steps; a process killed in the middle of a step (holding the
/// agent's lock, waiting for the model) leaves no lock behind and nothing half-written, and
/// the other process steps the agent at once.
#[cfg(feature = "postgres")]
#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_processes_share_agents_and_a_killed_one_leaves_no_lock() {
    use crate::fake_openai::{FakeOpenAi, Reply};

    let Some(url) = postgres_url() else { return };
    let llm = FakeOpenAi::start().await;
    let home = tempfile::tempdir().unwrap();
    let (mut a, base_a) = serve_process(&url, &llm.base_url(), home.path()).await;
    let (mut b, base_b) = serve_process(&url, &llm.base_url(), home.path()).await;
    let client = |base: &str| Running {
        base: base.to_owned(),
        llm: Arc::new(ScriptedProvider::new()),
        http: memgpt::http::client(&Default::default()).unwrap(),
        shutdown: None,
        served: tokio::spawn(async {}),
    };
    let (ca, cb) = (client(&base_a), client(&base_b));
    let key = ca.tenant("acme").await;
    let id = cb.agent(&key, "shared").await;

    const SENDS: usize = 6;
    for i in 0..SENDS {
        llm.push(Reply::call(
            "send_message",
            json!({"message": format!("reply {i}")}),
        ));
    }
    let sends: Vec<_> = (0..SENDS)
        .map(|i| {
            let c = if i % 2 == 0 { &ca } else { &cb };
            let request = c
                .http
                .post(format!("{}/v1/agents/{id}/messages", c.base))
                .bearer_auth(&key)
                .json(&json!({"text": format!("message {i}")}));
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                (response.status(), response.text().await.unwrap())
            })
        })
        .collect();
    for send in sends {
        let (status, body) = send.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, page) = ca
        .get(&format!("/v1/agents/{id}/messages?size=1000"), &key)
        .await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), SENDS * 3, "{page}");
    for step in items.chunks(3) {
        let kinds: Vec<&str> = step.iter().map(|m| m["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["user", "assistant", "function_return"], "{page}");
    }

    // Process A takes the agent's lock and waits for a slow model; it is killed meanwhile.
    llm.push(
        Reply::call("send_message", json!({"message": "never delivered"}))
            .delayed(std::time::Duration::from_secs(30)),
    );
    let seen = llm.requests().len();
    let doomed = ca
        .http
        .post(format!("{base_a}/v1/agents/{id}/messages"))
        .bearer_auth(&key)
        .json(&json!({"text": "lost in the crash"}))
        .send();
    let doomed = tokio::spawn(doomed);
    eventually("process A to call the model", async || {
        llm.requests().len() > seen
    })
    .await;
    a.start_kill().unwrap();
    a.wait().await.unwrap();
    assert!(
        doomed.await.unwrap().is_err(),
        "the killed process answered"
    );

    // Process B steps the agent at once: no lock left behind, no trace of the killed step.
    llm.push(Reply::call(
        "send_message",
        json!({"message": "still here"}),
    ));
    let started = std::time::Instant::now();
    let (status, step) = cb
        .post(
            &format!("/v1/agents/{id}/messages"),
            &key,
            json!({"text": "are you there?"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{step}");
    assert_eq!(step["replies"], json!(["still here"]));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(step["version"], SENDS as u64 + 1);
    let (_, page) = cb
        .get(&format!("/v1/agents/{id}/messages?size=1000"), &key)
        .await;
    assert!(
        !page.to_string().contains("lost in the crash"),
        "the killed step left messages behind"
    );
    b.start_kill().unwrap();
}
