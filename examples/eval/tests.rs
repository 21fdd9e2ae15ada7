//! Every harness end to end against a fake OpenAI-compatible server on 127.0.0.1 (scripted
//! replies, deterministic hashing embeddings), on small data files written by the tests, with
//! the scores checked against the known answers.

use std::path::Path;

use serde_json::{Value, json};

use crate::args::Args;
use crate::fake_openai::{FAKE_EMBEDDING_DIMENSION, FakeOpenAi, Reply};

const K0: &str = "11111111-1111-4111-8111-111111111111";
const K1: &str = "22222222-2222-4222-8222-222222222222";
const V0: &str = "33333333-3333-4333-8333-333333333333";
const V1: &str = "44444444-4444-4444-8444-444444444444";
const K2: &str = "55555555-5555-4555-8555-555555555555";
const V2: &str = "66666666-6666-4666-8666-666666666666";

fn args(command: &str, out: &Path, server: Option<&FakeOpenAi>, extra: &[&str]) -> Args {
    let mut line: Vec<String> = vec![command.into(), "--out".into(), out.display().to_string()];
    if let Some(s) = server {
        line.extend([
            "--base-url".into(),
            s.base_url(),
            "--model".into(),
            "fake-model".into(),
            "--embed-base-url".into(),
            s.base_url(),
            "--embed-model".into(),
            "fake-embed".into(),
            "--embed-dim".into(),
            FAKE_EMBEDDING_DIMENSION.to_string(),
        ]);
    }
    line.extend(extra.iter().map(|s| (*s).to_owned()));
    Args::parse(line).unwrap()
}

fn summary(out: &Path, name: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(out.join(format!("{name}.summary.json"))).unwrap(),
    )
    .unwrap()
}

/// Two examples of three pairs; level 0 and level 1 orderings.
fn nested_kv_data(dir: &Path) -> std::path::PathBuf {
    let kv = dir.join("kv.jsonl");
    let example =
        json!({"ordered_kv_records": [[K0, V0], [K1, V1], [K2, V2]], "key": K0, "value": V0});
    std::fs::write(&kv, format!("{example}\n{example}\n")).unwrap();
    std::fs::write(
        dir.join("random_orderings_100_samples_140_indices_1_levels.jsonl"),
        "[0]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("random_orderings_100_samples_140_indices_2_levels.jsonl"),
        "[1, 2]\n",
    )
    .unwrap();
    kv
}

#[tokio::test]
async fn nested_kv_offline_oracle_is_perfect_with_levels_plus_two_searches() {
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let kv = nested_kv_data(data.path());
    let a = args(
        "nested-kv",
        out.path(),
        None,
        &[
            "--offline",
            "--levels",
            "0,1",
            "--data",
            kv.to_str().unwrap(),
        ],
    );
    let markdown = crate::nested_kv::run(&a).await.unwrap();
    assert!(
        markdown.contains("| memgpt | 1 | 1 | 100.0% | 3.00 |"),
        "{markdown}"
    );
    let s = summary(out.path(), "nested-kv-offline");
    for (row, level) in s["rows"].as_array().unwrap().iter().zip([0, 1]) {
        assert_eq!(row["accuracy"], 1.0, "{row}");
        assert_eq!(row["searches"], f64::from(level + 2), "{row}");
        assert_eq!(row["llm_calls"], f64::from(level + 3), "{row}");
        assert!(row["prompt_tokens"].as_f64().unwrap() > 1000.0, "{row}");
    }
}

#[tokio::test]
async fn nested_kv_against_an_endpoint_scores_both_arms_and_resumes() {
    let server = FakeOpenAi::start().await;
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let kv = nested_kv_data(data.path());
    let a = args(
        "nested-kv",
        out.path(),
        Some(&server),
        &["--levels", "1", "--data", kv.to_str().unwrap()],
    );
    // Level 1: K1 -> K2 -> V2. The baseline answers the first hop only (wrong); the agent
    // follows the chain.
    server.push_summary(K2);
    server.push_all([
        Reply::call(
            "archival_memory_search",
            json!({"query": K1, "request_heartbeat": true}),
        ),
        Reply::call(
            "archival_memory_search",
            json!({"query": K2, "request_heartbeat": true}),
        ),
        Reply::call(
            "send_message",
            json!({"message": format!("The value is {V2}.")}),
        ),
    ]);
    crate::nested_kv::run(&a).await.unwrap();
    let s = summary(out.path(), "nested-kv");
    let rows = s["rows"].as_array().unwrap();
    assert_eq!(
        (rows[0]["arm"].as_str(), rows[0]["accuracy"].as_f64()),
        (Some("baseline"), Some(0.0))
    );
    assert_eq!(
        (rows[1]["arm"].as_str(), rows[1]["accuracy"].as_f64()),
        (Some("memgpt"), Some(1.0))
    );
    assert_eq!(rows[1]["searches"], 2.0);
    // The agent's search found the pair in archival storage.
    let tool_results: Vec<String> = server
        .agent_requests()
        .last()
        .unwrap()
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(tool_results[1].contains(V2), "{tool_results:?}");
    // A rerun finds everything done and asks the server nothing.
    let calls = server.calls();
    crate::nested_kv::run(&a).await.unwrap();
    assert_eq!(server.calls(), calls);
}

fn nq_data(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("nq.jsonl");
    let rows = [
        (
            "who discovered penicillin",
            "Alexander Fleming",
            "Penicillin",
            "Penicillin was discovered in 1928 by Alexander Fleming, a Scottish physician.",
        ),
        (
            "what is the capital of australia",
            "Canberra",
            "Canberra",
            "Canberra is the capital city of Australia, founded in 1913.",
        ),
        (
            "how many legs does a spider have",
            "eight",
            "Spider",
            "Spiders are arachnids with eight legs and chelicerae with fangs.",
        ),
    ];
    let text: String = rows
        .iter()
        .map(|(q, a, title, text)| {
            json!({"question": q, "answers": [a], "ctxs": [{"title": title, "text": text, "isgold": true}]})
                .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn doc_qa_retrieval_finds_gold_passages() {
    let server = FakeOpenAi::start().await;
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let nq = nq_data(data.path());
    let a = args(
        "doc-qa-retrieval",
        out.path(),
        Some(&server),
        &["--data", nq.to_str().unwrap(), "--k", "1,3"],
    );
    let markdown = crate::doc_qa::run_retrieval(&a).await.unwrap();
    let s = summary(out.path(), "doc-qa-retrieval");
    let rows = s["rows"].as_array().unwrap();
    assert_eq!(rows[0]["retriever"], "bm25");
    assert_eq!(rows[0]["recall@1"], 1.0, "{markdown}");
    for row in rows {
        assert_eq!(row["recall@3"], 1.0, "{row}");
    }
}

#[tokio::test]
async fn doc_qa_scores_the_baseline_and_the_agent() {
    let server = FakeOpenAi::start().await;
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let nq = nq_data(data.path());
    let a = args(
        "doc-qa",
        out.path(),
        Some(&server),
        &["--data", nq.to_str().unwrap(), "--k", "1,3", "--limit", "1"],
    );
    // top-1 right, top-3 wrong; the agent searches and answers right.
    server.push_summary("Alexander Fleming.");
    server.push_summary("Louis Pasteur");
    server.push_all([
        Reply::call(
            "archival_memory_search",
            json!({"query": "penicillin discovered", "request_heartbeat": true}),
        ),
        Reply::call(
            "send_message",
            json!({"message": "It was Alexander Fleming, in 1928."}),
        ),
    ]);
    crate::doc_qa::run(&a).await.unwrap();
    let s = summary(out.path(), "doc-qa");
    let rows = s["rows"].as_array().unwrap();
    let accuracy: Vec<(String, f64)> = rows
        .iter()
        .map(|r| {
            (
                r["arm"].as_str().unwrap().to_owned(),
                r["accuracy"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        accuracy,
        [
            ("top-1".into(), 1.0),
            ("top-3".into(), 0.0),
            ("memgpt".into(), 1.0)
        ]
    );
    assert_eq!(rows[1]["passages_in_prompt"], 3.0);
    // The baseline's prompt held the gold passage.
    let first = &server.summary_requests()[0];
    assert!(
        first
            .last_content()
            .contains("Alexander Fleming, a Scottish physician")
    );
    // The agent's search result came from archival storage.
    let last = server.agent_requests().last().unwrap().messages().to_vec();
    assert!(last.iter().any(|m| m["role"] == "tool" && m["content"].to_string().contains("Scottish physician")));
}

fn locomo_data(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("locomo.json");
    let data = json!([{
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex yesterday!"},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Congrats! I am training for a marathon."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "Good luck with the running."}
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "Hi Ann! How is Rex doing?"},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Rex loves the park. I started painting sunsets too."},
                {"speaker": "Bob", "dia_id": "D2:3", "text": "Lovely, send me a painting."}
            ]
        },
        "qa": [
            {"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
            {"question": "What does Ann paint?", "answer": "sunsets", "evidence": ["D2:2"], "category": 4},
            {"question": "What is Bob training for?", "answer": "a marathon", "evidence": ["D1:2; D9:9"], "category": 1},
            {"question": "Unanswerable?", "adversarial_answer": "x", "evidence": [], "category": 5}
        ],
        "observation": {
            "session_1_observation": {"Ann": [["Ann adopted a puppy named Rex.", "D1:1"]], "Bob": [["Bob trains for a marathon.", "D1:2"]]},
            "session_2_observation": {"Ann": [["Ann paints sunsets.", "D2:2"]]}
        }
    }]);
    std::fs::write(&path, data.to_string()).unwrap();
    path
}

#[tokio::test]
async fn locomo_retrieval_reports_recall_per_category_and_the_overall_line() {
    let server = FakeOpenAi::start().await;
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let path = locomo_data(data.path());
    let a = args(
        "locomo-retrieval",
        out.path(),
        Some(&server),
        &["--data", path.to_str().unwrap()],
    );
    let markdown = crate::locomo_retrieval::run(&a).await.unwrap();
    let last = markdown.lines().last().unwrap();
    assert!(
        last.starts_with("locomo: overall conversation_search recall@10 = "),
        "{markdown}"
    );
    assert!(
        markdown.contains("store: SQLite + tantivy + usearch"),
        "{markdown}"
    );
    let s = summary(out.path(), "locomo-retrieval");
    assert_eq!(s["skipped"], 1, "the question without evidence");
    let all = s["rows"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(all["questions"], 3);
    // Six turns: two pages of five hold them all, whatever the ranking.
    assert_eq!(all["recall@10"], 1.0, "{all}");
    assert_eq!(s["overall_recall_at_10"], 1.0);
    // "What does Ann paint?" names Ann and paints: her turn comes first.
    let q = s["recall_at_10_by_category"]["4 single-hop"]
        .as_f64()
        .unwrap();
    assert_eq!(q, 1.0);
}

/// One BEAM chat folder (`<dir>/1`): two dated batches, a knowledge-update question whose
/// evidence is spread over two dicts and an abstention question (no evidence, skipped).
fn beam_data(dir: &Path) -> std::path::PathBuf {
    let chat = dir.join("1");
    std::fs::create_dir_all(chat.join("probing_questions")).unwrap();
    let chat_json = json!([
        {"batch_number": 1, "time_anchor": "March-01-2024", "turns": [[
            {"role": "user", "id": 0, "content": "My cluster runs Redis 7 on port 6379 ->-> 1,1"},
            {"role": "assistant", "id": 1, "content": "Noted: Redis 7, port 6379."},
            {"role": "user", "id": 2, "content": "I also deploy with Helm charts."},
            {"role": "assistant", "id": 3, "content": "Helm works well for that."}
        ]]},
        {"batch_number": 2, "time_anchor": "April-02-2024", "turns": [[
            {"role": "user", "id": 4, "content": "We moved Redis to port 6380 last week."},
            {"role": "assistant", "id": 5, "content": "Updated: port 6380."}
        ]]}
    ]);
    std::fs::write(chat.join("chat.json"), chat_json.to_string()).unwrap();
    let questions = json!({
        "abstention": [{"question": "Which database did I drop?"}],
        "knowledge_update": [{"question": "Which port does my Redis use now?",
                              "source_chat_ids": {"original_info": [0], "updated_info": [4]}}]
    });
    std::fs::write(
        chat.join("probing_questions/probing_questions.json"),
        questions.to_string(),
    )
    .unwrap();
    dir.to_path_buf()
}

#[tokio::test]
async fn beam_chats_are_a_second_family_with_their_floor() {
    let server = FakeOpenAi::start().await;
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = beam_data(data.path());
    let a = args(
        "locomo-retrieval",
        out.path(),
        Some(&server),
        &["--beam", dir.to_str().unwrap()],
    );
    let markdown = crate::locomo_retrieval::run(&a).await.unwrap();
    assert!(
        markdown.starts_with("## BEAM evidence recall"),
        "{markdown}"
    );
    assert!(markdown.contains("floor @10"), "{markdown}");
    assert!(markdown.contains("knowledge_update"), "{markdown}");
    let last = markdown.lines().last().unwrap();
    assert!(
        last.starts_with("beam: overall conversation_search recall@10 = "),
        "{markdown}"
    );
    let s = summary(out.path(), "beam-retrieval");
    assert_eq!(s["family"], "beam");
    assert_eq!(s["skipped"], 0, "abstention questions never enter: {s}");
    let all = s["rows"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(all["questions"], 1);
    // Six messages: two pages of five hold them all, whatever the ranking.
    assert_eq!(all["recall@10"], 1.0, "{all}");
    assert_eq!(s["below_floor"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn locomo_dmr_scores_the_summary_baseline_and_the_agent() {
    let server = FakeOpenAi::start().await;
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let path = locomo_data(data.path());
    let a = args(
        "locomo",
        out.path(),
        Some(&server),
        &["--data", path.to_str().unwrap(), "--limit", "1"],
    );
    // The summary: one fold per session, then the answer from it (wrong).
    server.push_summary("Ann has a puppy.");
    server.push_summary("Ann has a puppy and paints.");
    server.push_summary("I don't know the name.");
    // The agent searches its history and answers.
    server.push_all([
        Reply::call(
            "conversation_search",
            json!({"query": "puppy", "request_heartbeat": true}),
        ),
        Reply::call("send_message", json!({"message": "Rex"})),
    ]);
    crate::locomo::run(&a).await.unwrap();
    let s = summary(out.path(), "locomo");
    let rows = s["rows"].as_array().unwrap();
    let all: Vec<&Value> = rows.iter().filter(|r| r["category"] == "all").collect();
    assert_eq!(
        (all[0]["arm"].as_str(), all[0]["exact"].as_f64()),
        (Some("summary"), Some(0.0))
    );
    assert_eq!(
        (all[1]["arm"].as_str(), all[1]["exact"].as_f64()),
        (Some("memgpt"), Some(1.0))
    );
    assert_eq!(all[1]["f1"], 1.0);
    assert_eq!(all[1]["rouge_l"], 1.0);
    assert_eq!(all[0]["rouge_l"], 0.0);
    // The replayed history was searchable: the search result quoted the first session.
    let last = server.agent_requests().last().unwrap().messages().to_vec();
    assert!(
        last.iter()
            .any(|m| m["role"] == "tool" && m["content"].to_string().contains("puppy named Rex")),
        "{last:?}"
    );
    // The summary fold saw the second session's transcript.
    assert!(
        server.summary_requests()[1]
            .last_content()
            .contains("painting sunsets")
    );
}

#[tokio::test]
async fn opener_scores_similarity_to_earlier_facts_and_the_human_opener() {
    let server = FakeOpenAi::start().await;
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let path = locomo_data(data.path());
    let a = args(
        "opener",
        out.path(),
        Some(&server),
        &["--data", path.to_str().unwrap()],
    );
    server.push(Reply::call(
        "send_message",
        json!({"message": "Hi Ann! How is Rex doing?"}),
    ));
    crate::opener::run(&a).await.unwrap();
    let s = summary(out.path(), "opener");
    assert_eq!(s["errors"], 0);
    // The opener equals the human one: SIM-H is 1 and both rows score the same.
    assert!((s["sim_h"].as_f64().unwrap() - 1.0).abs() < 1e-5, "{s}");
    assert!((s["sim1"].as_f64().unwrap() - s["human_sim1"].as_f64().unwrap()).abs() < 1e-6);
    assert!(s["sim1"].as_f64().unwrap() > 0.0);
    // Only the first session's facts about Ann count (the opener opens session 2).
    let login = &server.agent_requests()[0];
    assert!(
        login
            .messages()
            .iter()
            .any(|m| m["content"].to_string().contains("login"))
    );
}

#[tokio::test]
async fn embeddings_writes_every_text_as_fvecs() {
    use std::io::Write;
    let server = FakeOpenAi::start().await;
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // The data folder layout the command reads: NQ gzipped, LoCoMo as JSON.
    std::fs::create_dir_all(data.path().join("nq_open")).unwrap();
    std::fs::create_dir_all(data.path().join("locomo")).unwrap();
    let nq = std::fs::read(nq_data(data.path())).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(data.path().join("nq_open/nq-open-oracle.jsonl.gz")).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(&nq).unwrap();
    gz.finish().unwrap();
    std::fs::rename(
        locomo_data(data.path()),
        data.path().join("locomo/locomo5_dev.json"),
    )
    .unwrap();
    let a = args(
        "embeddings",
        out.path(),
        Some(&server),
        &["--data", data.path().to_str().unwrap()],
    );
    let report = crate::vectors::run(&a).await.unwrap();
    let count = |name: &str| {
        let bytes = std::fs::read(out.path().join(name)).unwrap();
        let record = 4 + 4 * FAKE_EMBEDDING_DIMENSION;
        assert_eq!(bytes.len() % record, 0, "{name}: whole records");
        assert_eq!(
            &bytes[..4],
            &(FAKE_EMBEDDING_DIMENSION as i32).to_le_bytes()
        );
        bytes.len() / record
    };
    // Base: 3 NQ documents + their 3 sentences, 6 LoCoMo turns, 3 observations.
    assert_eq!(count("real-base.fvecs"), 15, "{report}");
    // Queries: 3 NQ questions + 4 LoCoMo questions.
    assert_eq!(count("real-query.fvecs"), 7, "{report}");
}
