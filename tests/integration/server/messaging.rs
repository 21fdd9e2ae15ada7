//! Agents writing to each other on the server: a waited-for reply in the sender's step, a
//! message read later in a step of its own, and no way into another tenant's agents.

use super::*;

/// Creates an agent that may write to other agents; its id.
async fn writer(s: &Running, key: &str, name: &str) -> String {
    let (status, created) = s
        .post(
            "/v1/agents",
            key,
            json!({"name": name, "tools": ["send_message", "send_message_to_agent"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

fn write(to: &str, text: &str, wait: bool) -> Value {
    json!({"agent": to, "message": text, "wait": wait, "request_heartbeat": true})
}

#[memgpt_test_harness::test]
async fn agents_of_one_tenant_write_to_each_other_and_no_further() {
    let s = start().await;
    let acme = s.tenant("acme").await;
    let globex = s.tenant("globex").await;
    let ann = writer(&s, &acme, "ann").await;
    let bob = writer(&s, &acme, "bob").await;
    let eve = writer(&s, &globex, "eve").await;

    // Waited for: Bob answers inside Ann's step.
    s.llm.push_call(
        "send_message_to_agent",
        write("bob", "Which hive needs a queen?", true),
    );
    s.llm
        .push_call("send_message", json!({"message": "Hive 3."}));
    s.llm
        .push_call("send_message", json!({"message": "Bob says hive 3."}));
    let (status, step) = s
        .post(
            &format!("/v1/agents/{ann}/messages"),
            &acme,
            json!({"text": "Ask Bob."}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{step}");
    assert_eq!(
        step["function_calls"][0]["output"],
        "Agent bob replied: Hive 3."
    );
    assert_eq!(step["replies"], json!(["Bob says hive 3."]));

    // Another tenant's agent is out of reach, by name and by id.
    for to in ["eve", eve.as_str()] {
        s.llm
            .push_call("send_message_to_agent", write(to, "hello", true));
        s.llm
            .push_call("send_message", json!({"message": "no luck"}));
        let (_, step) = s
            .post(
                &format!("/v1/agents/{ann}/messages"),
                &acme,
                json!({"text": "Write to Eve."}),
            )
            .await;
        let call = &step["function_calls"][0];
        assert_eq!(call["ok"], false, "{step}");
        assert!(
            call["output"].as_str().unwrap().contains("no agent"),
            "{call}"
        );
    }

    // Not waited for: Bob reads it in a step of his own, after Ann's has ended.
    s.llm.push_call(
        "send_message_to_agent",
        write(&bob, "The queen arrives on Friday.", false),
    );
    s.llm
        .push_call("send_message", json!({"message": "Told Bob."}));
    s.llm
        .push_call("send_message", json!({"message": "Noted, Friday."}));
    let (_, step) = s
        .post(
            &format!("/v1/agents/{ann}/messages"),
            &acme,
            json!({"text": "Tell Bob about Friday."}),
        )
        .await;
    assert!(
        step["function_calls"][0]["output"]
            .as_str()
            .unwrap()
            .starts_with("Delivered to agent bob"),
        "{step}"
    );
    let mut heard = false;
    for _ in 0..100 {
        let (_, found) = s
            .post(
                &format!("/v1/agents/{bob}/recall/search"),
                &acme,
                json!({"query": "queen Friday"}),
            )
            .await;
        if found["items"].as_array().unwrap().iter().any(|m| {
            m["text"]
                .as_str()
                .unwrap()
                .ends_with("The queen arrives on Friday.")
        }) {
            heard = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(heard, "Bob never read Ann's message");
}
