//! Agents moved in (Letta files) and given MCP tools by name.

use super::*;

/// `memgpt serve`'s MCP servers: tools of a FastMCP server (official Python SDK) in the
/// server's function registry; an agent created with one in its `tools` calls it, and its
/// context (what the inspector shows) lists it.
#[cfg(feature = "mcp")]
#[memgpt_test_harness::test]
async fn agents_of_the_server_are_given_mcp_tools_by_name() {
    use memgpt::function::FunctionRegistry;
    use memgpt::mcp::client::{McpServerConfig, McpTransport};

    let Some((python, pythonpath)) = crate::fastmcp_python() else {
        return;
    };
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fastmcp_calc.py");
    let mut calc = McpServerConfig::stdio("calc", python, [script.display().to_string()]);
    if let McpTransport::Stdio { env, .. } = &mut calc.transport {
        env.insert("PYTHONPATH".into(), pythonpath);
    }
    let calc = calc.connect().await.unwrap();
    let mut registry = FunctionRegistry::linked().unwrap();
    calc.register(&mut registry).unwrap();
    let llm = Arc::new(ScriptedProvider::new());
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        llm.clone(),
        None,
        ServerConfig {
            functions: Some(registry),
            ..config()
        },
    );
    let s = start_with(server, llm.clone()).await;
    let key = s.tenant("acme").await;
    let (status, agent) = s
        .post(
            "/v1/agents",
            &key,
            json!({"name": "adder", "tools": ["send_message", "calc__add"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    let id = agent["id"].as_str().unwrap().to_owned();
    // A tool no server offers is refused as any unknown function.
    let (status, body) = s
        .post(
            "/v1/agents",
            &key,
            json!({"name": "other", "tools": ["send_message", "calc__divide"]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    llm.push_call(
        "calc__add",
        json!({"a": 20, "b": 22, "request_heartbeat": true}),
    );
    llm.push_call("send_message", json!({"message": "42"}));
    let (status, step) = s
        .post(
            &format!("/v1/agents/{id}/messages"),
            &key,
            json!({"text": "What is 20 + 22?"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{step}");
    let text = step.to_string();
    assert!(text.contains("calc__add") && text.contains("42"), "{text}");
    let (status, context) = s.get(&format!("/v1/agents/{id}/context"), &key).await;
    assert_eq!(status, StatusCode::OK);
    let functions: Vec<&str> = context["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(functions.contains(&"calc__add"), "{functions:?}");
}

/// A Letta file with an agent and its sleep-time companion imports as two agents of the
/// caller's tenant (or one, chosen with `?agent=`); another tenant sees neither.
#[memgpt_test_harness::test]
async fn a_two_agent_letta_file_imports_into_one_tenant() {
    let file = evie();
    // The file is larger than the other tests' body limit.
    let llm = Arc::new(ScriptedProvider::new());
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        llm.clone(),
        None,
        ServerConfig {
            max_body_bytes: 8 * 1024 * 1024,
            ..config()
        },
    );
    let s = start_with(server, llm).await;
    let key = s.tenant("acme").await;
    let other = s.tenant("other").await;
    let (status, imported) = s.post("/v1/agents/import", &key, file.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{imported}");
    assert_eq!(imported["agent"]["name"], "Evie");
    assert_eq!(imported["related"][0]["name"], "companion-sleeptime_copy");
    let (_, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 2, "{agents}");
    let (_, theirs) = s.get("/v1/agents", &other).await;
    assert!(theirs["agents"].as_array().unwrap().is_empty(), "{theirs}");
    // Exporting either gives the pair back.
    let id = imported["related"][0]["id"].as_str().unwrap();
    let (status, pair) = s.get(&format!("/v1/agents/{id}/export"), &key).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pair["agents"].as_array().unwrap().len(), 2);
    assert_eq!(
        pair["groups"][0]["manager_config"]["manager_type"],
        "sleeptime"
    );

    let (status, one) = s
        .post(
            "/v1/agents/import?agent=agent-1&name=helper",
            &key,
            file.clone(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{one}");
    assert_eq!(one["agent"]["name"], "helper");
    assert!(one["related"].as_array().unwrap().is_empty());
    let (status, body) = s.post("/v1/agents/import?agent=nobody", &key, file).await;
    assert_eq!(status.as_u16() / 100, 4, "{body}");
    assert!(body.to_string().contains("no agent `nobody`"), "{body}");
    let (_, agents) = s.get("/v1/agents", &key).await;
    assert_eq!(agents["agents"].as_array().unwrap().len(), 3, "{agents}");
}
