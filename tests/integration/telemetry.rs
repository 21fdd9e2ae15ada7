//! OpenTelemetry export: an agent's steps reach an OTLP/HTTP receiver on 127.0.0.1 as spans in
//! OpenTelemetry's GenAI semantic conventions, decoded here from the protobuf the exporter
//! sends (what a collector would receive).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

use crate::fake_openai::{FakeOpenAi, Reply};
use crate::provider;

/// An OTLP/HTTP receiver: every export request to `/v1/traces`, decoded.
#[derive(Clone, Default)]
pub(crate) struct Receiver {
    requests: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

impl Receiver {
    pub(crate) async fn start(&self) -> String {
        let requests = self.requests.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            post(move |headers: axum::http::HeaderMap, body: Bytes| {
                let requests = requests.clone();
                async move {
                    assert_eq!(
                        headers["content-type"], "application/x-protobuf",
                        "OTLP/HTTP in protobuf"
                    );
                    let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                    requests.lock().unwrap().push(request);
                    ""
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}")
    }

    /// Every span received, with the service name of its resource.
    pub(crate) fn spans(&self) -> Vec<(String, Span)> {
        let mut out = Vec::new();
        for request in self.requests.lock().unwrap().iter() {
            for resource in &request.resource_spans {
                let service = resource
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                    .and_then(|a| a.value.as_ref()?.value.clone())
                    .map(|v| text(&v))
                    .unwrap_or_default();
                for scope in &resource.scope_spans {
                    for span in &scope.spans {
                        out.push((service.clone(), span.clone()));
                    }
                }
            }
        }
        out
    }
}

fn text(value: &AnyValue) -> String {
    match value {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::IntValue(i) => i.to_string(),
        AnyValue::DoubleValue(d) => d.to_string(),
        AnyValue::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// A span's attributes as text.
pub(crate) fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes
        .iter()
        .filter_map(|a| Some((a.key.clone(), text(a.value.as_ref()?.value.as_ref()?))))
        .collect()
}

#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_model_calls_and_functions_arrive_as_genai_spans() {
    let receiver = Receiver::default();
    let endpoint = receiver.start().await;
    let (layer, guard) = memgpt::telemetry::OtlpExport::new(&endpoint)
        .service_name("telemetry-test")
        .layer()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    let _default = tracing::subscriber::set_default(subscriber);

    let server = FakeOpenAi::start().await;
    let mut agent = memgpt::Agent::builder()
        .name("ada")
        .provider(provider(&server))
        .build()
        .await
        .unwrap();
    server.push_all([
        Reply::call(
            "core_memory_append",
            json!({"label": "human", "content": "Likes tea.", "request_heartbeat": true}),
        ),
        Reply::call("no_such_function", json!({"request_heartbeat": true})),
        Reply::call("send_message", json!({"message": "Noted: tea."})),
        Reply::call("send_message", json!({"message": "Hello again."})),
    ]);
    let first = agent.step("I like tea").await.unwrap();
    let second = agent.step("hello").await.unwrap();
    // A provider failure: the step ends with an error status on its model call.
    server.push(Reply::status(400, "bad request"));
    agent.step("and now?").await.unwrap();
    guard.shutdown().unwrap();

    let spans = receiver.spans();
    assert!(spans.iter().all(|(service, _)| service == "telemetry-test"));
    let named = |prefix: &str| -> Vec<&Span> {
        spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| s.name.starts_with(prefix))
            .collect()
    };
    let steps = named("invoke_agent ada");
    let chats = named("chat gpt-4o-mini");
    let tools = named("execute_tool ");
    assert_eq!(
        (steps.len(), chats.len(), tools.len()),
        (3, 5, 4),
        "{:?}",
        spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
    );

    // The first step: three model calls and three function calls under it.
    let step = attributes(steps[0]);
    assert_eq!(step["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(step["gen_ai.agent.name"], "ada");
    assert_eq!(step["gen_ai.agent.id"], agent.id().to_string());
    assert_eq!(
        step["memgpt.step.functions"],
        "core_memory_append,no_such_function,send_message"
    );
    assert_eq!(step["memgpt.step.llm_calls"], "3");
    assert_eq!(step["memgpt.step.stop_reason"], "end_turn");
    assert_eq!(step["memgpt.memory.pressure_warned"], "false");
    assert_eq!(step["memgpt.memory.flushes"], "0");
    let pressure: f64 = step["memgpt.memory.pressure"].parse().unwrap();
    assert!(
        (pressure - first.context.fraction).abs() < 1e-9,
        "{pressure}"
    );
    assert_eq!(
        step["gen_ai.usage.input_tokens"],
        first.usage.prompt_tokens.to_string()
    );
    let children = |parent: &Span, of: &[&Span]| {
        of.iter()
            .filter(|s| s.parent_span_id == parent.span_id && s.trace_id == parent.trace_id)
            .count()
    };
    assert_eq!(children(steps[0], &chats), 3);
    assert_eq!(children(steps[0], &tools), 3);

    // A model call: the request, the answer, the tokens (cached ones included).
    let chat = attributes(chats[3]);
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.provider.name"], "openai");
    assert_eq!(chat["gen_ai.request.model"], "gpt-4o-mini");
    assert_eq!(chat["gen_ai.response.finish_reasons"], "tool_calls");
    assert_eq!(
        chat["gen_ai.usage.input_tokens"],
        second.usage.prompt_tokens.to_string()
    );
    assert_eq!(chat["gen_ai.usage.output_tokens"], "10");
    assert_eq!(
        chat["gen_ai.usage.cache_read.input_tokens"],
        second.usage.cached_prompt_tokens.to_string()
    );
    assert!(
        second.usage.cached_prompt_tokens > 0,
        "the fake server caches"
    );
    assert_eq!(chats[3].kind, 3, "a client span (SPAN_KIND_CLIENT)");

    // Function calls: the name and call id; an unknown function is an error.
    let append = attributes(tools[0]);
    assert_eq!(append["gen_ai.operation.name"], "execute_tool");
    assert_eq!(append["gen_ai.tool.name"], "core_memory_append");
    assert_eq!(
        append["gen_ai.tool.call.id"],
        first.function_calls[0].call_id
    );
    assert!(!append.contains_key("error.type"));
    let unknown = attributes(tools[1]);
    assert_eq!(unknown["error.type"], "function_error");
    assert_eq!(
        tools[1].status.as_ref().map(|s| s.code),
        Some(2),
        "STATUS_CODE_ERROR"
    );

    // The failed model call and its step.
    let failed = attributes(chats[4]);
    assert_eq!(failed["error.type"], "provider_error");
    assert_eq!(chats[4].status.as_ref().map(|s| s.code), Some(2));
    let failed_step = attributes(steps[2]);
    assert_eq!(failed_step["memgpt.step.stop_reason"], "provider_error");
    assert_eq!(failed_step["error.type"], "provider_error");
}
