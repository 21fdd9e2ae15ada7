//! The agent inspector in a real browser: headless Chromium (Debian's package) driven over the
//! Chrome DevTools Protocol on a pipe (`--remote-debugging-pipe`: NUL-separated JSON on file
//! descriptors 3 and 4, no WebSocket), against `memgpt serve` on 127.0.0.1 whose LLM is the
//! fake OpenAI server (so replies stream one character per delta). Screenshots go to
//! `target/inspector/` as test artefacts.
//!
//! Without Chromium (`/usr/bin/chromium`, or `MEMGPT_TEST_CHROMIUM`) the test is reported ignored;
//! under `CI=true` it fails instead (`.ci/run` installs Chromium).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use memgpt::llm::LlmProvider;
use memgpt::server::{Server, ServerConfig, ServerTables};
use memgpt::store::Storage;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::fake_openai::{FakeOpenAi, Reply};
use crate::provider;
use crate::server::{ADMIN, Running, start_with};

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("MEMGPT_TEST_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.exists() {
        return Some(path);
    }
    memgpt_test_harness::skip(format!(
        "needs Chromium (none at {}: install Debian's chromium, or set MEMGPT_TEST_CHROMIUM)",
        path.display()
    ))
}

/// Replies to commands by id, and every event, from Chromium's end of the pipe.
type Pending = Arc<Mutex<std::collections::HashMap<u64, oneshot::Sender<Value>>>>;

/// Headless Chromium with one page, driven over the DevTools protocol.
struct Browser {
    child: Child,
    to_browser: std::io::PipeWriter,
    pending: Pending,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
    _events: mpsc::UnboundedReceiver<Value>,
}

impl Browser {
    async fn launch(binary: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // Chromium reads commands from fd 3 and writes replies to fd 4.
        let (commands_read, to_browser) = std::io::pipe().unwrap();
        let (from_browser, replies_write) = std::io::pipe().unwrap();
        let commands_read: OwnedFd = commands_read.into();
        let replies_write: OwnedFd = replies_write.into();
        let (read_fd, write_fd) = (commands_read.as_raw_fd(), replies_write.as_raw_fd());
        let mut command = Command::new(binary);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--mute-audio",
                "--remote-debugging-pipe",
                "about:blank",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (dup2) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::dup2(read_fd, 3) < 0 || libc::dup2(write_fd, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("Chromium starts");
        drop((commands_read, replies_write));

        let pending: Pending = Arc::default();
        let (events_tx, events) = mpsc::unbounded_channel();
        let replies = pending.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from_browser);
            let mut frame = Vec::new();
            while reader.read_until(0, &mut frame).is_ok_and(|n| n > 0) {
                frame.pop_if(|b| *b == 0);
                if let Ok(message) = serde_json::from_slice::<Value>(&frame) {
                    match message["id"].as_u64() {
                        Some(id) => {
                            if let Some(tx) = replies.lock().unwrap().remove(&id) {
                                let _ = tx.send(message);
                            }
                        }
                        None => {
                            let _ = events_tx.send(message);
                        }
                    }
                }
                frame.clear();
            }
        });
        let mut browser = Browser {
            child,
            to_browser,
            pending,
            next_id: 0,
            session: String::new(),
            _profile: profile,
            _events: events,
        };
        let target = browser
            .send(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = browser
            .send(
                None,
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        browser.command("Page.enable", json!({})).await;
        browser.command("Runtime.enable", json!({})).await;
        browser
    }

    async fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to_browser.write_all(&bytes).unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .unwrap_or_else(|_| panic!("{method}: no answer from Chromium in 30 s"))
            .unwrap();
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }

    /// A command to the page.
    async fn command(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(Some(&session), method, params).await
    }

    async fn viewport(&mut self, width: u32, height: u32, mobile: bool) {
        self.command(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
    }

    async fn goto(&mut self, url: &str) {
        self.command("Page.navigate", json!({"url": url})).await;
        self.wait_for("document.readyState === 'complete' && !!window.fetch")
            .await;
    }

    /// Evaluates `expression` in the page (promises awaited) and returns its value.
    async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .command(
                "Runtime.evaluate",
                json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            )
            .await;
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {}",
            result["exceptionDetails"]
        );
        result["result"]["value"].clone()
    }

    /// Waits until `condition` (a JavaScript expression) is true.
    async fn wait_for(&mut self, condition: &str) {
        self.wait_for_within(condition, Duration::from_secs(20))
            .await;
    }

    async fn wait_for_within(&mut self, condition: &str, patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            if self.eval(&format!("Boolean({condition})")).await == json!(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "waited {patience:?} for `{condition}`; page text: {}",
                self.eval("document.body.innerText").await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Types `text` into the focused element as keyboard input would.
    async fn type_into(&mut self, selector: &str, text: &str) {
        self.eval(&format!(
            "(() => {{ const e = document.querySelector({selector:?}); e.focus(); e.value = ''; }})()"
        ))
        .await;
        self.command("Input.insertText", json!({"text": text}))
            .await;
    }

    async fn click(&mut self, selector: &str) {
        self.eval(&format!("document.querySelector({selector:?}).click()"))
            .await;
    }

    /// Chromium at `binary` on the inspector of `base` (1280x800), connected with `key`.
    async fn open_inspector(binary: &Path, base: &str, key: &str) -> Browser {
        let mut browser = Browser::launch(binary).await;
        browser.viewport(1280, 800, false).await;
        browser.goto(base).await;
        browser.type_into("#api-key", key).await;
        browser
            .eval("document.getElementById('key-form').requestSubmit()")
            .await;
        browser
            .wait_for("document.getElementById('status').textContent.startsWith('Connected')")
            .await;
        browser
    }

    /// Creates an agent through the form (with `context_window` tokens, when given) and waits
    /// until the page has it open and selected.
    async fn create_agent(&mut self, name: &str, human: &str, context_window: Option<usize>) {
        self.eval("document.getElementById('new-agent').open = true")
            .await;
        self.type_into("#create-form [name=name]", name).await;
        self.type_into("#create-form [name=human]", human).await;
        if let Some(window) = context_window {
            self.type_into("#create-form [name=context_window]", &window.to_string())
                .await;
        }
        self.eval("document.getElementById('create-form').requestSubmit()")
            .await;
        self.wait_for(&format!(
            "document.getElementById('agent-name').textContent === {name:?}"
        ))
        .await;
        self.wait_for(&format!(
            "document.getElementById('status').textContent === 'Agent {name}'"
        ))
        .await;
        self.wait_for(&format!(
            "document.querySelector('#agent-list button[aria-current=true]')?.textContent === {name:?}"
        ))
        .await;
    }

    async fn screenshot(&mut self, name: &str) -> PathBuf {
        let shot = self
            .command("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/inspector");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server on an ephemeral port with `llm` as its model, and a tenant's key.
async fn serve(llm: Arc<dyn LlmProvider>) -> (Running<()>, String) {
    let server = Server::with_parts(
        Storage::in_memory(),
        ServerTables::in_memory(),
        llm,
        None,
        ServerConfig {
            admin_key: Some(ADMIN.to_owned()),
            ..ServerConfig::default()
        },
    );
    let running = start_with(server, ()).await;
    let key = running.tenant("inspector").await;
    (running, key)
}

/// Create an agent, chat with a streamed reply, refuse a block edit over its limit, watch a
/// flush in the context view, and fit a phone's screen: all through the page, in Chromium.
#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_creates_chats_edits_and_shows_a_flush() {
    let Some(binary) = chromium() else { return };
    let llm = FakeOpenAi::start().await;
    // Every agent turn: a thought, then a reply that echoes a marker; every summary: one line.
    llm.respond_with(|_| {
        Reply::calls(
            "The user wrote; I answer.",
            &[(
                "send_message",
                json!({"message": "Noted, thank you — ☕ soon."}),
            )],
        )
    });
    for i in 0..20 {
        llm.push_summary(&format!("Summary {i}: the user listed facts about foxes."));
    }
    let (server, key) = serve(provider(&llm)).await;
    let base = &server.base;
    // The key, once.
    let mut browser = Browser::open_inspector(&binary, base, &key).await;

    // The form suggests every built-in policy, and only policies that exist.
    let suggested: Vec<String> = serde_json::from_value(
        browser
            .eval("[...document.querySelectorAll('#policies option')].map(o => o.value)")
            .await,
    )
    .unwrap();
    for name in ["paper", "lru", "attention", "salience"] {
        assert!(suggested.iter().any(|s| s == name), "{suggested:?}");
    }
    for name in &suggested {
        assert!(memgpt::queue::policy_by_name(name).is_ok(), "{name}");
    }

    // Create an agent through the form: a small window, so a few long messages flush.
    browser.create_agent("ada", "Name: Ada.", Some(4000)).await;

    // A message: the reply streams into a live element, then the final message replaces it.
    browser.type_into("#message", "Hello there!").await;
    browser.click("#send").await;
    browser
        .wait_for("[...document.querySelectorAll('#chat-log .msg-reply')].some(e => e.textContent.includes('Noted, thank you — ☕ soon.'))")
        .await;
    browser
        .wait_for("document.getElementById('chat-log').dataset.steps === '1'")
        .await;
    let log = browser
        .eval("[...document.querySelectorAll('#chat-log li')].map(e => e.className.split(' ')[0] + ': ' + e.textContent)")
        .await;
    let log: Vec<String> = serde_json::from_value(log).unwrap();
    assert!(
        log.iter()
            .any(|l| l.starts_with("msg-user") && l.contains("Hello there!")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.starts_with("msg-monologue") && l.contains("I answer")),
        "{log:?}"
    );
    // The reply was streamed: the server sent reply_delta events the page appended.
    let streamed = llm
        .agent_requests()
        .iter()
        .any(|r| r.body["stream"] == json!(true));
    assert!(streamed, "the inspector asks for a streamed step");
    browser.screenshot("chat").await;

    // Memory: an edit over the block's limit is refused with the API's error, shown in place.
    browser.click("#tab-memory").await;
    browser
        .wait_for("!!document.querySelector('#block-human')")
        .await;
    let limit: usize = browser
        .eval("Number(document.querySelector('#block-human-count').textContent.split('/')[1].replace(/[^0-9]/g, ''))")
        .await
        .as_u64()
        .unwrap() as usize;
    browser
        .type_into("#block-human", &"x".repeat(limit + 10))
        .await;
    browser
        .wait_for("document.querySelector('#block-human-count').classList.contains('over')")
        .await;
    browser.click("[data-block=human] button").await;
    browser
        .wait_for("document.querySelector('#block-human-error').textContent.length > 0")
        .await;
    let error = browser
        .eval("document.querySelector('#block-human-error').textContent")
        .await;
    assert!(
        error.as_str().unwrap().contains("limit"),
        "the refusal names the limit: {error}"
    );
    browser.screenshot("memory-over-limit").await;
    // A valid edit saves.
    browser
        .type_into("#block-human", "Name: Ada. Likes foxes.")
        .await;
    browser.click("[data-block=human] button").await;
    browser
        .wait_for("document.getElementById('status').textContent === 'Saved human'")
        .await;
    // A shared block attached to the agent shows as one, saying who sees an edit.
    let (_, agents) = server.get("/v1/agents", &key).await;
    let agent = agents["agents"][0]["id"].as_str().unwrap().to_owned();
    let (_, block) = server
        .post(
            "/v1/blocks",
            &key,
            json!({"label": "team", "value": "Ada, Grace"}),
        )
        .await;
    let block = block["id"].as_str().unwrap().to_owned();
    let (status, _) = server
        .post(
            &format!("/v1/agents/{agent}/blocks/{block}"),
            &key,
            json!({}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK);
    // Saving a block reloads the view.
    browser.click("[data-block=human] button").await;
    browser
        .wait_for("!!document.querySelector('[data-block=team] .shared')")
        .await;
    let note = browser
        .eval("document.querySelector('[data-block=team] .shared').textContent")
        .await;
    assert!(note.as_str().unwrap().contains(&block), "{note}");

    // Long messages until a flush: the chat shows it, the context view shows the summary,
    // the bar and the lines, and the prompt rows carry the policy's signals.
    browser.click("#tab-chat").await;
    let fact = "the quick brown fox jumps over the lazy dog ".repeat(20);
    let mut flushed = false;
    for i in 0..12 {
        browser
            .type_into("#message", &format!("Fact {i}: {fact}"))
            .await;
        browser.click("#send").await;
        browser
            .wait_for(&format!(
                "document.getElementById('chat-log').dataset.steps === '{}' && !document.getElementById('send').disabled",
                i + 2
            ))
            .await;
        if browser
            .eval("!!document.querySelector('#chat-log .msg-flush')")
            .await
            == json!(true)
        {
            flushed = true;
            break;
        }
    }
    assert!(
        flushed,
        "a 4,000-token window flushes within 12 long messages"
    );
    assert_eq!(
        browser
            .eval("!!document.querySelector('#chat-log .msg-warning')")
            .await,
        json!(true),
        "the memory-pressure warning came first"
    );
    browser.click("#tab-context").await;
    browser
        .wait_for("document.getElementById('summary-text').textContent.startsWith('Summary')")
        .await;
    let view = browser
        .eval(
            "({ caption: document.getElementById('window-caption').textContent,
                lines: document.querySelectorAll('#window-bar .line').length,
                segments: document.querySelectorAll('#window-bar .seg').length,
                rows: document.querySelectorAll('#prompt-rows tr').length,
                signals: [...document.querySelectorAll('#prompt-rows td.signals')].map(e => e.textContent).filter(t => t.startsWith('uses')).length,
                note: document.getElementById('paging-note').textContent })",
        )
        .await;
    assert_eq!(view["lines"], json!(2), "warning and flush lines: {view}");
    assert_eq!(view["segments"], json!(5), "{view}");
    assert!(view["rows"].as_u64().unwrap() >= 2, "{view}");
    // The system message, the recursive summary (there was a flush), then the queue: every
    // queued message with its signals.
    assert_eq!(
        view["signals"].as_u64().unwrap() + 2,
        view["rows"].as_u64().unwrap(),
        "every queued message shows its signals: {view}"
    );
    assert_eq!(
        browser
            .eval(
                "document.querySelector('#prompt-rows tr:nth-child(2) td:nth-child(2)').textContent"
            )
            .await,
        json!("user (summary)"),
    );
    assert!(
        view["note"].as_str().unwrap().starts_with("Policy paper"),
        "{view}"
    );
    assert!(
        view["caption"].as_str().unwrap().contains("tokens in use"),
        "{view}"
    );
    browser.screenshot("context-after-flush").await;

    // Keyboard: the tabs move with the arrow keys.
    browser
        .eval("document.getElementById('tab-context').focus()")
        .await;
    browser
        .command(
            "Input.dispatchKeyEvent",
            json!({"type": "keyDown", "key": "ArrowRight", "code": "ArrowRight", "windowsVirtualKeyCode": 39}),
        )
        .await;
    browser
        .wait_for("document.activeElement.id === 'tab-memory' && !document.getElementById('panel-memory').hidden")
        .await;

    // The summary history names what the flush evicted, and recall shows exactly those messages.
    let flush = browser
        .eval(
            "({ entries: document.querySelectorAll('#flush-log li button').length,
                head: document.querySelector('#flush-log li .score').textContent,
                text: document.querySelector('#flush-log li div').textContent })",
        )
        .await;
    assert_eq!(flush["entries"], json!(1), "{flush}");
    assert!(
        flush["text"].as_str().unwrap().starts_with("Summary 0"),
        "{flush}"
    );
    let evicted: u64 = flush["head"]
        .as_str()
        .and_then(|h| h.split(": ").nth(1))
        .and_then(|h| h.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no evicted count in {flush}"));
    assert!(evicted > 0, "{flush}");
    browser.click("#flush-log li button").await;
    browser
        .wait_for(&format!(
            "!document.getElementById('panel-recall').hidden && document.getElementById('recall-note').textContent.startsWith('{evicted} messages evicted')"
        ))
        .await;
    assert_eq!(
        browser
            .eval("document.querySelectorAll('#recall-results li').length")
            .await,
        json!(evicted)
    );
    browser.screenshot("recall-evicted").await;

    // A phone's viewport: nothing wider than the screen.
    browser.viewport(390, 844, true).await;
    browser.click("#tab-chat").await;
    let overflow = browser
        .eval("document.documentElement.scrollWidth - window.innerWidth")
        .await;
    assert!(overflow.as_i64().unwrap() <= 0, "overflow {overflow}");
    browser.screenshot("phone").await;

    // No request left the server: every resource the page loaded came from it.
    let foreign = browser
        .eval(&format!(
            "performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith({base:?}))"
        ))
        .await;
    assert_eq!(foreign, json!([]), "external requests: {foreign}");
}

/// The same page against a real model: the local SmolLM2 under the function-call grammar
/// (greedy, one thread), served as `memgpt serve --provider local` serves it.
#[cfg(feature = "local")]
#[memgpt_test_harness::test]
async fn the_inspector_chats_with_a_real_local_model() {
    use memgpt::local::{LlamaConfig, LlamaProvider};
    use memgpt::models::SMOLLM2_135M_INSTRUCT;

    let Some(binary) = chromium() else { return };
    let Some(dir) = crate::local::model_dir(&SMOLLM2_135M_INSTRUCT) else {
        return;
    };
    let model = LlamaProvider::new(
        LlamaConfig::new(dir.join("model.gguf"))
            .with_threads(1)
            .with_max_tokens(128),
    )
    .expect("the model loads");
    let (server, key) = serve(Arc::new(model)).await;
    let mut browser = Browser::open_inspector(&binary, &server.base, &key).await;
    browser.create_agent("sam", "Name: Chad.", None).await;

    browser
        .type_into("#message", "Hi! I just adopted a cat called Miso.")
        .await;
    browser.click("#send").await;
    browser
        .wait_for_within(
            "document.getElementById('chat-log').dataset.steps === '1' && !document.getElementById('send').disabled",
            Duration::from_secs(600),
        )
        .await;
    // Whatever the small model says, the step shows as the page renders every step: the user's
    // message, then at least one function call (the grammar allows nothing else), and a status.
    let seen = browser
        .eval(
            "({ user: document.querySelectorAll('#chat-log .msg-user').length,
                model: document.querySelectorAll('#chat-log .msg-reply, #chat-log .msg-call').length,
                status: document.getElementById('status').textContent })",
        )
        .await;
    assert_eq!(seen["user"], json!(1), "{seen}");
    assert!(seen["model"].as_u64().unwrap() >= 1, "{seen}");
    assert!(
        seen["status"].as_str().unwrap().starts_with("Step done"),
        "{seen}"
    );
    // The context view shows the real prompt: system message, then the queue with the turn.
    browser.click("#tab-context").await;
    browser
        .wait_for("document.querySelectorAll('#prompt-rows tr').length >= 3")
        .await;
    browser.screenshot("local-model-context").await;
}
