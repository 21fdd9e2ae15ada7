//! Agents writing to each other through a messenger: waited-for replies, messages read later,
//! the hop limit, and no agent waiting on itself.

use std::collections::HashMap;

use super::*;
use crate::messaging::{AgentMessage, AgentMessenger, Delivery, MAX_AGENT_HOPS, MessengerError};

/// A messenger over agents in this process: waited-for messages step the addressee at once;
/// the others wait in `later` until the test delivers them.
#[derive(Debug, Default)]
struct Office {
    agents: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Agent>>>>,
    ids: std::sync::Mutex<HashMap<String, AgentId>>,
    later: std::sync::Mutex<Vec<(String, AgentMessage)>>,
}

impl Office {
    fn add(&self, agent: Agent) -> Arc<tokio::sync::Mutex<Agent>> {
        let name = agent.name().to_owned();
        self.ids.lock().unwrap().insert(name.clone(), agent.id());
        let agent = Arc::new(tokio::sync::Mutex::new(agent));
        self.agents.lock().unwrap().insert(name, agent.clone());
        agent
    }

    /// Delivers the messages waiting for later, and those their steps send, until none is left;
    /// returns the steps they caused.
    async fn deliver_later(&self) -> Vec<StepRecord> {
        let mut delivered = Vec::new();
        loop {
            let next = {
                let mut later = self.later.lock().unwrap();
                (!later.is_empty()).then(|| later.remove(0))
            };
            let Some((to, message)) = next else {
                return delivered;
            };
            let agent = self.agents.lock().unwrap()[&to].clone();
            let record = agent
                .lock()
                .await
                .step(Event::from_agent(&message))
                .await
                .unwrap();
            delivered.push(record);
        }
    }
}

#[async_trait]
impl AgentMessenger for Office {
    async fn deliver(&self, message: AgentMessage) -> Result<Delivery, MessengerError> {
        let to = message.to.clone();
        let Some(agent) = self.agents.lock().unwrap().get(&to).cloned() else {
            return Err(MessengerError::NotFound(to));
        };
        if !message.wait {
            self.later.lock().unwrap().push((to.clone(), message));
            return Ok(Delivery::Queued { agent: to });
        }
        let id = self.ids.lock().unwrap()[&to];
        if message.waiting.contains(&id) {
            return Err(MessengerError::Busy {
                agent: to,
                why: "it is waiting for this exchange itself".into(),
            });
        }
        let record = agent
            .lock()
            .await
            .step(Event::from_agent(&message))
            .await
            .map_err(|e| MessengerError::Failed {
                agent: to.clone(),
                why: e.to_string(),
            })?;
        Ok(Delivery::Replied {
            agent: to,
            replies: record.replies,
        })
    }
}

async fn member(
    name: &str,
    office: &Arc<Office>,
) -> (Arc<ScriptedProvider>, Arc<tokio::sync::Mutex<Agent>>) {
    let llm = llm();
    let mut config = AgentConfig::default();
    config.functions.push("send_message_to_agent".into());
    let agent = Agent::builder()
        .name(name)
        .provider(llm.clone())
        .messenger(office.clone())
        .config(config)
        .build()
        .await
        .unwrap();
    (llm, office.add(agent))
}

fn write(to: &str, text: &str, wait: bool) -> serde_json::Value {
    json!({"agent": to, "message": text, "wait": wait, "request_heartbeat": true})
}

#[tokio::test]
async fn an_agent_waits_for_another_agents_reply() {
    let office = Arc::new(Office::default());
    let (ann_llm, ann) = member("ann", &office).await;
    let (bob_llm, bob) = member("bob", &office).await;
    ann_llm.push_call(
        "send_message_to_agent",
        write("bob", "Which hive needs a new queen?", true),
    );
    bob_llm.push_call("send_message", json!({"message": "Hive 3."}));
    ann_llm.push_call("send_message", json!({"message": "Bob says hive 3."}));

    let record = ann
        .lock()
        .await
        .step("Ask Bob which hive needs a queen.")
        .await
        .unwrap();
    assert_eq!(
        record.function_calls[0].output,
        "Agent bob replied: Hive 3."
    );
    assert_eq!(record.replies, ["Bob says hive 3."]);
    // Bob's side: the message is in his conversation, named after its sender, and says that
    // Ann waits.
    let bob = bob.lock().await;
    let heard = bob
        .search_recall(&RecallQuery::text("queen", Page::first(5)))
        .await
        .unwrap();
    let message = &heard.page.hits[0].item;
    assert_eq!(message.kind, MessageKind::User);
    assert_eq!(message.name.as_deref(), Some("ann"));
    assert!(message.text.contains("it waits"), "{}", message.text);
    assert!(message.text.ends_with("Which hive needs a new queen?"));
    assert!(ann_llm.remaining() == 0 && bob_llm.remaining() == 0);
}

#[tokio::test]
async fn two_agents_writing_back_and_forth_stop_at_the_hop_limit() {
    let office = Arc::new(Office::default());
    let (ann_llm, ann) = member("ann", &office).await;
    let (bob_llm, _bob) = member("bob", &office).await;
    // Each always writes back without waiting, then tells its user it did.
    for (llm, other) in [(&ann_llm, "bob"), (&bob_llm, "ann")] {
        for _ in 0..3 {
            llm.push_call("send_message_to_agent", write(other, "ping", false));
            llm.push_call("send_message", json!({"message": "wrote"}));
        }
    }
    let first = ann.lock().await.step("Say hi to Bob.").await.unwrap();
    assert!(
        first.function_calls[0]
            .output
            .starts_with("Delivered to agent bob"),
        "{}",
        first.function_calls[0].output
    );
    // ann (a user's message) -> bob (hop 1) -> ann (hop 2) -> bob (hop 3), who may not send on.
    let records = office.deliver_later().await;
    assert_eq!(records.len(), MAX_AGENT_HOPS as usize);
    let last = records.last().unwrap();
    assert_eq!(last.event, "agent_message");
    assert!(!last.function_calls[0].ok);
    assert!(
        last.function_calls[0].output.contains("taken 3 hops"),
        "{}",
        last.function_calls[0].output
    );
    assert!(records[..2].iter().all(|r| r.function_calls[0].ok));
}

#[tokio::test]
async fn an_agent_cannot_wait_on_an_agent_that_waits_on_it() {
    let office = Arc::new(Office::default());
    let (ann_llm, ann) = member("ann", &office).await;
    let (bob_llm, _bob) = member("bob", &office).await;
    ann_llm.push_call(
        "send_message_to_agent",
        write("bob", "Are you there?", true),
    );
    bob_llm.push_call(
        "send_message_to_agent",
        write("ann", "Are YOU there?", true),
    );
    bob_llm.push_call("send_message", json!({"message": "Yes."}));
    ann_llm.push_call("send_message", json!({"message": "Bob is there."}));
    let record = ann.lock().await.step("Check on Bob.").await.unwrap();
    assert_eq!(record.function_calls[0].output, "Agent bob replied: Yes.");
    assert_eq!(record.replies, ["Bob is there."]);
    // Writing to oneself, to nobody, or without a messenger is refused too.
    let mut ann = ann.lock().await;
    for (to, expected) in [("ann", "that is you"), ("carol", "no agent `carol`")] {
        let call = ann
            .call("send_message_to_agent", write(to, "hello", false))
            .await
            .unwrap();
        assert!(
            !call.ok && call.output.contains(expected),
            "{}",
            call.output
        );
    }
    let mut config = AgentConfig::default();
    config.functions.push("send_message_to_agent".into());
    let mut alone = Agent::builder()
        .provider(llm())
        .config(config)
        .build()
        .await
        .unwrap();
    let call = alone
        .call("send_message_to_agent", write("bob", "hello", false))
        .await
        .unwrap();
    assert!(
        !call.ok && call.output.contains("no messenger"),
        "{}",
        call.output
    );
}
