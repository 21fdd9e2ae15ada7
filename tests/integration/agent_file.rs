//! Agent files: export, import, Letta's own files, bad files.

use std::sync::Arc;

use memgpt::Agent;
use memgpt::agent_file::*;
use memgpt::backend::testing::ScriptedProvider;
use memgpt::message::MessageKind;
use memgpt::store::{Page, RecallQuery, Storage};
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

#[memgpt_test_harness::test]
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

#[memgpt_test_harness::test]
async fn letta_files_import_with_their_tools_mapped() {
    let storage = Storage::in_memory();
    let file = parse(LETTA).unwrap();
    let report = import(&storage, &file, ImportOptions::default())
        .await
        .unwrap();
    assert_eq!(report.name, "letta_helper");
    assert_eq!((report.messages, report.blocks, report.passages), (5, 2, 0));
    let unmapped = report.unmapped.join("\n");
    // Letta's sleep-time `memory_rethink` is one of memgpt's functions now.
    assert!(!unmapped.contains("memory_rethink"), "{unmapped}");
    assert!(unmapped.contains("roll_d20"), "{unmapped}");
    assert!(
        unmapped.contains("message message-5: 1 call(s) without a result"),
        "{unmapped}"
    );
    assert_eq!(report.unmapped.len(), 2, "{unmapped}");

    let state = storage.agents.load_agent(report.id).await.unwrap().unwrap();
    // Letta's sleep-time memory functions are memgpt's, under their own names and arguments.
    assert_eq!(
        state.config.functions,
        [
            "send_message",
            "memory_insert",
            "conversation_search",
            "memory_rethink"
        ]
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
    // Calls to Letta's tools read as calls to memgpt's functions of the same name.
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

#[memgpt_test_harness::test]
async fn a_file_that_is_a_json_string_is_read_twice() {
    let quoted = serde_json::to_string(LETTA).unwrap();
    let file = parse(&quoted).unwrap();
    assert_eq!(file.agents[0].name, "letta_helper");
}

#[memgpt_test_harness::test]
async fn bad_files_are_refused_and_write_nothing() {
    let storage = Storage::in_memory();
    let cases: Vec<(String, &str)> = vec![
        ("{\"name\": \"old v1 file\"}".into(), "schema-v2"),
        ("not json".into(), "not an agent file"),
        (
            LETTA.replace("\"block-1\"]", "\"block-9\"]"),
            "agents[0].block_ids[1]: `block-9` is not in the file",
        ),
        (
            LETTA.replace("\"id\": \"message-5\"", "\"id\": \"message-4\""),
            "used twice",
        ),
        (
            LETTA.replace("\"limit\": 5000", "\"limit\": \"large\""),
            "blocks[0].limit: invalid type: string \"large\"",
        ),
        (
            LETTA.replace("\"context_window\": 32000", "\"context_window\": 32000.5"),
            "agents[0].llm_config.context_window: expected a whole number",
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

#[memgpt_test_harness::test]
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

/// Letta's published agent files (tests/fixtures/letta, see its PROVENANCE.md), by path.
fn published_letta_files() -> Vec<(String, String)> {
    use std::io::Read;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/letta");
    let mut files = Vec::new();
    for folder in ["agent-file", "letta-tests"] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(folder))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        for path in paths {
            let mut text = String::new();
            flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
                .read_to_string(&mut text)
                .unwrap();
            let name = format!("{folder}/{}", path.file_name().unwrap().to_string_lossy());
            files.push((name, text));
        }
    }
    files
}

/// The JSON Schema derived from Letta's `AgentFileSchema` (tests/fixtures/letta).
fn letta_schema() -> jsonschema::Validator {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/letta/letta_agent_file.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).expect("Letta's schema compiles")
}

/// Every violation of Letta's schema, with its path.
fn letta_violations(validator: &jsonschema::Validator, file: &serde_json::Value) -> Vec<String> {
    validator
        .iter_errors(file)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// A Letta message as the words it carries: the user's text (unwrapped from memgpt's
/// envelope), an assistant's calls, a tool's result.
fn message_words(message: &serde_json::Value) -> Option<(String, String)> {
    let role = message["role"].as_str()?.to_owned();
    let content = match &message["content"] {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().or(p["reasoning"].as_str()))
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_owned(),
        _ => String::new(),
    };
    let envelope: Option<serde_json::Value> = serde_json::from_str(&content).ok();
    let unwrapped = |field: &str| {
        envelope
            .as_ref()
            .and_then(|e| e.get(field))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
    };
    let words = match role.as_str() {
        "system" => return None,
        "user" => match unwrapped("type").as_deref() {
            // memgpt keeps what the user said; other envelopes by their kind.
            Some("user_message") | None => unwrapped("message").unwrap_or(content),
            Some(kind) => kind.to_owned(),
        },
        "assistant" | "approval" => {
            let calls = message["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if calls.is_empty() {
                // Approval answers and replies without calls: memgpt keeps the text only.
                if role == "approval" {
                    return None;
                }
                content
            } else {
                calls
                    .iter()
                    .map(|c| c["id"].as_str().unwrap_or_default().to_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            }
        }
        "tool" => message["tool_call_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        _ => return None,
    };
    let role = if role == "approval" {
        "assistant".to_owned()
    } else {
        role
    };
    Some((role, words))
}

/// Every message of an agent in the file: its context, and memgpt's history.
fn all_messages<'f>(file: &'f serde_json::Value, agent: &str) -> Vec<&'f serde_json::Value> {
    let context = file["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == agent)
        .map(|a| a["messages"].as_array().unwrap().iter().collect::<Vec<_>>())
        .unwrap_or_default();
    let history = file["memgpt"]["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["agent"] == agent)
        .flat_map(|x| x["history"].as_array().unwrap().iter());
    context.into_iter().chain(history).collect()
}

/// The chat request is one OpenAI accepts: every tool result answers a call made before it,
/// and every call is answered.
fn calls_are_paired(messages: &[serde_json::Value]) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        match message["role"].as_str() {
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                let at = open.iter().position(|c| c == id).ok_or(format!(
                    "message {i}: a result of {id}, which was not called"
                ))?;
                open.remove(at);
            }
            _ if !open.is_empty() => return Err(format!("message {i}: calls {open:?} unanswered")),
            Some("assistant") => {
                open = message["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| c["id"].as_str().unwrap_or_default().to_owned())
                    .collect();
            }
            _ => {}
        }
    }
    Ok(())
}

#[memgpt_test_harness::test]
async fn every_published_letta_file_chats_and_exports_what_letta_loads() {
    use crate::fake_openai::{FakeOpenAi, Reply, is_agent_request};
    use serde_json::Value;

    let schema = letta_schema();
    let server = FakeOpenAi::start().await;
    // A model that replies, calling first what the agent's tool rules say must come first.
    server.respond_with(|body| {
        if !is_agent_request(body) {
            return Reply::text("The conversation so far, summarised.");
        }
        // The latest function result, if the model's last turn called something.
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages
            .iter()
            .rev()
            .take_while(|m| m["role"] != "assistant")
            .find(|m| m["role"] == "tool")
            .cloned();
        let required = last
            .and_then(|m| m["content"].as_str().map(str::to_owned))
            .and_then(|text| {
                let (_, rest) = text.split_once("must be `")?;
                Some(rest.split('`').next()?.to_owned())
            });
        match required {
            Some(function) => Reply::call(
                &function,
                json!({"query": "who is this", "request_heartbeat": true}),
            ),
            None => Reply::call("send_message", json!({"message": "Hello from memgpt."})),
        }
    });
    let files = published_letta_files();
    assert_eq!(
        files.len(),
        15,
        "12 of letta-ai/agent-file, 3 of Letta's tests"
    );
    for (name, text) in files {
        let original: Value = {
            let value: Value = serde_json::from_str(&text).unwrap();
            match value {
                Value::String(inner) => serde_json::from_str(&inner).unwrap(),
                other => other,
            }
        };
        assert_eq!(
            letta_violations(&schema, &original),
            Vec::<String>::new(),
            "{name}: the published file itself"
        );
        let storage = Storage::in_memory();
        let file = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let report = import(&storage, &file, ImportOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let imported = 1 + report.related.len();
        assert_eq!(
            imported,
            original["agents"].as_array().unwrap().len(),
            "{name}"
        );

        // What memgpt drops is reported: secrets, files, sources, MCP servers, unused blocks.
        let notes = report.unmapped.join("\n");
        for (field, words) in [
            ("files", "files: memgpt does not import"),
            ("sources", "sources: memgpt does not import"),
            ("mcp_servers", "MCP servers: memgpt does not import"),
        ] {
            let count = original[field].as_array().map_or(0, Vec::len);
            assert_eq!(count > 0, notes.contains(words), "{name}: {field}: {notes}");
        }
        for agent in original["agents"].as_array().unwrap() {
            let present = |v: &Value| {
                v.as_array().is_some_and(|v| !v.is_empty())
                    || v.as_object().is_some_and(|v| !v.is_empty())
            };
            let secrets =
                present(&agent["tool_exec_environment_variables"]) || present(&agent["secrets"]);
            let all_notes: String = std::iter::once(&report)
                .chain(&report.related)
                .flat_map(|r| r.unmapped.iter().cloned())
                .collect::<Vec<_>>()
                .join("\n");
            assert_eq!(
                secrets,
                all_notes.contains("secrets are not imported"),
                "{name}: {all_notes}"
            );
        }

        // One step against the fake OpenAI server: the request is one OpenAI accepts.
        let before = server.agent_requests().len();
        let mut agent = Agent::builder()
            .provider(crate::provider(&server))
            .storage(storage.clone())
            .load(report.id)
            .await
            .unwrap_or_else(|e| panic!("{name}: loading: {e}"));
        let functions = agent.config().functions.clone();
        let step = agent
            .step("Hello! Who are you?")
            .await
            .unwrap_or_else(|e| panic!("{name}: stepping: {e}"));
        assert_eq!(step.reply(), "Hello from memgpt.", "{name}: {step:#?}");
        let requests = server.agent_requests();
        let request = requests[before..]
            .iter()
            .find(|r| r.is_agent())
            .unwrap_or_else(|| panic!("{name}: no agent request"));
        calls_are_paired(request.messages()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            request.body["model"], original["agents"][0]["llm_config"]["model"],
            "{name}: the agent's own model"
        );
        drop(agent);
        let state = storage.agents.load_agent(report.id).await.unwrap().unwrap();
        assert_eq!(state.config.functions, functions, "{name}: functions kept");

        // The export is a file Letta loads...
        let exported = serde_json::to_value(export(&storage, report.id).await.unwrap()).unwrap();
        assert_eq!(
            letta_violations(&schema, &exported),
            Vec::<String>::new(),
            "{name}: the export"
        );
        // ... and says what the original said, field by field: its skills whole, Letta's
        // revision id kept beside ours...
        assert_eq!(
            exported["skills"],
            original["skills"]
                .as_array()
                .filter(|s| !s.is_empty())
                .map_or(Value::Null, |s| Value::Array(s.clone())),
            "{name}: skills"
        );
        assert_eq!(
            report.skills,
            original["skills"].as_array().map_or(0, Vec::len),
            "{name}: skills imported"
        );
        if let Some(revision) = original["metadata"].get("revision_id") {
            assert_eq!(
                &exported["metadata"]["revision_id"], revision,
                "{name}: revision_id"
            );
        }
        let agents = original["agents"].as_array().unwrap();
        let out_agents = exported["agents"].as_array().unwrap();
        assert_eq!(out_agents.len(), agents.len(), "{name}: agents");
        assert_eq!(
            exported["groups"].as_array().unwrap().len(),
            original["groups"].as_array().map_or(0, Vec::len),
            "{name}: groups"
        );
        for theirs in agents {
            let ours = out_agents
                .iter()
                .find(|a| a["name"] == theirs["name"])
                .unwrap_or_else(|| panic!("{name}: agent {} missing", theirs["name"]));
            let context = format!("{name}: {}", theirs["name"]);
            let system = theirs["system"].as_str().filter(|s| !s.is_empty());
            if let Some(system) = system {
                assert_eq!(ours["system"], system, "{context}: system");
            }
            for field in ["agent_type", "description", "timezone", "tags", "metadata"] {
                let empty = |v: &Value| {
                    v.is_null()
                        || v.as_str() == Some("")
                        || v.as_array().is_some_and(Vec::is_empty)
                        || v.as_object().is_some_and(serde_json::Map::is_empty)
                };
                if !empty(&theirs[field]) {
                    assert_eq!(ours[field], theirs[field], "{context}: {field}");
                }
            }
            for field in [
                "model",
                "model_endpoint_type",
                "model_endpoint",
                "context_window",
                "temperature",
                "max_tokens",
                "put_inner_thoughts_in_kwargs",
                "handle",
            ] {
                let value = &theirs["llm_config"][field];
                if !value.is_null() {
                    let same = ours["llm_config"][field] == *value
                        || ours["llm_config"][field].as_f64() == value.as_f64()
                            && value.as_f64().is_some();
                    assert!(
                        same,
                        "{context}: llm_config.{field}: {} vs {value}",
                        ours["llm_config"][field]
                    );
                }
            }
            assert_eq!(
                ours["embedding_config"], theirs["embedding_config"],
                "{context}: embedding_config"
            );
            // Blocks: the same labels, values and flags.
            let blocks = |file: &Value, agent: &Value| -> Vec<(String, String, bool)> {
                let mut blocks: Vec<_> = agent["block_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|id| {
                        let block = file["blocks"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .find(|b| b["id"] == *id)
                            .unwrap();
                        (
                            block["label"].as_str().unwrap().to_owned(),
                            block["value"].as_str().unwrap_or_default().to_owned(),
                            block["read_only"].as_bool().unwrap_or(false),
                        )
                    })
                    .collect();
                blocks.sort();
                blocks
            };
            assert_eq!(
                blocks(&exported, ours),
                blocks(&original, theirs),
                "{context}: blocks"
            );
            // Tools: each is exported, or reported.
            let all_notes: String = std::iter::once(&report)
                .chain(&report.related)
                .flat_map(|r| r.unmapped.iter().cloned())
                .collect::<Vec<_>>()
                .join("\n");
            let tool_names = |file: &Value, agent: &Value| -> Vec<String> {
                agent["tool_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|id| {
                        let tool = file["tools"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .find(|t| t["id"] == *id)
                            .unwrap();
                        tool["name"].as_str().unwrap_or_default().to_owned()
                    })
                    .collect()
            };
            let exported_tools = tool_names(&exported, ours);
            for tool in tool_names(&original, theirs) {
                let mapped = match tool.as_str() {
                    "conversation_search_date" => "conversation_search",
                    other => other,
                };
                assert!(
                    exported_tools.iter().any(|t| t == mapped)
                        || all_notes.contains(&format!("tool `{tool}`")),
                    "{context}: tool {tool} neither exported nor reported: {all_notes}"
                );
            }
            // Messages: every one is in the export (context or history), or reported.
            let ours_words: Vec<(String, String)> =
                all_messages(&exported, ours["id"].as_str().unwrap())
                    .into_iter()
                    .filter_map(message_words)
                    .collect();
            for message in all_messages(&original, theirs["id"].as_str().unwrap()) {
                let Some(words) = message_words(message) else {
                    continue;
                };
                let id = message["id"].as_str().unwrap_or_default();
                let reported = all_notes.contains(&format!("message {id}:"))
                    || all_notes.contains(&format!("message {id} "));
                let kept = ours_words.iter().any(|w| w.0 == words.0 && w.1.contains(&words.1))
                    // A tool message with several parallel returns becomes several.
                    || (words.0 == "tool" && ours_words.iter().any(|w| w.0 == "tool"));
                assert!(
                    kept || reported,
                    "{context}: message {id} ({}) neither exported nor reported",
                    words.0
                );
            }
        }
        // Importing the export again gives the same agents (names aside).
        let again = Storage::in_memory();
        let round = import(
            &again,
            &parse(&exported.to_string()).unwrap(),
            ImportOptions::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: re-import: {e}"));
        assert_eq!(1 + round.related.len(), imported, "{name}");
    }
}

#[memgpt_test_harness::test]
async fn an_agent_made_by_memgpt_exports_what_letta_loads() {
    let schema = letta_schema();
    let storage = Storage::in_memory();
    let agent = busy_agent(&storage).await;
    let file = serde_json::to_value(export(&storage, agent.id()).await.unwrap()).unwrap();
    assert_eq!(letta_violations(&schema, &file), Vec::<String>::new());
    // Letta runs its own core tools; memgpt's others travel as custom tools with their schema.
    let tools = file["tools"].as_array().unwrap();
    let kind = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["tool_type"].as_str().unwrap().to_owned())
    };
    assert_eq!(kind("send_message").as_deref(), Some("letta_core"));
    assert_eq!(
        kind("core_memory_append").as_deref(),
        Some("letta_memory_core")
    );
    assert_eq!(kind("pause_heartbeats").as_deref(), Some("custom"));
    assert!(
        tools
            .iter()
            .filter(|t| t["tool_type"] == "custom")
            .all(|t| t["json_schema"]["parameters"].is_object())
    );
    // The model it runs on, and what the user said as plain text.
    assert_eq!(file["agents"][0]["llm_config"]["model"], "scripted");
    let user = file["memgpt"]["agents"][0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .chain(file["agents"][0]["messages"].as_array().unwrap())
        .find(|m| m["role"] == "user" && m["name"].is_null())
        .unwrap()
        .clone();
    assert!(
        user["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("question"),
        "{user}"
    );
    // A file the schema refuses is caught: the test can fail.
    let mut broken = file.clone();
    broken["tools"][1]["tool_type"] = json!("letta_core");
    assert!(!letta_violations(&schema, &broken).is_empty());
}
