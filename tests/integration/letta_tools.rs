//! Letta's memory tools (`memory`, `memory_apply_patch`) and skills, in agents imported from
//! Letta's published files, over the real OpenAI provider against the fake server.

use memgpt::Agent;
use memgpt::agent_file::*;
use memgpt::store::Storage;
use serde_json::{Value, json};

use crate::fake_openai::{FakeOpenAi, Reply};

/// The published file `name` of letta-ai/agent-file (tests/fixtures/letta/agent-file).
fn published(name: &str) -> String {
    use std::io::Read;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/letta/agent-file")
        .join(format!("{name}.af.gz"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text
}

async fn imported(storage: &Storage, name: &str) -> (ImportReport, AgentFile) {
    let file = parse(&published(name)).unwrap();
    let report = import(storage, &file, ImportOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (report, file)
}

fn call(name: &str, mut arguments: Value) -> (String, Value) {
    arguments["request_heartbeat"] = json!(true);
    (name.to_owned(), arguments)
}

#[memgpt_test_harness::test]
async fn letta_memory_tool_edits_blocks_with_every_command() {
    let server = FakeOpenAi::start().await;
    let storage = Storage::in_memory();
    // void.af offers `memory` (old_string/new_string) and `memory_apply_patch`.
    let (report, _) = imported(&storage, "void").await;
    assert!(
        !report.unmapped.iter().any(|n| n.contains("tool `memory")),
        "{:?}",
        report.unmapped
    );
    let mut agent = Agent::builder()
        .provider(crate::provider(&server))
        .storage(storage.clone())
        .load(report.id)
        .await
        .unwrap();
    let functions = agent.config().functions.clone();
    for f in ["memory", "memory_apply_patch"] {
        assert!(functions.iter().any(|g| g == f), "{f} in {functions:?}");
    }
    let blocks_before = agent.memory().blocks().len();
    let calls = [
        call("memory", json!({"command": "view"})),
        call(
            "memory",
            json!({"command": "create", "path": "/memories/projects",
                   "description": "Ongoing research projects", "file_text": "alpha\nbeta"}),
        ),
        // Both of Letta's spellings: old_str/new_str (deep_research_agent) and old_string.
        call(
            "memory",
            json!({"command": "str_replace", "path": "/memories/projects", "old_str": "alpha", "new_str": "ALPHA"}),
        ),
        call(
            "memory",
            json!({"command": "insert", "path": "/memories/projects", "insert_line": 1, "insert_text": "between"}),
        ),
        call(
            "memory",
            json!({"command": "view", "path": "/memories/projects", "view_range": [1, 2]}),
        ),
        call(
            "memory",
            json!({"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/research"}),
        ),
        call(
            "memory",
            json!({"command": "rename", "path": "/memories/research", "description": "Projects under way"}),
        ),
        call(
            "memory_apply_patch",
            json!({"label": "", "patch": "*** Add Block: scratch\nDescription: Temporary\n+temp line\n\
                   *** Update Block: research\n@@\n-beta\n+gamma"}),
        ),
        call(
            "memory",
            json!({"command": "str_replace", "path": "/memories/research", "old_string": "gamma", "new_string": "delta"}),
        ),
        call(
            "memory",
            json!({"command": "delete", "path": "/memories/scratch"}),
        ),
        // Refusals change nothing and say why.
        call(
            "memory",
            json!({"command": "str_replace", "path": "/memories/research", "old_string": "12→ x", "new_string": "y"}),
        ),
        call(
            "memory_apply_patch",
            json!({"label": "", "patch": "*** Add Block: half\n+x\n*** Update Block: research\n-not there\n+y"}),
        ),
        call(
            "memory",
            json!({"command": "create", "path": "/memories/huge", "description": "too big",
                   "file_text": "x".repeat(600_000)}),
        ),
    ];
    let calls: Vec<(&str, Value)> = calls.iter().map(|(n, a)| (n.as_str(), a.clone())).collect();
    // Two steps: a step makes at most max_chain_length (10) calls; void's tool rules want an
    // archival search first.
    let mut results: Vec<(bool, String)> = Vec::new();
    for (i, part) in calls.chunks(7).enumerate() {
        let search = (
            "archival_memory_search",
            json!({"query": "projects", "request_heartbeat": true}),
        );
        let part: Vec<(&str, Value)> = std::iter::once(search)
            .chain(part.iter().cloned())
            .collect();
        server.push(Reply::calls("Let me organise my memory.", &part));
        server.push(Reply::call(
            "send_message",
            json!({"message": "Memory organised."}),
        ));
        let step = agent
            .step(format!("Please keep notes on our projects ({i})."))
            .await
            .unwrap();
        assert_eq!(step.reply(), "Memory organised.", "{step:#?}");
        results.extend(
            step.function_calls
                .iter()
                .filter(|c| c.name.starts_with("memory"))
                .map(|c| (c.ok, c.output.clone())),
        );
    }
    let n = calls.len();
    for (i, (ok, output)) in results[..n - 3].iter().enumerate() {
        assert!(ok, "call {i} ({}) failed: {output}", calls[i].0);
    }
    assert!(
        results[0].1.contains("/memories/persona") || results[0].1.contains("Memory blocks:"),
        "{}",
        results[0].1
    );
    assert!(
        results[4].1.ends_with("     1→ALPHA\n     2→between"),
        "{}",
        results[4].1
    );
    let (ok, output) = &results[n - 3];
    assert!(!ok && output.contains("line-number prefix"), "{output}");
    let (ok, output) = &results[n - 2];
    assert!(!ok && output.contains("Nothing was changed"), "{output}");
    let (ok, output) = &results[n - 1];
    assert!(!ok && output.contains("refused"), "{output}");

    // What the step did is committed: the store holds it.
    drop(agent);
    let state = storage.agents.load_agent(report.id).await.unwrap().unwrap();
    let research = state.memory.get("research").expect("the renamed block");
    assert_eq!(research.value(), "ALPHA\nbetween\ndelta");
    assert_eq!(research.description(), Some("Projects under way"));
    for gone in ["projects", "scratch", "half", "huge"] {
        assert!(state.memory.get(gone).is_none(), "{gone}");
    }
    assert_eq!(state.memory.blocks().len(), blocks_before + 1);

    // The export gives Letta's tools back as Letta has them, and the new block.
    let exported = serde_json::to_value(export(&storage, report.id).await.unwrap()).unwrap();
    let tools = exported["tools"].as_array().unwrap();
    for name in ["memory", "memory_apply_patch"] {
        let tool = tools.iter().find(|t| t["name"] == name).unwrap();
        assert_eq!(tool["tool_type"], "letta_memory_core", "{name}");
    }
    assert!(
        exported["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["label"] == "research" && b["description"] == "Projects under way")
    );
}

#[memgpt_test_harness::test]
async fn imported_skills_are_listed_loaded_and_exported() {
    let server = FakeOpenAi::start().await;
    let storage = Storage::in_memory();
    let (report, file) = imported(&storage, "ezra").await;
    assert_eq!(report.skills, 4);
    let mut agent = Agent::builder()
        .provider(crate::provider(&server))
        .storage(storage.clone())
        .load(report.id)
        .await
        .unwrap();
    assert!(agent.config().functions.iter().any(|f| f == "skill"));
    server.push(Reply::calls(
        "This needs the verification skill.",
        &[
            ("skill", json!({"command": "load", "name": "verify-claims", "request_heartbeat": true})),
            ("skill", json!({"command": "load", "name": "verify-claims", "file": "scripts/verify.sh", "request_heartbeat": true})),
            ("skill", json!({"command": "list", "request_heartbeat": true})),
            ("skill", json!({"command": "load", "name": "no-such-skill", "request_heartbeat": true})),
        ],
    ));
    server.push(Reply::call("send_message", json!({"message": "Checked."})));
    let step = agent.step("Is this claim true?").await.unwrap();
    let outputs: Vec<&str> = step
        .function_calls
        .iter()
        .map(|c| c.output.as_str())
        .collect();
    assert!(
        outputs[0].contains("Loaded SKILL.md of skill `verify-claims`"),
        "{}",
        outputs[0]
    );
    assert!(
        outputs[2].contains("verify-claims")
            && outputs[2].contains("[loaded: SKILL.md, scripts/verify.sh]"),
        "{}",
        outputs[2]
    );
    assert!(
        outputs[3].contains("there is no skill named `no-such-skill`"),
        "{}",
        outputs[3]
    );
    let requests = server.agent_requests();
    // Listed from the first request on; loaded once the model loaded it.
    let first = requests[0].system_prompt();
    assert!(
        first.contains("<skills>") && first.contains("- verify-claims: Verify factual claims"),
        "{first}"
    );
    assert!(!first.contains("<loaded_skill"));
    let last = requests.last().unwrap().system_prompt();
    assert!(
        last.contains("<loaded_skill name=\"verify-claims\" file=\"SKILL.md\">"),
        "{last}"
    );
    assert!(last.contains("file=\"scripts/verify.sh\""));

    // Unloading frees the context again.
    let loaded_tokens = agent.stats().memory_tokens;
    server.push(Reply::calls(
        "Done with it.",
        &[(
            "skill",
            json!({"command": "unload", "name": "verify-claims", "request_heartbeat": true}),
        )],
    ));
    server.push(Reply::call("send_message", json!({"message": "Unloaded."})));
    agent.step("Thanks").await.unwrap();
    assert!(agent.stats().memory_tokens < loaded_tokens);

    // The export carries the skills as Letta has them, and Letta's revision id beside ours.
    drop(agent);
    let exported = export(&storage, report.id).await.unwrap();
    assert_eq!(exported.skills, file.skills);
    assert_eq!(
        exported.metadata.get("revision_id"),
        file.metadata.get("revision_id")
    );
    assert!(exported.metadata.contains_key("exported_by"));
}

#[memgpt_test_harness::test]
async fn forty_six_skills_cost_about_a_thousand_tokens() {
    let server = FakeOpenAi::start().await;
    let storage = Storage::in_memory();
    let (report, file) = imported(&storage, "lettabot").await;
    assert_eq!(report.skills, 46);
    // Listed whole, the descriptions alone would take more than the listing may.
    let descriptions: usize = file
        .skills
        .iter()
        .filter_map(|s| s.files.as_ref()?.get("SKILL.md"))
        .filter_map(|text| memgpt::memory::front_matter(text, "description"))
        .map(|d| d.len())
        .sum();
    assert!(
        descriptions > memgpt::memory::LISTING_CHARS,
        "{descriptions}"
    );
    let mut agent = Agent::builder()
        .provider(crate::provider(&server))
        .storage(storage.clone())
        .load(report.id)
        .await
        .unwrap();
    server.push(Reply::call("send_message", json!({"message": "Hi."})));
    agent.step("Hello").await.unwrap();
    let prompt = server.agent_requests()[0].system_prompt();
    let listing = &prompt[prompt.find("<skills>").unwrap()..prompt.find("</skills>").unwrap()];
    assert!(
        listing.len() <= memgpt::memory::LISTING_CHARS + 300,
        "{}",
        listing.len()
    );
    assert!(listing.contains("more: call `skill` with command \"list\""));
    // About a thousand tokens for 46 skills, whatever the window.
    let tokens = memgpt::tokens::TokenCounter::count_text(
        &memgpt::tokens::TiktokenCounter::for_model("gpt-4o"),
        listing,
    );
    assert!(tokens < 1_200, "{tokens}");
    let stats = agent.stats();
    assert!(
        stats.total_tokens < agent.config().prompt_budget(),
        "{stats}"
    );
    // A skill whose files are not in the file is listed and says so.
    let source_only = file.skills.iter().find(|s| s.files.is_none()).unwrap();
    assert!(
        report
            .adjusted
            .iter()
            .any(|n| n.contains(&source_only.name) && n.contains("cannot be loaded")),
        "{:?}",
        report.adjusted
    );
}

#[memgpt_test_harness::test]
async fn the_memory_tool_edits_shared_blocks_where_they_live() {
    use memgpt::MemoryBlock;
    use memgpt::backend::testing::ScriptedProvider;
    use memgpt::store::SharedBlock;
    use std::sync::Arc;

    let storage = Storage::in_memory();
    let team = SharedBlock::new(
        MemoryBlock::new("team", "Ann leads.\nBo writes."),
        chrono::Utc::now(),
    );
    storage.blocks.create_block(&team).await.unwrap();
    let llm = Arc::new(ScriptedProvider::new());
    let build = |name: &str| {
        Agent::builder()
            .name(name)
            .provider(llm.clone())
            .storage(storage.clone())
            .shared_block(&team)
            .functions(["send_message", "memory", "memory_apply_patch"])
    };
    let mut ann = build("ann").build().await.unwrap();
    let mut bo = build("bo").build().await.unwrap();

    // An edit and a description go to the block store: the other holder sees them.
    llm.push_call(
        "memory",
        json!({"command": "str_replace", "path": "/memories/team", "old_string": "Bo writes.", "new_string": "Bo edits.", "request_heartbeat": true}),
    );
    llm.push_call(
        "memory_apply_patch",
        json!({"label": "team", "patch": " Ann leads.\n+Cy tests.", "request_heartbeat": true}),
    );
    llm.push_call(
        "memory",
        json!({"command": "rename", "path": "/memories/team", "description": "Who does what", "request_heartbeat": true}),
    );
    // Renaming would rename it for every holder: refused.
    llm.push_call(
        "memory",
        json!({"command": "rename", "old_path": "/memories/team", "new_path": "/memories/crew", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "ok"}));
    let step = ann.step("Bo edits now; Cy joins to test.").await.unwrap();
    let outputs: Vec<(bool, &str)> = step
        .function_calls
        .iter()
        .map(|c| (c.ok, c.output.as_str()))
        .collect();
    assert!(outputs[..3].iter().all(|(ok, _)| *ok), "{outputs:?}");
    assert!(
        !outputs[3].0 && outputs[3].1.contains("shared"),
        "{outputs:?}"
    );
    let stored = storage
        .blocks
        .get_blocks(&[team.id])
        .await
        .unwrap()
        .remove(0);
    assert_eq!(stored.block.value(), "Ann leads.\nCy tests.\nBo edits.");
    assert_eq!(stored.block.description(), Some("Who does what"));

    // Deleting a shared block detaches it from this agent only.
    llm.push_call(
        "memory",
        json!({"command": "delete", "path": "/memories/team", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "ok"}));
    bo.step("Drop the team notes.").await.unwrap();
    assert!(bo.memory().get("team").is_none());
    assert_eq!(
        storage.blocks.block_agents(team.id).await.unwrap(),
        vec![ann.id()]
    );
    let bo_state = storage.agents.load_agent(bo.id()).await.unwrap().unwrap();
    assert!(
        bo_state.memory.get("team").is_none(),
        "the detachment is committed"
    );
    assert_eq!(
        ann.memory().get("team").unwrap().value(),
        "Ann leads.\nCy tests.\nBo edits."
    );

    // A patch that fails after writing a shared block: working context is put back, but the
    // shared block's edit stands in the store, and the agent's copy shows it.
    llm.push_call(
        "memory_apply_patch",
        json!({"label": "", "patch": "*** Update Block: team\n Bo edits.\n+Di joins.\n*** Add Block: notes\n+x\n*** Update Block: nope\n-x\n+y", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "ok"}));
    let step = ann.step("Di joins; note it.").await.unwrap();
    let patch = &step.function_calls[0];
    assert!(
        !patch.ok && patch.output.contains("except the shared blocks team"),
        "{patch:?}"
    );
    assert!(
        ann.memory().get("notes").is_none(),
        "the own block is undone"
    );
    assert_eq!(
        ann.memory().get("team").unwrap().value(),
        "Ann leads.\nCy tests.\nBo edits.\nDi joins."
    );
}

#[memgpt_test_harness::test]
async fn memory_pressure_names_the_loaded_skills() {
    use memgpt::backend::testing::ScriptedProvider;
    use memgpt::memory::Skill;
    use std::sync::Arc;

    let body = "Step: check the form field by field before filling it. ".repeat(40);
    let pdf = Skill::from_files(
        "pdf",
        [(
            "SKILL.md".to_owned(),
            format!("---\nname: pdf\ndescription: Fill PDF forms.\n---\n{body}"),
        )]
        .into(),
        None,
    );
    let llm = Arc::new(ScriptedProvider::new());
    let mut agent = Agent::builder()
        .provider(llm.clone())
        .context_window(8_192)
        .skill(pdf)
        .build()
        .await
        .unwrap();
    llm.push_call(
        "skill",
        json!({"command": "load", "name": "pdf", "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "Loaded."}));
    let step = agent.step("Fill this form.").await.unwrap();
    assert!(step.function_calls[0].ok, "{:?}", step.function_calls[0]);
    let mut warning = None;
    for i in 0..80 {
        llm.push_call("send_message", json!({"message": format!("Noted {i}.")}));
        let step = agent
            .step(format!(
                "Field {i}: {}",
                "the applicant's details go here. ".repeat(12)
            ))
            .await
            .unwrap();
        if step.pressure_warning {
            warning = step
                .messages
                .iter()
                .find(|m| m.text.starts_with("Memory pressure"))
                .map(|m| m.text.clone());
            break;
        }
    }
    let warning = warning.expect("a memory-pressure warning");
    assert!(
        warning.contains("unload those you no longer need (pdf)"),
        "{warning}"
    );
}
