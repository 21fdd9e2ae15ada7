//! The `memgpt` binary end to end: scripted stdin, the fake OpenAI server on 127.0.0.1, a data
//! directory of its own per test.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::fake_openai::{FakeOpenAi, Reply};

struct Cli {
    dir: tempfile::TempDir,
    server: FakeOpenAi,
}

impl Cli {
    async fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            server: FakeOpenAi::start().await,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `memgpt ARGS` against the fake server, in the test's folder, without colours or local
    /// models.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_memgpt"));
        command
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("MEMGPT_BASE_URL", self.server.base_url())
            .env("MEMGPT_MODEL", "gpt-4o-mini")
            .env("MEMGPT_EMBEDDER", "none")
            .env("MEMGPT_HOME", self.path("home"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    async fn run(&self, args: &[&str], stdin: &str) -> Output {
        run(self.command(args), stdin).await
    }

    /// Runs and insists on success; returns stdout.
    async fn ok(&self, args: &[&str], stdin: &str) -> String {
        let output = self.run(args, stdin).await;
        let (out, err) = text(&output);
        assert!(
            output.status.success(),
            "memgpt {args:?} failed\nstdout:\n{out}\nstderr:\n{err}"
        );
        out
    }
}

async fn run(mut command: Command, stdin: &str) -> Output {
    let mut child = command.spawn().expect("the memgpt binary");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("memgpt finished")
        .unwrap()
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn say(message: &str) -> Reply {
    Reply::call("send_message", json!({ "message": message }))
}

#[memgpt_test_harness::test]
async fn chat_with_slash_commands_resumes_after_a_restart() {
    let cli = Cli::new().await;
    cli.server.push(say("Nice to meet you, Ann!"));
    cli.server.push(say("Two lines, got it."));
    let out = cli
        .ok(
            &["chat"],
            "Hi, I'm Ann\n/memory\n/context\n/recall Ann\n/archival anything\n/policy lru\n/policy\n/summary\n/model\n/help\n/bogus\nsecond \\\nline\n/exit\n",
        )
        .await;
    assert!(out.contains("created agent sam"), "{out}");
    assert!(out.contains("sam> Nice to meet you, Ann!"), "{out}");
    assert!(
        out.contains("[persona]") && out.contains("/2000 chars"),
        "{out}"
    );
    assert!(
        out.contains("queue") && out.contains("'|' = memory-pressure warning at 70%"),
        "{out}"
    );
    assert!(
        out.contains("Hi, I'm Ann"),
        "/recall shows the message: {out}"
    );
    assert!(out.contains("policy: lru (saved)"), "{out}");
    assert!(out.contains("no summary yet"), "{out}");
    assert!(out.contains("model gpt-4o-mini at"), "{out}");
    assert!(out.contains("/archival QUERY"), "/help: {out}");
    assert!(out.contains("unknown command /bogus"), "{out}");
    // The continued line reached the model as one message.
    let last = cli.server.agent_requests().last().unwrap().last_content();
    assert!(last.contains("second \\nline"), "{last}");

    // A new process resumes the agent: same memory, same history, the policy it was given.
    cli.server.respond_with(|_| say("You are Ann."));
    let out = cli.ok(&["chat"], "What's my name?\n").await;
    assert!(out.contains("resumed agent sam"), "{out}");
    assert!(out.contains("sam> You are Ann."), "{out}");
    let prompt =
        serde_json::to_string(cli.server.agent_requests().last().unwrap().messages()).unwrap();
    assert!(
        prompt.contains("Hi, I'm Ann"),
        "the history is back in context: {prompt}"
    );
    let list = cli.ok(&["agents", "list"], "").await;
    assert!(list.contains("sam") && list.contains("lru"), "{list}");
}

#[memgpt_test_harness::test]
async fn ctrl_c_cancels_a_step_and_keeps_the_last_committed_state() {
    let cli = Cli::new().await;
    cli.server
        .push(say("too late").delayed(Duration::from_secs(30)));
    let mut child = cli.command(&["chat"]).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"Hello there\n").await.unwrap();
    // Wait until the step is waiting on the model, then interrupt it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while cli.server.agent_requests().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the step never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().unwrap() as i32;
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stdin.write_all(b"/exit\n").await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    assert!(
        out.contains("(cancelled: the agent is at its last committed state)"),
        "{out}"
    );
    assert!(!out.contains("too late"), "{out}");
    let show = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(
        show.contains("recall     0 messages"),
        "nothing of the cancelled step was stored: {show}"
    );
}

/// A one-page PDF whose text is `line` (Helvetica, WinAnsi), with a correct cross-reference table.
fn pdf(line: &str) -> Vec<u8> {
    let stream = format!("BT /F1 12 Tf 72 720 Td ({line}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>".to_owned(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_owned(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend(format!("{} 0 obj\n{object}\nendobj\n", i + 1).bytes());
    }
    let xref = out.len();
    out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).bytes());
    for offset in offsets {
        out.extend(format!("{offset:010} 00000 n \n").bytes());
    }
    out.extend(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .bytes(),
    );
    out
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[memgpt_test_harness::test]
async fn ingest_reads_a_tree_once_and_the_agent_finds_it() {
    let cli = Cli::new().await;
    cli.ok(&["chat"], "/exit\n").await;
    let docs = cli.path("docs");
    write(
        &docs.join("notes.md"),
        b"# Garden\n\nThe kiwi vines need pruning in February.\n\nWater the figs weekly.",
    );
    write(
        &docs.join("sub/page.html"),
        b"<html><head><style>p{}</style></head><body><h1>Trip</h1><p>The ferry to Lindau leaves at nine.</p></body></html>",
    );
    write(
        &docs.join("sub/deep/manual.pdf"),
        &pdf("The boiler pressure must stay below two bar."),
    );
    write(&docs.join("image.bin"), &[0, 1, 2, 255]);

    let out = cli.ok(&["ingest", "--agent", "sam", "docs"], "").await;
    assert!(out.contains("ingested 3 files into sam"), "{out}");
    assert!(out.contains("0 already ingested"), "{out}");
    let again = cli.ok(&["ingest", "--agent", "sam", "docs"], "").await;
    assert!(again.contains(": 0 new chunks"), "{again}");
    assert!(again.contains("3 already ingested"), "{again}");
    let show = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(show.contains("archival   3 passages"), "{show}");

    let out = cli
        .ok(
            &["chat"],
            "/archival boiler pressure\n/archival ferry Lindau\n/archival kiwi pruning\n",
        )
        .await;
    for expected in ["two bar", "ferry to Lindau", "kiwi vines"] {
        assert!(out.contains(expected), "{expected}: {out}");
    }

    // A broken file: one clear line, the others still go in.
    write(&cli.path("bad/broken.pdf"), b"%PDF-1.4 this is not a pdf");
    write(
        &cli.path("bad/ok.txt"),
        b"Plain text about the lighthouse keeper.",
    );
    let output = cli.run(&["ingest", "--agent", "sam", "bad"], "").await;
    let (out, err) = text(&output);
    assert!(!output.status.success());
    assert!(
        out.contains("broken.pdf: not a readable PDF")
            || err.contains("broken.pdf: not a readable PDF"),
        "{out}\n{err}"
    );
    assert!(
        err.lines().filter(|l| l.starts_with("memgpt:")).count() == 1,
        "{err}"
    );
    let show = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(
        show.contains("archival   4 passages"),
        "the good file went in: {show}"
    );
}

fn normalized(path: &Path, rename: Option<(&str, &str)>) -> Value {
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["created_at"] = Value::Null;
    if let Some((from, to)) = rename {
        assert_eq!(file["agents"][0]["name"], from);
        file["agents"][0]["name"] = json!(to);
    }
    file
}

#[memgpt_test_harness::test]
async fn agents_export_import_round_trip_and_letta_files() {
    let cli = Cli::new().await;
    cli.server.push(say("Hello Ann."));
    cli.ok(&["chat"], "I am Ann and I keep bees.\n").await;
    cli.ok(&["agents", "export", "sam", "-o", "sam.af"], "")
        .await;
    let out = cli
        .ok(&["agents", "import", "sam.af", "--name", "copy"], "")
        .await;
    assert!(out.contains("imported agent copy (3 messages"), "{out}");
    cli.ok(&["agents", "export", "copy", "-o", "copy.af"], "")
        .await;
    assert_eq!(
        normalized(&cli.path("sam.af"), None),
        normalized(&cli.path("copy.af"), Some(("copy", "sam")))
    );

    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("memgpt-core/src/agent_file/testdata/letta_v2.af");
    let out = cli
        .ok(&["agents", "import", fixture.to_str().unwrap()], "")
        .await;
    assert!(
        out.contains("imported agent letta_helper (5 messages, 0 passages, 2 blocks, 0 skills)"),
        "{out}"
    );
    assert!(out.contains("not imported: tool `roll_d20`"), "{out}");
    let context = cli.ok(&["context", "letta_helper"], "").await;
    assert!(
        context.contains("My sister Maya is visiting from Lisbon"),
        "{context}"
    );
    assert!(context.contains("===== functions"), "{context}");
    assert!(context.contains("tokens"), "{context}");

    // A Letta file with skills: the import counts them, `agents show` lists them.
    let ezra =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/letta/agent-file/ezra.af.gz");
    let mut ezra_file = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(ezra).unwrap()),
        &mut ezra_file,
    )
    .unwrap();
    write(&cli.path("ezra.af"), ezra_file.as_bytes());
    let out = cli.ok(&["agents", "import", "ezra.af"], "").await;
    assert!(out.contains("blocks, 4 skills)"), "{out}");
    let show = cli.ok(&["agents", "show", "ezra-super"], "").await;
    assert!(show.contains("skills     4"), "{show}");
    assert!(
        show.contains("verify-claims (5 files): Verify factual claims"),
        "{show}"
    );
    cli.ok(&["agents", "delete", "ezra-super"], "").await;

    // Bad files: one clear line each, nothing imported.
    write(&cli.path("garbage.af"), b"this is not json");
    write(
        &cli.path("old.af"),
        br#"{"name": "a v1 file", "memory": {}}"#,
    );
    for (file, expected) in [
        ("garbage.af", "is not an agent file"),
        ("old.af", "schema-v2"),
        ("missing.af", "reading missing.af"),
        ("sam.af", "already exists"),
    ] {
        let output = cli.run(&["agents", "import", file], "").await;
        let (_, err) = text(&output);
        assert!(!output.status.success(), "{file}");
        assert_eq!(err.lines().count(), 1, "{file}: {err}");
        assert!(
            err.starts_with("memgpt: ") && err.contains(expected),
            "{file}: {err}"
        );
    }
    let list = cli.ok(&["agents", "list"], "").await;
    assert_eq!(
        list.lines().count(),
        4,
        "header + sam, copy, letta_helper: {list}"
    );
    let deleted = cli.ok(&["agents", "delete", "copy"], "").await;
    assert!(deleted.contains("deleted agent copy"), "{deleted}");
}

#[memgpt_test_harness::test]
async fn configuration_layers_and_missing_models() {
    let cli = Cli::new().await;
    write(
        &cli.path("memgpt.toml"),
        b"model = \"from-file\"\npolicy = \"lru\"\ncontext_window = 16000\n",
    );
    let mut command = cli.command(&["config", "--policy", "attention"]);
    command.env("MEMGPT_API_KEY", "sk-test-abcdefghijkl1234");
    let output = run(command, "").await;
    let (out, _) = text(&output);
    assert!(
        out.contains("model           = gpt-4o-mini  [$MEMGPT_MODEL]"),
        "{out}"
    );
    assert!(out.contains("policy          = attention  [flag]"), "{out}");
    assert!(
        out.contains("context_window  = 16000  [memgpt.toml]"),
        "{out}"
    );
    assert!(
        out.contains("sk-t…1234") && !out.contains("abcdefghijkl"),
        "{out}"
    );
    // `provider` and `embedder` show what will actually run, and why.
    assert!(
        out.contains("provider        = openai: gpt-4o-mini at http://127.0.0.1:")
            && out.contains("(auto: an endpoint or API key is set)  [default]"),
        "{out}"
    );
    assert!(
        out.contains("embedder        = none (embedder = none: searches match words only)  [$MEMGPT_EMBEDDER]"),
        "{out}"
    );
    // `auto` without the local model in the model cache: none, with the way to get one; the
    // same whichever provider runs.
    for provider in [None, Some("anthropic"), Some("local")] {
        let mut command = cli.command(&["config"]);
        command.env_remove("MEMGPT_EMBEDDER");
        if let Some(provider) = provider {
            command.env("MEMGPT_PROVIDER", provider);
        }
        let (out, err) = text(&run(command, "").await);
        let embedder = out
            .lines()
            .find(|l| l.starts_with("embedder "))
            .unwrap_or_default();
        match provider {
            // The all-local chat pulls it on first use.
            Some("local") => assert_eq!(
                embedder,
                "embedder        = all-minilm-l6-v2 (local, auto; not downloaded yet: pulled on first use)  [default]",
                "{out}\n{err}"
            ),
            _ => assert_eq!(
                embedder,
                "embedder        = none (auto: all-minilm-l6-v2 is not in the model cache; `memgpt models pull all-minilm-l6-v2` to embed)  [default]",
                "{out}\n{err}"
            ),
        }
    }
    let mut command = cli.command(&["config", "--embedder", "openai:text-embedding-3-small"]);
    command.env("MEMGPT_PROVIDER", "anthropic");
    let (out, _) = text(&run(command, "").await);
    assert!(
        out.contains("embedder        = (cannot run: embedder `openai:text-embedding-3-small` needs an OpenAI-compatible endpoint"),
        "{out}"
    );
    let out = cli
        .ok(
            &["config", "--embedder", "openai:text-embedding-3-small"],
            "",
        )
        .await;
    assert!(
        out.contains("embedder        = openai:text-embedding-3-small at http://127.0.0.1:"),
        "{out}"
    );

    write(&cli.path("memgpt.toml"), b"modle = \"typo\"\n");
    let output = cli.run(&["config"], "").await;
    let (_, err) = text(&output);
    assert!(err.contains("unknown setting `modle`"), "{err}");
    std::fs::remove_file(cli.path("memgpt.toml")).unwrap();

    let output = cli
        .run(&["chat", "--loop-style", "sideways"], "hello\n")
        .await;
    let (out, err) = text(&output);
    assert!(!output.status.success(), "{out}\n{err}");
    assert!(
        err.contains("unknown loop_style `sideways` (heartbeat or until_reply)"),
        "{err}"
    );

    // No endpoint, no local model, not a terminal, no --yes: the how-to, and a failure.
    let mut command = cli.command(&["chat"]);
    command.env_remove("MEMGPT_BASE_URL");
    let output = run(command, "hello\n").await;
    let (out, err) = text(&output);
    assert!(!output.status.success(), "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("No LLM is configured"),
        "{out}\n{err}"
    );
}

#[memgpt_test_harness::test]
async fn an_interrupted_ingest_resumes_without_duplicates() {
    let cli = Cli::new().await;
    let with_endpoint_embedder = |args: &[&str]| {
        let mut command = cli.command(args);
        command.env("MEMGPT_EMBEDDER", "openai:text-embedding-3-small");
        command
    };
    let succeeds = |output: Output| {
        let (out, err) = text(&output);
        assert!(output.status.success(), "{out}\n{err}");
        out
    };
    succeeds(run(with_endpoint_embedder(&["chat"]), "/exit\n").await);
    // About a million tokens: thousands of chunks, embedded 32 at a time by an endpoint that
    // takes 30 ms per request, so the ingest lasts seconds whatever the machine and the
    // interrupt lands mid-file.
    let words = [
        "orchard", "harbour", "violin", "granite", "lantern", "meadow", "compass",
    ];
    cli.server.delay_embeddings(Duration::from_millis(30));
    let big: String = (0..50_000)
        .map(|i| {
            format!(
                "Sentence {i} mentions the {} and the {} near milestone {}.\n",
                words[i % 7],
                words[(i / 7) % 7],
                i * 3
            )
        })
        .collect();
    write(&cli.path("big.txt"), big.as_bytes());

    let mut interruptible = with_endpoint_embedder(&["ingest", "--agent", "sam", "big.txt"]);
    // A user's Ctrl-C meets the default disposition; a test run from a background job inherits
    // SIGINT ignored, which would let the ingest run to its end.
    // SAFETY: `signal` is async-signal-safe, as code between fork and exec must be.
    unsafe {
        interruptible.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = interruptible.spawn().unwrap();
    let db = cli.path("memgpt-data");
    // Interrupt once some batches are committed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    // While ingest holds the embedded indexes, another writing process is refused clearly
    // (readers such as `agents show` work alongside).
    let busy = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "ingest never opened the store"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let output = cli.run(&["chat", "--agent", "sam"], "").await;
        if !output.status.success() {
            break text(&output).1;
        }
    };
    assert!(busy.contains("in use by another memgpt process"), "{busy}");
    // Watch the SQLite rows alone (WAL readers do not block the writer).
    let url = format!("sqlite://{}?recall=fts5&vectors=exact", db.display());
    let storage = url
        .parse::<memgpt::StoreConfig>()
        .unwrap()
        .open()
        .await
        .unwrap();
    let agent = storage.agents.list_agents().await.unwrap()[0].id;
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "ingest never committed a batch"
        );
        if storage.archival.count_passages(agent).await.unwrap() >= 64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(storage);
    // SAFETY: sending a signal to our own child process.
    assert_eq!(
        unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGINT) },
        0
    );
    let status = child.wait().await.unwrap();
    assert!(!status.success(), "the interrupt stopped the ingest");
    assert!(db.exists());

    let ingest = || with_endpoint_embedder(&["ingest", "--agent", "sam", "big.txt"]);
    let out = succeeds(run(ingest(), "").await);
    assert!(out.contains("ingested 1 files"), "{out}");
    let again = succeeds(run(ingest(), "").await);
    assert!(
        again.contains(": 0 new chunks") && again.contains("1 already ingested"),
        "{again}"
    );

    // Every chunk exactly once.
    cli.ok(&["agents", "export", "sam", "-o", "sam.af"], "")
        .await;
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(cli.path("sam.af")).unwrap()).unwrap();
    let passages = file["memgpt"]["agents"][0]["passages"].as_array().unwrap();
    let total = passages[0]["metadata"]["chunks"].as_u64().unwrap() as usize;
    let mut seen = vec![0u32; total];
    for p in passages {
        seen[p["metadata"]["chunk"].as_u64().unwrap() as usize] += 1;
    }
    assert!(total > 1_000, "{total} chunks");
    assert!(
        seen.iter().all(|&n| n == 1),
        "chunks stored other than once: {:?}",
        seen.iter()
            .enumerate()
            .filter(|(_, n)| **n != 1)
            .take(5)
            .collect::<Vec<_>>()
    );
    assert_eq!(passages.len(), total);
}

/// `tmux` on a private socket, for driving the chat in a real terminal.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let output = std::process::Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "chat", "-S", "-200"])
    }

    async fn wait_for(&self, what: &str, count: usize) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if screen.matches(what).count() >= count {
                return screen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "waiting for {what:?} x{count}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

#[memgpt_test_harness::test]
async fn the_line_editor_completes_recalls_history_and_leaves_on_ctrl_d() {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        memgpt_test_harness::skip("needs tmux (Debian's package; .ci/run installs it)");
    }
    let cli = Cli::new().await;
    let tmux = Tmux {
        socket: format!("memgpt-test-{}", std::process::id()),
    };
    let home = cli.path("home");
    let env = [
        format!("MEMGPT_BASE_URL={}", cli.server.base_url()),
        "MEMGPT_MODEL=gpt-4o-mini".to_owned(),
        "MEMGPT_EMBEDDER=none".to_owned(),
        format!("MEMGPT_HOME={}", home.display()),
        "NO_COLOR=1".to_owned(),
    ];
    let mut args = vec![
        "new-session",
        "-d",
        "-s",
        "chat",
        "-x",
        "160",
        "-y",
        "50",
        "-c",
    ];
    let dir = cli.dir.path().display().to_string();
    args.push(&dir);
    for e in &env {
        args.extend(["-e", e.as_str()]);
    }
    let command = format!(
        "{} chat; echo EXITED $?; sleep 60",
        env!("CARGO_BIN_EXE_memgpt")
    );
    args.push(&command);
    tmux.run(&args);
    tmux.wait_for("you>", 1).await;

    // Tab completes a slash command.
    tmux.run(&["send-keys", "-t", "chat", "/mem", "Tab", "Enter"]);
    tmux.wait_for("[persona]", 1).await;
    tmux.run(&["send-keys", "-t", "chat", "/model", "Enter"]);
    tmux.wait_for("model gpt-4o-mini at", 1).await;
    // Up twice recalls /memory from the history.
    tmux.run(&["send-keys", "-t", "chat", "Up", "Up", "Enter"]);
    tmux.wait_for("[persona]", 2).await;
    // Ctrl-D at an empty prompt leaves cleanly.
    tmux.run(&["send-keys", "-t", "chat", "C-d"]);
    let screen = tmux.wait_for("EXITED", 1).await;
    assert!(screen.contains("EXITED 0"), "{screen}");
    assert!(cli.path("memgpt-data/history.txt").exists());
}

#[memgpt_test_harness::test]
async fn ingest_embeds_through_the_endpoint_when_told_to() {
    let cli = Cli::new().await;
    let with_endpoint_embedder = |args: &[&str]| {
        let mut command = cli.command(args);
        command.env("MEMGPT_EMBEDDER", "openai:text-embedding-3-small");
        command
    };
    let output = run(with_endpoint_embedder(&["chat"]), "/exit\n").await;
    assert!(output.status.success(), "{:?}", text(&output));
    write(
        &cli.path("notes.md"),
        b"The lighthouse keeper feeds the gulls at dawn.",
    );
    let output = run(
        with_endpoint_embedder(&["ingest", "--agent", "sam", "notes.md"]),
        "",
    )
    .await;
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    let show = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(
        show.contains("embeddings text-embedding-3-small"),
        "passages are embedded: {show}"
    );
}

/// The README's first command: no endpoint, no key, `chat --yes` on the local models (here
/// the test model cache stands in for the download, which `models.rs` tests on its own).
#[memgpt_test_harness::test]
async fn chat_runs_offline_on_the_local_models() {
    use memgpt::models::{ALL_MINILM_L6_V2, SMOLLM2_135M_INSTRUCT};
    let Some(model) = crate::local::model_dir(&SMOLLM2_135M_INSTRUCT) else {
        return;
    };
    let cli = Cli::new().await;
    assert!(crate::local::model_dir(&ALL_MINILM_L6_V2).is_some());
    let cache = model.parent().unwrap();
    std::fs::create_dir_all(cli.path("home")).unwrap();
    std::os::unix::fs::symlink(cache, cli.path("home/models")).unwrap();

    let mut command = cli.command(&["chat", "--yes", "--agent", "ada"]);
    command
        .env_remove("MEMGPT_BASE_URL")
        .env_remove("MEMGPT_MODEL")
        .env_remove("MEMGPT_EMBEDDER");
    let output = run(command, "Hi! I'm Ada and I love sailing.\n/exit\n").await;
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    assert!(
        out.contains("local model smollm2-135m-instruct")
            && out.contains("with the local embedder all-minilm-l6-v2, offline"),
        "{out}"
    );
    // The model answered with valid calls: no provider error, no invalid call.
    assert!(
        !format!("{out}{err}").contains("could not be reached"),
        "{out}\n{err}"
    );
    assert!(
        !format!("{out}{err}").contains("__invalid_reply"),
        "{out}\n{err}"
    );
    // The step was committed: the user's message is in recall, with the model's reply.
    let list = cli.ok(&["agents", "list"], "").await;
    let row = list.lines().find(|l| l.starts_with("ada ")).unwrap();
    let messages: usize = row.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(messages >= 2, "{list}");
}

/// Switching embedders: the store remembers which model its vectors come from, `auto` follows
/// it, another model is refused with the way out, and `memgpt reindex --embedder NAME`
/// re-embeds messages and passages in place.
#[memgpt_test_harness::test]
async fn models_and_reindex_switch_a_store_to_another_embedder() {
    use memgpt::models::{ALL_MINILM_L6_V2, ALL_MPNET_BASE_V2};
    let Some(mini) = crate::local::model_dir(&ALL_MINILM_L6_V2) else {
        return;
    };
    assert!(crate::local::model_dir(&ALL_MPNET_BASE_V2).is_some());
    let cli = Cli::new().await;
    std::fs::create_dir_all(cli.path("home")).unwrap();
    std::os::unix::fs::symlink(mini.parent().unwrap(), cli.path("home/models")).unwrap();
    let with = |embedder: Option<&str>, args: &[&str]| {
        let mut command = cli.command(args);
        match embedder {
            Some(name) => command.env("MEMGPT_EMBEDDER", name),
            None => command.env_remove("MEMGPT_EMBEDDER"),
        };
        command
    };

    let list = cli.ok(&["models", "list"], "").await;
    for name in [
        "all-minilm-l6-v2",
        "all-mpnet-base-v2",
        "smollm2-135m-instruct",
    ] {
        let row = list.lines().find(|l| l.contains(name)).unwrap_or_default();
        assert!(row.contains("present"), "{list}");
    }
    let verify = cli.ok(&["models", "verify", "all-minilm-l6-v2"], "").await;
    assert!(
        verify.contains("every file matches its SHA-256"),
        "{verify}"
    );
    let unknown = cli.run(&["models", "pull", "gpt-5"], "").await;
    assert!(!unknown.status.success());
    assert!(
        text(&unknown).1.contains("all-mpnet-base-v2"),
        "{:?}",
        text(&unknown)
    );

    // A store built with the light model.
    cli.server.push(say("Sailing is lovely."));
    let output = run(
        with(Some("all-minilm-l6-v2"), &["chat", "--agent", "ada"]),
        "I love sailing on the lake.\n/exit\n",
    )
    .await;
    assert!(output.status.success(), "{:?}", text(&output));
    write(
        &cli.path("notes.md"),
        b"The lighthouse keeper feeds the gulls at dawn.",
    );
    let output = run(
        with(
            Some("all-minilm-l6-v2"),
            &["ingest", "--agent", "ada", "notes.md"],
        ),
        "",
    )
    .await;
    assert!(output.status.success(), "{:?}", text(&output));

    // Another model is refused before anything is written, with the way out.
    let output = run(
        with(Some("all-mpnet-base-v2"), &["chat", "--agent", "ada"]),
        "/exit\n",
    )
    .await;
    let (_, err) = text(&output);
    assert!(!output.status.success());
    assert!(
        err.contains("all-minilm-l6-v2")
            && err.contains("memgpt reindex --embedder all-mpnet-base-v2"),
        "{err}"
    );

    let out = cli
        .ok(&["reindex", "--embedder", "all-mpnet-base-v2"], "")
        .await;
    assert!(out.contains("re-embedding"), "{out}");
    assert!(
        out.contains("1 agents: 2 messages and 1 passages embedded with all-mpnet-base-v2"),
        "{out}"
    );
    // Run again: nothing left.
    let out = cli
        .ok(&["reindex", "--embedder", "all-mpnet-base-v2"], "")
        .await;
    assert!(out.contains("0 messages and 0 passages"), "{out}");
    let show = cli.ok(&["agents", "show", "ada"], "").await;
    assert!(show.contains("embeddings all-mpnet-base-v2"), "{show}");

    // `auto` follows the store: the agent opens with MPNet and finds the passage by meaning.
    cli.server.push(Reply::call(
        "archival_memory_search",
        json!({"query": "who looks after the birds by the sea", "request_heartbeat": true}),
    ));
    cli.server.push(say("The lighthouse keeper."));
    let output = run(
        with(None, &["chat", "--agent", "ada"]),
        "Who feeds the birds?\n/exit\n",
    )
    .await;
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    let prompt =
        serde_json::to_string(cli.server.agent_requests().last().unwrap().messages()).unwrap();
    assert!(
        prompt.contains("The lighthouse keeper feeds the gulls at dawn."),
        "the search result reached the model: {prompt}"
    );
}

/// `memgpt serve` chooses its embedder as `memgpt chat` does: `auto` follows the model of the
/// store's vectors, and another model is refused with the way out.
#[cfg(feature = "server")]
#[memgpt_test_harness::test]
async fn serve_follows_the_embedding_model_of_the_store() {
    let cli = Cli::new().await;
    let with_embedder = |embedder: Option<&str>, args: &[&str]| {
        let mut command = cli.command(args);
        match embedder {
            Some(embedder) => command.env("MEMGPT_EMBEDDER", embedder),
            None => command.env_remove("MEMGPT_EMBEDDER"),
        };
        command
    };
    let small = Some("openai:text-embedding-3-small");
    let output = run(with_embedder(small, &["chat"]), "/exit\n").await;
    assert!(output.status.success(), "{:?}", text(&output));
    write(&cli.path("notes.md"), b"The keeper feeds the gulls.");
    let output = run(
        with_embedder(small, &["ingest", "--agent", "sam", "notes.md"]),
        "",
    )
    .await;
    assert!(output.status.success(), "{:?}", text(&output));
    let embeddings = || {
        cli.server
            .all_requests()
            .iter()
            .filter(|r| r.path.ends_with("/embeddings"))
            .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    let before = embeddings().len();

    // `auto`: the store's model, probed through the endpoint at start.
    let mut serve = with_embedder(None, &["serve", "--listen", "127.0.0.1:0"])
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(serve.stderr.take().unwrap()).lines();
    let banner = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains(" on http://") {
                return line;
            }
        }
        String::new()
    })
    .await
    .unwrap();
    assert!(
        banner.contains("memgpt serve: model gpt-4o-mini"),
        "{banner}"
    );
    serve.kill().await.unwrap();
    assert_eq!(
        embeddings()[before..],
        ["text-embedding-3-small"],
        "serve probed the store's model"
    );

    // Another model is refused before the server starts.
    let output = run(
        with_embedder(
            Some("openai:text-embedding-3-large"),
            &["serve", "--listen", "127.0.0.1:0"],
        ),
        "",
    )
    .await;
    let (_, err) = text(&output);
    assert!(!output.status.success());
    assert!(
        err.contains("vectors come from text-embedding-3-small")
            && err.contains("memgpt reindex --embedder openai:text-embedding-3-large"),
        "{err}"
    );
}

/// Letta's sample agent with its model changed to `model`, written to `name` in the test folder.
fn letta_agent_with_model(cli: &Cli, name: &str, model: &str) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("memgpt-core/src/agent_file/testdata/letta_v2.af");
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    file["agents"][0]["llm_config"]["model"] = json!(model);
    let path = cli.path(name);
    write(&path, serde_json::to_string(&file).unwrap().as_bytes());
    path
}

/// The `functions` line of `memgpt agents show`.
fn functions_line(show: &str) -> String {
    show.lines()
        .find(|l| l.starts_with("functions"))
        .unwrap_or_default()
        .to_owned()
}

#[memgpt_test_harness::test]
async fn an_imported_agent_keeps_its_functions_and_runs_the_model_it_is_given() {
    let cli = Cli::new().await;
    let file = letta_agent_with_model(&cli, "basic.af", "gpt-4.1-mini");
    cli.ok(
        &[
            "agents",
            "import",
            file.to_str().unwrap(),
            "--name",
            "basic",
        ],
        "",
    )
    .await;
    let imported = functions_line(&cli.ok(&["agents", "show", "basic"], "").await);
    assert!(
        imported.contains("memory_insert") && !imported.contains("archival_memory_insert"),
        "the file's tools, mapped: {imported}"
    );

    // No model set by the user: the agent's own is sent, and printed.
    cli.server.push(say("Hello."));
    let mut command = cli.command(&["chat", "--agent", "basic"]);
    command.env_remove("MEMGPT_MODEL");
    let out = run(command, "Hi\n").await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("model gpt-4.1-mini at"), "{stdout}");
    assert_eq!(
        cli.server.agent_requests().last().unwrap().body["model"],
        "gpt-4.1-mini"
    );
    // One step later the agent still has exactly the functions it was imported with.
    let show = cli.ok(&["agents", "show", "basic"], "").await;
    assert_eq!(functions_line(&show), imported, "{show}");

    // A model the user gives wins, and the banner says what is sent.
    cli.server.push(say("Hello again."));
    let out = cli
        .ok(
            &["chat", "--agent", "basic", "--model", "gpt-4o-mini"],
            "Hi\n/model\n",
        )
        .await;
    assert_eq!(
        out.matches("model gpt-4o-mini at").count(),
        2,
        "banner and /model: {out}"
    );
    assert_eq!(
        cli.server.agent_requests().last().unwrap().body["model"],
        "gpt-4o-mini"
    );

    // A Claude agent on an OpenAI endpoint runs on the endpoint's model, and says so.
    let file = letta_agent_with_model(&cli, "claude.af", "claude-sonnet-4-5-20250929");
    cli.ok(
        &[
            "agents",
            "import",
            file.to_str().unwrap(),
            "--name",
            "claude",
        ],
        "",
    )
    .await;
    cli.server.push(say("Hi."));
    let mut command = cli.command(&["chat", "--agent", "claude"]);
    command.env_remove("MEMGPT_MODEL");
    let out = run(command, "Hi\n").await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("claude-sonnet-4-5-20250929") && stderr.contains("--model"),
        "{stderr}"
    );
    let sent = cli.server.agent_requests().last().unwrap().body["model"].clone();
    assert_eq!(sent, "gpt-4o-mini", "the endpoint's default model");
    assert!(stdout.contains("model gpt-4o-mini at"), "{stdout}");
}

#[memgpt_test_harness::test]
async fn agents_can_be_read_while_a_chat_holds_the_store() {
    let cli = Cli::new().await;
    cli.server.push(say("Noted."));
    let mut chat = cli
        .command(&["chat", "--agent", "sam"])
        .spawn()
        .expect("the memgpt binary");
    let mut input = chat.stdin.take().unwrap();
    input.write_all(b"I keep bees.\n").await.unwrap();
    // The step is committed once the model's reply was taken.
    for _ in 0..600 {
        if cli.server.remaining() == 0 && cli.path("memgpt-data/memgpt.db").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Every reading command works next to the writer.
    let list = cli.ok(&["agents", "list"], "").await;
    assert!(list.contains("sam"), "{list}");
    let show = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(show.contains("agent      sam"), "{show}");
    let context = cli.ok(&["context", "sam"], "").await;
    assert!(context.contains("===== totals"), "{context}");
    cli.ok(&["agents", "export", "sam", "-o", "sam.af"], "")
        .await;
    assert!(
        std::fs::read_to_string(cli.path("sam.af"))
            .unwrap()
            .contains("I keep bees."),
        "the export holds the committed step"
    );
    // A second writer is told what to do instead of failing obscurely.
    let second = cli.run(&["chat", "--agent", "sam"], "").await;
    let (_, err) = text(&second);
    assert!(
        !second.status.success() && err.contains("in use by another memgpt process"),
        "{err}"
    );
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(60), chat.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Nothing is written by a reader: an empty folder stays empty.
    let empty = tempfile::tempdir().unwrap();
    let mut command = cli.command(&["agents", "list"]);
    command.current_dir(empty.path());
    let out = run(command, "").await;
    assert!(out.status.success() && text(&out).0.contains("no agents"));
    assert!(!empty.path().join("memgpt-data").exists());
}

/// Short commands on the embedded store wait for the process holding it (as SQLite's busy
/// timeout does, bounded, saying so) instead of failing: two shells appending to one shared
/// block 50 times each, at the same time and while `memgpt mcp` holds the store for longer than
/// the store's own wait for its lock, keep all 100 lines.
#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_short_writers_at_once_both_finish() {
    let cli = Cli::new().await;
    cli.ok(&["chat", "--agent", "sam"], "").await;
    cli.ok(&["blocks", "create", "log", "--limit", "5000"], "")
        .await;
    // A long-running writer holds the store first.
    let mut holder = cli.command(&["mcp", "--agent", "sam"]).spawn().unwrap();
    let holder_in = holder.stdin.take().unwrap();
    let mut holder_err = tokio::io::BufReader::new(holder.stderr.take().unwrap()).lines();
    let serving = tokio::time::timeout(Duration::from_secs(60), holder_err.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap_or_default();
    assert!(serving.contains("serving"), "{serving}");
    let shell = |name: &'static str| {
        let commands: Vec<Command> = (0..50)
            .map(|i| cli.command(&["blocks", "append", "log", &format!("{name}-{i}")]))
            .collect();
        async move {
            let mut waited = Vec::new();
            for (i, command) in commands.into_iter().enumerate() {
                let output = run(command, "").await;
                let (out, err) = text(&output);
                assert!(
                    output.status.success(),
                    "{name}: append {i} failed\n{out}\n{err}"
                );
                if err.contains("(another memgpt process may hold it; up to 60 s)") {
                    waited.push(i);
                }
            }
            waited
        }
    };
    // The holder lets go after 7 s: longer than the store's own 5 s wait for its lock.
    let release = async move {
        tokio::time::sleep(Duration::from_secs(7)).await;
        drop(holder_in);
        holder.wait().await.unwrap()
    };
    // (It ends with an error: its stdin closed before any client shook hands.)
    let (a, b, _) = tokio::join!(shell("a"), shell("b"), release);
    // The first append of each shell waited for the holder, and said so.
    assert_eq!(a.first(), Some(&0), "{a:?}");
    assert_eq!(b.first(), Some(&0), "{b:?}");
    let show = cli.ok(&["blocks", "show", "log"], "").await;
    let mut lines: Vec<&str> = show
        .lines()
        .filter(|l| l.starts_with("a-") || l.starts_with("b-"))
        .collect();
    assert_eq!(lines.len(), 100, "{show}");
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), 100, "every line once: {show}");
    // Each shell's lines are in its own order.
    for name in ["a-", "b-"] {
        let order: Vec<usize> = show
            .lines()
            .filter_map(|l| l.strip_prefix(name)?.parse().ok())
            .collect();
        assert_eq!(order, (0..50).collect::<Vec<_>>(), "{show}");
    }
    // A second long-running writer is still refused at once (after the store's own wait).
    let mut holder = cli.command(&["mcp", "--agent", "sam"]).spawn().unwrap();
    let holder_in = holder.stdin.take().unwrap();
    let mut holder_err = tokio::io::BufReader::new(holder.stderr.take().unwrap()).lines();
    let serving = holder_err.next_line().await.unwrap().unwrap_or_default();
    assert!(serving.contains("serving"), "{serving}");
    let second = cli.run(&["chat", "--agent", "sam"], "").await;
    let (_, err) = text(&second);
    assert!(
        !second.status.success() && err.contains("in use by another memgpt process"),
        "{err}"
    );
    assert!(!err.contains("waiting for"), "{err}");
    drop(holder_in);
    holder.wait().await.unwrap();
}

#[memgpt_test_harness::test]
async fn a_letta_file_with_a_sleep_time_companion_imports_whole_or_by_choice() {
    use std::io::Read;
    let cli = Cli::new().await;
    let mut evie = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/letta/agent-file/evie.af.gz"),
        )
        .unwrap(),
    )
    .read_to_string(&mut evie)
    .unwrap();
    write(&cli.path("evie.af"), evie.as_bytes());

    // A refused import in an empty folder leaves no data directory behind, and names the field.
    let broken = evie.replacen("\"limit\": ", "\"limit\": \"many\", \"x\": ", 1);
    write(&cli.path("broken.af"), broken.as_bytes());
    let output = cli.run(&["agents", "import", "broken.af"], "").await;
    let (_, err) = text(&output);
    assert!(!output.status.success(), "{err}");
    assert!(err.contains("blocks[0].limit: invalid type"), "{err}");
    assert!(!cli.path("memgpt-data").exists());

    // Both agents, related; what is not imported is listed.
    let out = cli.ok(&["agents", "import", "evie.af"], "").await;
    assert!(out.contains("imported agent Evie ("), "{out}");
    assert!(
        out.contains("imported agent companion-sleeptime_copy ("),
        "{out}"
    );
    assert!(
        out.contains("related: companion-sleeptime_copy (exported together with Evie)"),
        "{out}"
    );
    assert!(
        out.contains("kept for export, not used by memgpt:"),
        "{out}"
    );
    assert!(out.contains("timezone"), "{out}");
    // The 12 blocks both agents hold are shared blocks of the store, not copies.
    let blocks = cli.ok(&["blocks", "list"], "").await;
    assert_eq!(
        blocks
            .lines()
            .filter(|l| l.ends_with("Evie, companion-sleeptime_copy"))
            .count(),
        12,
        "{blocks}"
    );
    cli.ok(&["blocks", "append", "social_scores", "Ada: 3"], "")
        .await;
    for agent in ["Evie", "companion-sleeptime_copy"] {
        let shown = cli.ok(&["agents", "show", agent], "").await;
        assert!(shown.contains("Ada: 3"), "{agent}: {shown}");
    }
    // A block of the CLI's own: created, attached, edited, refused deletion while held.
    cli.ok(
        &[
            "blocks",
            "create",
            "team",
            "--value",
            "Ada",
            "--limit",
            "50",
            "--attach",
            "Evie",
            "--attach",
            "companion-sleeptime_copy",
        ],
        "",
    )
    .await;
    cli.ok(&["blocks", "append", "team", "Grace"], "").await;
    let shown = cli.ok(&["blocks", "show", "team"], "").await;
    assert!(shown.contains("Ada\nGrace"), "{shown}");
    assert!(
        shown.contains("agents     Evie, companion-sleeptime_copy"),
        "{shown}"
    );
    let over = cli
        .run(&["blocks", "append", "team", &"x".repeat(60)], "")
        .await;
    assert!(!over.status.success());
    assert!(text(&over).1.contains("limit is 50"), "{}", text(&over).1);
    let held = cli.run(&["blocks", "delete", "team"], "").await;
    assert!(!held.status.success() && text(&held).1.contains("detach it from them first"));
    for agent in ["Evie", "companion-sleeptime_copy"] {
        cli.ok(&["blocks", "detach", "team", agent], "").await;
    }
    cli.ok(&["blocks", "delete", "team"], "").await;
    // Exporting either gives the pair and their group back, the shared blocks once.
    cli.ok(&["agents", "export", "Evie", "-o", "pair.af"], "")
        .await;
    let pair: Value =
        serde_json::from_str(&std::fs::read_to_string(cli.path("pair.af")).unwrap()).unwrap();
    assert_eq!(pair["agents"].as_array().unwrap().len(), 2);
    assert_eq!(
        pair["groups"][0]["manager_config"]["manager_type"],
        "sleeptime"
    );
    assert_eq!(
        pair["groups"][0]["manager_config"]["manager_agent_id"],
        "agent-0"
    );
    assert_eq!(pair["groups"][0]["agent_ids"], json!(["agent-1"]));
    let shared = pair["groups"][0]["shared_block_ids"].as_array().unwrap();
    assert_eq!(shared.len(), 12, "{}", pair["groups"]);
    assert_eq!(pair["blocks"].as_array().unwrap().len(), 13);
    for agent in pair["agents"].as_array().unwrap() {
        let held = agent["block_ids"].as_array().unwrap();
        assert!(shared.iter().all(|id| held.contains(id)), "{agent}");
    }

    // One agent of the two, chosen.
    let out = cli
        .ok(
            &[
                "agents", "import", "evie.af", "--agent", "Evie", "--name", "solo",
            ],
            "",
        )
        .await;
    assert!(out.contains("imported agent solo ("), "{out}");
    assert!(
        out.contains("agent agent-1 `companion-sleeptime_copy`: not chosen"),
        "{out}"
    );
    assert!(
        out.contains("the relation is dropped") || !out.contains("related:"),
        "{out}"
    );
    let list = cli.ok(&["agents", "list"], "").await;
    assert_eq!(list.lines().count(), 4, "header + 3 agents: {list}");
    // Names longer than 20 characters keep the columns aligned.
    let column = list.lines().next().unwrap().find("POLICY").unwrap();
    for line in list.lines().skip(1) {
        assert_eq!(line.find("paper"), Some(column), "{list}");
    }
}

#[memgpt_test_harness::test]
async fn mcp_servers_from_memgpt_toml_give_agents_their_tools() {
    let Some((python, pythonpath)) = crate::fastmcp_python() else {
        return;
    };
    let cli = Cli::new().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fastmcp_calc.py");
    // The same FastMCP server twice: over stdio for every agent, over HTTP for sam only.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut http = tokio::process::Command::new(&python)
        .arg(&script)
        .args(["http", &port.to_string()])
        .env("PYTHONPATH", &pythonpath)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    write(
        &cli.path("memgpt.toml"),
        format!(
            r#"
[mcp_servers.calc]
command = {python:?}
args = [{script:?}]
env = {{ PYTHONPATH = {pythonpath:?} }}

[mcp_servers.loud]
url = "http://127.0.0.1:{port}/mcp"
agents = ["sam"]
timeout_secs = 30
"#,
            script = script.display().to_string(),
        )
        .as_bytes(),
    );
    let config = cli.ok(&["config"], "").await;
    assert!(
        config.contains("mcp_servers.calc = stdio") && config.contains("tools for sam"),
        "{config}"
    );

    // The model calls the stdio server's tool, then the HTTP server's, then replies.
    cli.server.push(Reply::calls(
        "Adding.",
        &[(
            "calc__add",
            json!({"a": 2, "b": 3, "request_heartbeat": true}),
        )],
    ));
    cli.server.push(Reply::calls(
        "Shouting.",
        &[(
            "loud__shout",
            json!({"text": "five", "request_heartbeat": true}),
        )],
    ));
    cli.server.push(say("2 + 3 = 5."));
    let out = cli
        .ok(&["chat", "--agent", "sam"], "What is 2 + 3?\n/help\n")
        .await;
    assert!(out.contains("sam> 2 + 3 = 5."), "{out}");
    assert!(
        out.contains("MCP server calc: calc__add, calc__shout")
            && out.contains("MCP server loud: loud__add, loud__shout"),
        "/help lists the tools: {out}"
    );
    let results: Vec<String> = cli
        .server
        .agent_requests()
        .last()
        .unwrap()
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(results.iter().any(|r| r.contains('5')), "{results:?}");
    assert!(results.iter().any(|r| r.contains("FIVE")), "{results:?}");
    let offered: Vec<String> = cli.server.agent_requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(offered.contains(&"calc__add".to_owned()), "{offered:?}");

    let show = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(
        show.contains("calc__add") && show.contains("loud__shout"),
        "{show}"
    );
    assert!(show.contains("mcp        calc (stdio:"), "{show}");
    assert!(
        show.contains("mcp        loud (http: http://127.0.0.1:"),
        "{show}"
    );

    // A Letta agent's `external_mcp` tool maps onto the attached server that offers it.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("memgpt-core/src/agent_file/testdata/letta_v2.af");
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    file["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "tool-9", "name": "shout", "tool_type": "external_mcp"}));
    file["agents"][0]["tool_ids"]
        .as_array_mut()
        .unwrap()
        .push(json!("tool-9"));
    write(
        &cli.path("mcp.af"),
        serde_json::to_string(&file).unwrap().as_bytes(),
    );
    cli.ok(&["agents", "import", "mcp.af", "--name", "lettamcp"], "")
        .await;
    let show = cli.ok(&["agents", "show", "lettamcp"], "").await;
    assert!(show.contains("calc__shout"), "{show}");

    // Another agent gets only the servers meant for every agent.
    cli.server.push(say("Hi."));
    cli.ok(&["chat", "--agent", "bob"], "Hi\n").await;
    let show = cli.ok(&["agents", "show", "bob"], "").await;
    assert!(
        show.contains("calc__add") && !show.contains("loud__"),
        "{show}"
    );

    // A server left out of memgpt.toml takes its tools with it, with a note; the agent loads.
    write(
        &cli.path("memgpt.toml"),
        format!(
            "[mcp_servers.calc]\ncommand = {python:?}\nargs = [{:?}]\nenv = {{ PYTHONPATH = {pythonpath:?} }}\n",
            script.display().to_string()
        )
        .as_bytes(),
    );
    cli.server.push(say("Still here."));
    let output = cli.run(&["chat", "--agent", "sam"], "Hello\n").await;
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    assert!(err.contains("goes without loud__add, loud__shout"), "{err}");
    let show = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(
        show.contains("calc__add") && !show.contains("loud__"),
        "{show}"
    );

    // A bad table is one clear line.
    write(
        &cli.path("memgpt.toml"),
        b"[mcp_servers.x]\ncommand = \"a\"\nurl = \"b\"\n",
    );
    let output = cli.run(&["config"], "").await;
    let (_, err) = text(&output);
    assert!(
        err.contains("either `command` (stdio) or `url` (HTTP), not both"),
        "{err}"
    );
    http.kill().await.unwrap();
}

/// One broken `[mcp_servers]` entry stops nothing: `memgpt chat` starts without its tools, with
/// a warning naming it and why, and `/mcp` shows it down; a server that crashes in the middle
/// of a session is started again on its next call.
#[memgpt_test_harness::test]
async fn a_broken_mcp_server_leaves_chat_usable_and_a_crashed_one_comes_back() {
    let Some((python, pythonpath)) = crate::fastmcp_python() else {
        return;
    };
    let cli = Cli::new().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fastmcp_calc.py");
    write(
        &cli.path("memgpt.toml"),
        format!(
            r#"
[mcp_servers.ghost]
command = "/nonexistent/mcp-server"

[mcp_servers.quitter]
command = "sh"
args = ["-c", "exit 7"]
timeout_secs = 10

[mcp_servers.calc]
command = {python:?}
args = [{script:?}]
env = {{ PYTHONPATH = {pythonpath:?} }}
"#,
            script = script.display().to_string(),
        )
        .as_bytes(),
    );
    let marker = cli.path("calc-exited").display().to_string();
    // The model crashes the server once, then adds (on a restarted server), then replies.
    cli.server.push(Reply::calls(
        "Testing.",
        &[(
            "calc__exit_once",
            json!({"marker": marker, "request_heartbeat": true}),
        )],
    ));
    cli.server.push(Reply::calls(
        "Adding.",
        &[(
            "calc__add",
            json!({"a": 2, "b": 3, "request_heartbeat": true}),
        )],
    ));
    cli.server.push(say("2 + 3 = 5."));
    let output = cli
        .run(&["chat", "--agent", "sam"], "What is 2 + 3?\n/mcp\n/exit\n")
        .await;
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    assert!(out.contains("sam> 2 + 3 = 5."), "{out}");
    // One line per broken server, naming it and the cause once.
    let ghost: Vec<&str> = err.lines().filter(|l| l.contains("ghost")).collect();
    assert_eq!(ghost.len(), 1, "{err}");
    assert!(
        ghost[0].starts_with("warning: MCP server `ghost` is down, so its tools are left out: could not start `/nonexistent/mcp-server`"),
        "{err}"
    );
    assert_eq!(ghost[0].matches("No such file").count(), 1, "{err}");
    assert!(
        err.contains("warning: MCP server `quitter` is down, so its tools are left out"),
        "{err}"
    );
    // `/mcp`: which servers are up (with their tools) and which are down.
    assert!(
        out.contains("MCP server calc: calc__add, calc__shout, calc__exit_once (up)"),
        "{out}"
    );
    assert!(
        out.contains("MCP server ghost: down since the start, its tools are not offered (could not start `/nonexistent/mcp-server`"),
        "{out}"
    );
    assert!(
        out.contains("MCP server quitter: down since the start"),
        "{out}"
    );
    // The results the model read: `{status, message, time}`.
    let results: Vec<(String, String)> = cli
        .server
        .agent_requests()
        .last()
        .unwrap()
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            let result: Value = serde_json::from_str(m["content"].as_str().unwrap()).unwrap();
            (
                result["status"].as_str().unwrap().to_owned(),
                result["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].0 == "Failed"
            && results[0].1.contains("stopped while running `exit_once`")
            && results[0].1.contains("restarted on the next call"),
        "{results:?}"
    );
    assert_eq!(
        results[1],
        ("OK".to_owned(), "5".to_owned()),
        "the restarted server added"
    );
    assert!(std::path::Path::new(&marker).exists());
}

/// A companion made from the command line shares the agent's blocks; `memgpt chat` runs it in
/// the background after the agent's steps (letting a run finish on exit), and `memgpt agents
/// consolidate` runs it at once.
#[memgpt_test_harness::test]
async fn a_companion_made_from_the_command_line_consolidates_what_was_said() {
    let cli = Cli::new().await;
    cli.server.push(say("Hello!"));
    cli.ok(&["chat", "--agent", "sam"], "hi\n").await;
    let out = cli
        .ok(&["agents", "companion", "sam", "--every", "1"], "")
        .await;
    assert!(out.contains("created sam-companion"), "{out}");
    let shown = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(shown.contains("shared block"), "{shown}");

    // The chat's step, then the companion's run in the background.
    cli.server.push(say("How nice!"));
    cli.server.push(Reply::call(
        "core_memory_append",
        json!({"label": "human", "content": "Sister: Ada, in Lisbon.", "request_heartbeat": true}),
    ));
    cli.server
        .push(Reply::call("memory_finish_edits", json!({})));
    let out = cli
        .ok(
            &["chat", "--agent", "sam"],
            "My sister Ada moved to Lisbon.\n",
        )
        .await;
    assert!(out.contains("How nice!"), "{out}");
    let shown = cli.ok(&["agents", "show", "sam"], "").await;
    assert!(shown.contains("Sister: Ada, in Lisbon."), "{shown}");
    let out = cli.ok(&["agents", "consolidate", "sam"], "").await;
    assert!(out.contains("nothing new for sam-companion"), "{out}");
    let out = cli
        .run(&["agents", "consolidate", "sam-companion-nope"], "")
        .await;
    assert!(!out.status.success());
}

/// With the `otlp_endpoint` setting (here OpenTelemetry's own variable), `memgpt chat` exports
/// its steps to the collector, and what it had buffered reaches it before the process ends.
#[cfg(feature = "otel")]
#[memgpt_test_harness::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_exports_its_steps_over_otlp_when_told_where() {
    let receiver = crate::telemetry::Receiver::default();
    let endpoint = receiver.start().await;
    let cli = Cli::new().await;
    cli.server.push(say("Hello, Ann."));
    let mut command = cli.command(&["chat"]);
    command.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);
    let output = run(command, "Hi, I'm Ann\n/exit\n").await;
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    assert!(names.contains(&"invoke_agent sam"), "{names:?}");
    assert!(names.contains(&"chat gpt-4o-mini"), "{names:?}");
    assert!(names.contains(&"execute_tool send_message"), "{names:?}");
    assert!(spans.iter().all(|(service, _)| service == "memgpt"));
    let (_, step) = spans
        .iter()
        .find(|(_, s)| s.name == "invoke_agent sam")
        .unwrap();
    let step = crate::telemetry::attributes(step);
    assert_eq!(step["memgpt.step.functions"], "send_message");

    // Without the setting nothing is sent.
    let before = receiver.spans().len();
    cli.server.push(say("Bye."));
    cli.ok(&["chat"], "bye\n/exit\n").await;
    assert_eq!(receiver.spans().len(), before);
}
