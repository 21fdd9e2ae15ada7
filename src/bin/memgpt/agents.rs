//! `memgpt agents ...` and `memgpt context`: agents without a conversation.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use memgpt::Agent;
use memgpt::agent_file::{self, AgentFile, ImportOptions};
use memgpt::llm::Role;
use memgpt::store::{AgentState, Storage};

use crate::open;
use crate::settings::Settings;

async fn load_state(storage: &Storage, name: &str) -> Result<AgentState> {
    match open::find_agent(storage, name).await? {
        Some(state) => Ok(state),
        None => bail!("no agent named `{name}` (see `memgpt agents list`)"),
    }
}

/// Loads an agent for reading, without a model: the prompt is compiled exactly as for a step,
/// and nothing is sent anywhere.
async fn load_offline(storage: Storage, state: &AgentState) -> Result<Agent> {
    Agent::builder()
        .without_model()
        .storage(storage)
        .functions(open::functions_for(state, None))
        .load(state.id)
        .await
        .with_context(|| format!("loading agent {}", state.name))
}

pub async fn list(settings: &Settings) -> Result<()> {
    let storage = open::reader(settings).await?;
    let agents = storage.agents.list_agents().await?;
    if agents.is_empty() {
        println!(
            "no agents in {} (`memgpt chat --agent NAME` creates one)",
            settings.store_url()
        );
        return Ok(());
    }
    let width = agents
        .iter()
        .map(|a| a.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    println!(
        "{:<width$} {:>9} {:>9} {:<12} UPDATED",
        "NAME", "MESSAGES", "PASSAGES", "POLICY"
    );
    for state in agents {
        let messages = storage.recall.count_messages(state.id).await?;
        let passages = storage.archival.count_passages(state.id).await?;
        println!(
            "{:<width$} {messages:>9} {passages:>9} {:<12} {}",
            state.name,
            state.config.policy,
            state.updated_at.format("%Y-%m-%d %H:%M")
        );
    }
    Ok(())
}

pub async fn show(settings: &Settings, name: &str) -> Result<()> {
    let storage = open::reader(settings).await?;
    let mut state = load_state(&storage, name).await?;
    // Shared blocks as they are now, not as the agent last saw them.
    memgpt::store::refresh_shared_blocks(&mut state.memory, storage.blocks.as_ref()).await?;
    let messages = storage.recall.count_messages(state.id).await?;
    let passages = storage.archival.count_passages(state.id).await?;
    let c = &state.config;
    println!("agent      {} ({})", state.name, state.id);
    println!("created    {}", state.created_at.to_rfc3339());
    println!(
        "updated    {} (version {})",
        state.updated_at.to_rfc3339(),
        state.version
    );
    println!(
        "model      {} (context window {} tokens)",
        if c.model.is_empty() {
            "(the provider's)"
        } else {
            &c.model
        },
        c.context_window
    );
    println!("policy     {}", c.policy);
    println!("functions  {}", c.functions.join(", "));
    for server in settings.mcp_servers.iter().filter(|s| s.serves(name)) {
        let (kind, target) = server.endpoint();
        println!(
            "mcp        {} ({kind}: {target}): its tools are offered as {}__TOOL when the agent runs",
            server.name, server.name
        );
    }
    println!(
        "recall     {messages} messages ({} in the FIFO queue)",
        state.fifo.len()
    );
    println!("archival   {passages} passages");
    if let Some(space) = storage.agents.embedding_space().await? {
        println!(
            "embeddings {} ({} dimensions)",
            space.model, space.dimension
        );
    }
    println!(
        "summary    {}",
        if state.summary.text.is_empty() {
            "(none yet)".to_owned()
        } else {
            format!("{} evicted messages", state.summary.evicted_messages)
        }
    );
    for block in state.memory.blocks() {
        let shared = match block.shared() {
            Some(shared) => format!(", shared block {}", shared.id),
            None => String::new(),
        };
        println!(
            "\n[{}] {}/{} chars{shared}\n{}",
            block.label(),
            block.chars(),
            block.limit(),
            block.value()
        );
    }
    let skills = state.memory.skills().all();
    if !skills.is_empty() {
        println!(
            "\nskills     {} (listed in context; the agent loads one with `skill`)",
            skills.len()
        );
        for skill in skills {
            let loaded = if skill.loaded.is_empty() {
                String::new()
            } else {
                format!(" [loaded: {}]", skill.loaded.join(", "))
            };
            let files = if skill.files.is_empty() {
                format!(
                    "no files (source {})",
                    skill.source_url.as_deref().unwrap_or("unknown")
                )
            } else {
                format!("{} files", skill.files.len())
            };
            println!("  {} ({files}){loaded}: {}", skill.name, skill.description);
        }
    }
    Ok(())
}

pub async fn delete(settings: &Settings, name: &str) -> Result<()> {
    let storage = open::storage(settings).await?;
    let state = load_state(&storage, name).await?;
    storage.agents.delete_agent(state.id).await?;
    println!("deleted agent {name} and everything it remembered");
    Ok(())
}

pub async fn context(settings: &Settings, name: &str) -> Result<()> {
    let storage = open::reader(settings).await?;
    let state = load_state(&storage, name).await?;
    let agent = load_offline(storage, &state).await?;
    let request = agent.request();
    let counter = agent.context().counter().clone();
    for (i, message) in request.messages.iter().enumerate() {
        let section = match (i, message.role) {
            (0, Role::System) => "system instructions + working context".to_owned(),
            (_, role) => format!("{role:?}").to_lowercase(),
        };
        println!(
            "===== [{i}] {section} ({} tokens) =====",
            counter.count_message(message)
        );
        if !message.content.is_empty() {
            println!("{}", message.content);
        }
        for call in &message.tool_calls {
            println!("-> {}({})", call.name, call.arguments);
        }
    }
    println!(
        "===== functions ({} tokens) =====",
        agent.stats().tools_tokens
    );
    for tool in request.tools.iter() {
        println!(
            "{}: {}",
            tool.name,
            serde_json::to_string(&tool.parameters)?
        );
    }
    let stats = agent.stats();
    println!("===== totals =====\n{stats}");
    Ok(())
}

pub async fn export(settings: &Settings, name: &str, output: Option<PathBuf>) -> Result<()> {
    let storage = open::reader(settings).await?;
    let state = load_state(&storage, name).await?;
    let file = agent_file::export(&storage, state.id).await?;
    let path = output.unwrap_or_else(|| PathBuf::from(format!("{name}.af")));
    let json = serde_json::to_string_pretty(&file)?;
    write_atomically(&path, json.as_bytes())?;
    let extras = file.memgpt.as_ref();
    println!(
        "exported {name} to {} ({} messages in context, {} earlier, {} passages)",
        path.display(),
        file.agents.first().map_or(0, |a| a
            .messages
            .iter()
            .filter(|m| m.role != "system")
            .count()),
        extras.map_or(0, |x| x.agents.first().map_or(0, |a| a.history.len())),
        extras.map_or(0, |x| x.agents.first().map_or(0, |a| a.passages.len())),
    );
    Ok(())
}

pub async fn import(
    settings: &Settings,
    path: &Path,
    name: Option<String>,
    agent: Option<String>,
) -> Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file: AgentFile = agent_file::parse(&text)
        .with_context(|| format!("{} is not an agent file", path.display()))?;
    // A refused import must not leave a new, empty data directory behind.
    let new_dir = settings.get("store").is_none() && !settings.data_dir().exists();
    let storage = open::storage(settings).await?;
    // Letta's MCP tools map onto the MCP servers memgpt.toml attaches to the agent.
    let first = name
        .clone()
        .or_else(|| file.agents.first().map(|a| a.name.clone()))
        .unwrap_or_default();
    let tools = crate::tools::attach(settings, Some(&first)).await?;
    let options = ImportOptions {
        name,
        agent,
        registry: tools.as_ref().map(|t| t.registry.clone()),
        ..ImportOptions::default()
    };
    let report = match agent_file::import(&storage, &file, options).await {
        Ok(report) => report,
        Err(e) => {
            drop(storage);
            if new_dir {
                let _ = std::fs::remove_dir_all(settings.data_dir());
            }
            return Err(e).with_context(|| format!("importing {}", path.display()));
        }
    };
    for report in std::iter::once(&report).chain(&report.related) {
        println!(
            "imported agent {} ({} messages, {} passages, {} blocks, {} skills)",
            report.name, report.messages, report.passages, report.blocks, report.skills
        );
        for note in &report.adjusted {
            println!("  adjusted: {note}");
        }
        for note in &report.unmapped {
            println!("  not imported: {note}");
        }
        if !report.kept.is_empty() {
            println!(
                "  kept for export, not used by memgpt: {}",
                report.kept.join(", ")
            );
        }
    }
    if !report.related.is_empty() {
        println!(
            "  related: {} (exported together with {})",
            report
                .related
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            report.name
        );
    }
    Ok(())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("af.partial");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
