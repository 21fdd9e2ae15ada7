//! `memgpt chat`: a persistent agent in a line editor.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use memgpt::agent::StepProgress;
use memgpt::queue::policy_names;
use memgpt::{Agent, Event, StepRecord, StopReason};
use rustyline::error::ReadlineError;
use serde_json::json;

use crate::display::{self, Style};
use crate::open;
use crate::settings::Settings;

const HELP: &str = "\
/memory          core memory blocks (characters used / limit)
/context         main context per section against the window
/recall QUERY    search the conversation history (as conversation_search)
/archival QUERY  search archival memory (as archival_memory_search)
/summary         the recursive summary of evicted messages
/policy [NAME]   show or switch the page-replacement policy
/model           the model the agent talks to
/mcp             the MCP servers of memgpt.toml: their tools, which are up and which are down
/login           send a login event
/retry           ask the model again after it failed (your message is kept: do not send it again)
/approve         let the call waiting for approval run (tool rule requires_approval)
/deny [REASON]   refuse it; the agent reads the reason
/help            this list
/exit            leave (also Ctrl-D)
A line ending in \\ continues on the next line. Ctrl-C during a step cancels it.";

const COMMANDS: &[&str] = &[
    "/memory",
    "/context",
    "/recall",
    "/archival",
    "/summary",
    "/policy",
    "/model",
    "/mcp",
    "/login",
    "/retry",
    "/approve",
    "/deny",
    "/help",
    "/exit",
];

/// Runs the chat until `/exit` or end of input.
pub async fn run(settings: &Settings, name: &str) -> Result<()> {
    let storage = open::session_storage(settings).await?;
    let stored = open::stored_space(&storage).await?;
    let Some(llm) = open::llm(settings, stored.as_ref()).await? else {
        eprintln!("{}", crate::pull::HOW_TO_CONFIGURE);
        std::process::exit(2);
    };
    let open::Opened {
        mut agent,
        created,
        tools,
    } = open::open_or_create(settings, &llm, storage.clone(), name, true).await?;
    // The MCP servers, as `/help` and `/mcp` list them (health as of when they are asked).
    let mcp_report = || match &tools {
        Some(tools) => tools.report(),
        None => "no MCP servers ([mcp_servers.NAME] tables in memgpt.toml add them)\n".to_owned(),
    };
    // The agent's consolidation companion, if it has one, runs in the background.
    let companion = crate::companion::background(&llm, &storage, &agent).await?;
    let style = Style::detect();
    let live = display::Live::new(style, name);
    agent.set_observer(Some(Arc::new(move |p: StepProgress<'_>| live.progress(p))));
    println!(
        "{} agent {name} in {} ({} messages in recall, {} passages in archival); {}",
        if created { "created" } else { "resumed" },
        settings.store_url(),
        agent.context().counts().recall,
        agent.context().counts().archival,
        open::describe_model(&llm, &agent)
    );
    println!("{}", style.dim("/help for commands, Ctrl-D to leave"));

    let mut editor = LineEditor::open(settings.data_dir().join("history.txt"))?;
    while let Some(line) = editor.read("you> ").await? {
        let line = line.trim().to_owned();
        if line.is_empty() {
            continue;
        }
        let (command, rest) = line
            .split_once(char::is_whitespace)
            .map_or((line.as_str(), ""), |(a, b)| (a, b.trim()));
        let event = match command {
            "/exit" | "/quit" => break,
            "/help" => {
                println!("{HELP}");
                if tools.is_some() {
                    print!("{}", mcp_report());
                }
                continue;
            }
            "/mcp" => {
                print!("{}", mcp_report());
                continue;
            }
            "/memory" => {
                for block in agent.memory().blocks() {
                    println!(
                        "{} {}/{} chars\n{}\n",
                        style.bold(&format!("[{}]", block.label())),
                        block.chars(),
                        block.limit(),
                        block.value()
                    );
                }
                continue;
            }
            "/context" => {
                print!("{}", display::context_bars(&agent.stats(), 0.7));
                continue;
            }
            "/recall" | "/archival" if rest.is_empty() => {
                println!("usage: {command} QUERY");
                continue;
            }
            "/recall" => {
                search(&mut agent, "conversation_search", rest, style).await;
                continue;
            }
            "/archival" => {
                search(&mut agent, "archival_memory_search", rest, style).await;
                continue;
            }
            "/summary" => {
                let summary = agent.summary();
                if summary.text.is_empty() {
                    println!("(no summary yet: nothing has been evicted)");
                } else {
                    println!(
                        "{} (stands for {} evicted messages)\n{}",
                        style.bold("[summary]"),
                        summary.evicted_messages,
                        summary.text
                    );
                }
                continue;
            }
            "/policy" if rest.is_empty() => {
                println!(
                    "policy: {} (available: {})",
                    agent.config().policy,
                    policy_names().join(", ")
                );
                continue;
            }
            "/policy" => {
                match agent.set_policy_named(rest).await {
                    Ok(()) => println!("policy: {} (saved)", agent.config().policy),
                    Err(e) => println!("{}", style.error(&e.to_string())),
                }
                continue;
            }
            "/model" => {
                println!(
                    "{} (context window {} tokens)",
                    open::describe_model(&llm, &agent),
                    agent.config().context_window
                );
                continue;
            }
            "/login" => Event::login(),
            "/retry" => Event::resume(),
            "/approve" | "/deny" => match agent.pending_approval() {
                None => {
                    println!("no function call is waiting for approval");
                    continue;
                }
                Some(pending) if command == "/approve" => Event::approve(pending.call.id.clone()),
                Some(pending) => Event::deny(pending.call.id.clone(), rest),
            },
            c if c.starts_with('/') => {
                println!("unknown command {c}; /help lists them");
                continue;
            }
            _ => Event::user(line.clone()),
        };
        step(&mut agent, event, style).await;
        if let Some(companion) = &companion {
            companion.stepped();
        }
    }
    if let Some(companion) = companion {
        companion.finish().await;
    }
    Ok(())
}

/// Runs one step; Ctrl-C cancels it (dropping the step rolls it back).
async fn step(agent: &mut Agent, event: Event, style: Style) {
    tokio::select! {
        result = agent.step(event) => match result {
            Ok(record) => finish(&record, style),
            Err(e) => println!("{}", style.error(&format!("(the step failed and nothing was stored: {e})"))),
        },
        _ = tokio::signal::ctrl_c() => {
            println!("{}", style.notice("(cancelled: the agent is at its last committed state)"));
        }
    }
}

fn finish(record: &StepRecord, style: Style) {
    match &record.stop_reason {
        StopReason::EndTurn => {}
        StopReason::ProviderError { message, .. } => println!(
            "{}",
            style.error(&format!(
                "(the model could not be reached: {message}; what happened before is saved, your \
                 message included: /retry asks the model again)"
            ))
        ),
        StopReason::AwaitingApproval {
            function,
            arguments,
            ..
        } => println!(
            "{}",
            style.notice(&format!(
                "(the agent wants to call {function} {arguments}: /approve or /deny [REASON])"
            ))
        ),
        other => println!("{}", style.dim(&format!("(stopped: {other:?})"))),
    }
}

async fn search(agent: &mut Agent, function: &str, query: &str, style: Style) {
    match agent
        .call(
            function,
            json!({ "query": query, "request_heartbeat": false }),
        )
        .await
    {
        Ok(record) => println!("{}", record.output),
        Err(e) => println!("{}", style.error(&e.to_string())),
    }
}

/// rustyline on a blocking thread: history in the data directory, `/` commands completed, and
/// lines ending in `\` continued.
struct LineEditor {
    editor: Option<rustyline::Editor<Commands, rustyline::history::FileHistory>>,
    history: PathBuf,
}

impl LineEditor {
    fn open(history: PathBuf) -> Result<Self> {
        let mut editor = rustyline::Editor::new().context("starting the line editor")?;
        editor.set_helper(Some(Commands));
        let _ = editor.load_history(&history);
        Ok(Self {
            editor: Some(editor),
            history,
        })
    }

    /// The next input (continued lines joined), or `None` at end of input (Ctrl-D).
    async fn read(&mut self, prompt: &str) -> Result<Option<String>> {
        let mut input = String::new();
        let mut prompt = prompt.to_owned();
        loop {
            let Some(mut editor) = self.editor.take() else {
                return Ok(None);
            };
            let shown = prompt.clone();
            let (editor, line) = tokio::task::spawn_blocking(move || {
                let line = editor.readline(&shown);
                (editor, line)
            })
            .await
            .context("the line editor stopped")?;
            self.editor = Some(editor);
            match line {
                Ok(line) => match line.strip_suffix('\\') {
                    Some(head) => {
                        input.push_str(head);
                        input.push('\n');
                        prompt = "...> ".to_owned();
                    }
                    None => {
                        input.push_str(&line);
                        break;
                    }
                },
                // Ctrl-C at the prompt drops the line being typed.
                Err(ReadlineError::Interrupted) => {
                    input.clear();
                    prompt = "you> ".to_owned();
                }
                Err(ReadlineError::Eof) if input.is_empty() => return Ok(None),
                Err(ReadlineError::Eof) => break,
                Err(e) => return Err(e).context("reading input"),
            }
        }
        if let Some(editor) = self.editor.as_mut()
            && !input.trim().is_empty()
        {
            let _ = editor.add_history_entry(input.as_str());
            let _ = editor.save_history(&self.history);
        }
        Ok(Some(input))
    }
}

/// Completes slash commands.
struct Commands;

impl rustyline::completion::Completer for Commands {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let head = &line[..pos];
        if !head.starts_with('/') || head.contains(' ') {
            return Ok((pos, Vec::new()));
        }
        let found = COMMANDS
            .iter()
            .filter(|c| c.starts_with(head))
            .map(|c| (*c).to_owned())
            .collect();
        Ok((0, found))
    }
}

impl rustyline::hint::Hinter for Commands {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for Commands {}
impl rustyline::validate::Validator for Commands {}
impl rustyline::Helper for Commands {}
