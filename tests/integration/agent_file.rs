//! Agent files: export, import, Letta's own files, bad files.

use std::sync::Arc;

use memgpt::Agent;
use memgpt::agent_file::*;
use memgpt::message::MessageKind;
use memgpt::store::{Page, RecallQuery, Storage};
use memgpt::testing::ScriptedProvider;
use serde_json::json;

const LETTA: &str = include_str!("../../memgpt-core/src/agent_file/testdata/letta_v2.af");

/// An agent with a conversation, a flush, passages and an edited block.
async fn busy_agent(storage: &Storage) -> Agent {
    let llm = Arc::new(ScriptedProvider::new());
    let mut agent = Agent::builder()
        .name("sam")
        .provider(llm.clone())
        .storage(storage.clone())
        .context_window(3_200)
        .build()
        .await
        .unwrap();
    for i in 0..12 {
        llm.push_call(
            "send_message",
            json!({ "message": format!("reply {i}: the kiwi orchard is doing fine, thank you for asking about it") }),
        );
        agent
            .step(format!(
                "question {i}: how is the kiwi orchard doing this season?"
            ))
            .await
            .unwrap();
    }
    agent
        .insert_archival("Ann's birthday is on the 3rd of May.", Default::default())
        .await
        .unwrap();
    agent
        .update_memory(|m| m.append("human", "Name: Ann"))
        .await
        .unwrap();
    agent
}

fn without_volatile(mut file: AgentFile) -> AgentFile {
    file.created_at = None;
    file
}

#[tokio::test]
async fn export_import_export_is_identical() {
    let storage = Storage::in_memory();
    let agent = busy_agent(&storage).await;
    assert!(
        agent.summary().evicted_messages > 0,
        "the test needs a flush"
    );
    let first = export(&storage, agent.id()).await.unwrap();

    let other = Storage::in_memory();
    let json = serde_json::to_string_pretty(&first).unwrap();
    let report = import(&other, &parse(&json).unwrap(), ImportOptions::default())
        .await
        .unwrap();
    assert!(report.unmapped.is_empty(), "{:?}", report.unmapped);
    assert_eq!(report.name, "sam");
    assert_eq!(report.passages, 1);
    let second = export(&other, report.id).await.unwrap();
    let (a, b) = (
        serde_json::to_string_pretty(&without_volatile(first.clone())).unwrap(),
        serde_json::to_string_pretty(&without_volatile(second)).unwrap(),
    );
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        assert_eq!(x, y, "line {i} of the export differs after a round trip");
    }
    assert_eq!(a, b);

    // The imported agent resumes where the original was.
    let llm = Arc::new(ScriptedProvider::new());
    let copy = Agent::builder()
        .provider(llm)
        .storage(other.clone())
        .load(report.id)
        .await
        .unwrap();
    assert_eq!(copy.memory().blocks(), agent.memory().blocks());
    assert_eq!(copy.summary(), agent.summary());
    assert_eq!(copy.prompt(), agent.prompt());
}

#[tokio::test]
async fn letta_files_import_with_their_tools_mapped() {
    let storage = Storage::in_memory();
    let file = parse(LETTA).unwrap();
    let report = import(&storage, &file, ImportOptions::default())
        .await
        .unwrap();
    assert_eq!(report.name, "letta_helper");
    assert_eq!((report.messages, report.blocks, report.passages), (5, 2, 0));
    let unmapped = report.unmapped.join("\n");
    assert!(unmapped.contains("memory_rethink"), "{unmapped}");
    assert!(unmapped.contains("roll_d20"), "{unmapped}");
    assert_eq!(report.unmapped.len(), 2, "{unmapped}");

    let state = storage.agents.load_agent(report.id).await.unwrap().unwrap();
    assert_eq!(
        state.config.functions,
        ["send_message", "core_memory_append", "conversation_search"]
    );
    assert_eq!(state.config.model, "gpt-4o-mini");
    assert_eq!(state.config.context_window, 32_000);
    assert!(state.system.starts_with("You are Letta"));
    assert_eq!(
        state.memory.get("human").unwrap().value(),
        "Name: Sam\nLikes: hiking"
    );
    assert_eq!(
        state.fifo.len(),
        4,
        "the system message is not a recall message"
    );

    let all = storage
        .recall
        .list_messages(
            report.id,
            &RecallQuery::kinds(MessageKind::ALL, Page::first(10)),
        )
        .await
        .unwrap();
    let kinds: Vec<MessageKind> = all.hits.iter().map(|h| h.item.kind).collect();
    assert_eq!(
        kinds,
        [
            MessageKind::Login,
            MessageKind::User,
            MessageKind::Assistant,
            MessageKind::FunctionReturn,
            MessageKind::Assistant
        ]
    );
    assert_eq!(
        all.hits[1].item.text,
        "My sister Maya is visiting from Lisbon next week."
    );
    assert_eq!(
        all.hits[2].item.text,
        "The user mentioned their sister. I should remember this."
    );
    assert_eq!(all.hits[2].item.tool_calls[0].name, "memory_insert");
    assert_eq!(all.hits[3].item.text, "None");

    // It is searchable and steps like any agent.
    let llm = Arc::new(ScriptedProvider::new());
    llm.push_call(
        "send_message",
        json!({"message": "Maya arrives next week."}),
    );
    let mut agent = Agent::builder()
        .provider(llm)
        .storage(storage.clone())
        .load(report.id)
        .await
        .unwrap();
    let found = agent
        .call(
            "conversation_search",
            json!({"query": "Maya Lisbon", "request_heartbeat": false}),
        )
        .await
        .unwrap();
    assert!(found.output.contains("Lisbon"), "{}", found.output);
    agent.step("When does Maya come?").await.unwrap();
}

#[tokio::test]
async fn a_file_that_is_a_json_string_is_read_twice() {
    let quoted = serde_json::to_string(LETTA).unwrap();
    let file = parse(&quoted).unwrap();
    assert_eq!(file.agents[0].name, "letta_helper");
}

#[tokio::test]
async fn bad_files_are_refused_and_write_nothing() {
    let storage = Storage::in_memory();
    let cases: Vec<(String, &str)> = vec![
        ("{\"name\": \"old v1 file\"}".into(), "schema-v2"),
        ("not json".into(), "not an agent file"),
        (
            LETTA.replace("\"block-1\"]", "\"block-9\"]"),
            "block `block-9`",
        ),
        (
            LETTA.replace("\"id\": \"message-5\"", "\"id\": \"message-4\""),
            "used twice",
        ),
        (
            LETTA.replace(
                "\"agents\": [",
                "\"agents\": [{\"id\": \"agent-1\", \"name\": \"x\"},",
            ),
            "exactly one",
        ),
    ];
    for (text, expected) in cases {
        let result = match parse(&text) {
            Ok(file) => import(&storage, &file, ImportOptions::default())
                .await
                .map(|_| ()),
            Err(e) => Err(e),
        };
        let err = result.expect_err(expected).to_string();
        assert!(err.contains(expected), "{expected}: {err}");
    }
    assert!(storage.agents.list_agents().await.unwrap().is_empty());

    // A second import under the same name is refused; under another it works.
    let file = parse(LETTA).unwrap();
    import(&storage, &file, ImportOptions::default())
        .await
        .unwrap();
    let err = import(&storage, &file, ImportOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    let options = ImportOptions {
        name: Some("copy".into()),
        ..ImportOptions::default()
    };
    import(&storage, &file, options).await.unwrap();
    assert_eq!(storage.agents.list_agents().await.unwrap().len(), 2);
}

#[tokio::test]
async fn the_loop_style_travels_as_letta_agent_type() {
    // Letta's v1 agents loop until they reply: they import as `until_reply`.
    let storage = Storage::in_memory();
    let mut file = parse(LETTA).unwrap();
    let imported = import(&storage, &file, ImportOptions::default())
        .await
        .unwrap();
    let state = storage
        .agents
        .load_agent(imported.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.config.loop_style, memgpt::LoopStyle::Heartbeat);
    file.agents[0].agent_type = Some("letta_v1_agent".into());
    let options = ImportOptions {
        name: Some("v1".into()),
        ..ImportOptions::default()
    };
    let imported = import(&storage, &file, options).await.unwrap();
    let state = storage
        .agents
        .load_agent(imported.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(state.config.loop_style, memgpt::LoopStyle::UntilReply);

    // And an until-reply agent exports as one, also read by Letta's fields alone.
    let agent = Agent::builder()
        .name("replier")
        .provider(Arc::new(ScriptedProvider::new()))
        .storage(storage.clone())
        .loop_style(memgpt::LoopStyle::UntilReply)
        .build()
        .await
        .unwrap();
    let mut file = export(&storage, agent.id()).await.unwrap();
    assert_eq!(file.agents[0].agent_type.as_deref(), Some("letta_v1_agent"));
    file.memgpt = None;
    let other = Storage::in_memory();
    let imported = import(&other, &file, ImportOptions::default())
        .await
        .unwrap();
    let state = other.agents.load_agent(imported.id).await.unwrap().unwrap();
    assert_eq!(state.config.loop_style, memgpt::LoopStyle::UntilReply);
}
