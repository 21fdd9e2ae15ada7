//! `memgpt blocks ...`: memory blocks shared by several agents.

use anyhow::{Context, Result, bail};
use memgpt::store::{AgentState, BlockUpdate, SharedBlock, Storage};
use memgpt::{Agent, MemoryBlock};

use crate::open;
use crate::settings::Settings;

/// The shared block `name` names: its id, or its label when one block has it.
async fn find(storage: &Storage, name: &str) -> Result<SharedBlock> {
    let blocks = storage.blocks.list_blocks(None).await?;
    if let Some(block) = blocks.iter().find(|b| b.id.to_string() == name) {
        return Ok(block.clone());
    }
    let labelled: Vec<&SharedBlock> = blocks.iter().filter(|b| b.block.label() == name).collect();
    match labelled.as_slice() {
        [one] => Ok((*one).clone()),
        [] => bail!("no shared block `{name}` (see `memgpt blocks list`)"),
        _ => bail!("several shared blocks are labelled `{name}`: name one by its id"),
    }
}

async fn agent_named(storage: &Storage, name: &str) -> Result<AgentState> {
    match open::find_agent(storage, name).await? {
        Some(state) => Ok(state),
        None => bail!("no agent named `{name}` (see `memgpt agents list`)"),
    }
}

/// An agent loaded without a model, to change its memory.
async fn load(storage: &Storage, state: &AgentState) -> Result<Agent> {
    Agent::builder()
        .without_model()
        .storage(storage.clone())
        .functions(open::functions_for(state, None))
        .load(state.id)
        .await
        .with_context(|| format!("loading agent {}", state.name))
}

/// The names of the agents holding `block`.
async fn holders(storage: &Storage, block: &SharedBlock) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for id in storage.blocks.block_agents(block.id).await? {
        if let Some(state) = storage.agents.load_agent(id).await? {
            names.push(state.name);
        }
    }
    Ok(names)
}

pub async fn list(settings: &Settings) -> Result<()> {
    let storage = open::reader(settings).await?;
    let blocks = storage.blocks.list_blocks(None).await?;
    if blocks.is_empty() {
        println!("no shared blocks (`memgpt blocks create LABEL --attach AGENT` makes one)");
        return Ok(());
    }
    println!(
        "{:<36} {:<16} {:>11} {:>7} AGENTS",
        "ID", "LABEL", "CHARS", "VERSION"
    );
    for block in &blocks {
        let b = &block.block;
        println!(
            "{:<36} {:<16} {:>11} {:>7} {}",
            block.id,
            b.label(),
            format!("{}/{}", b.chars(), b.limit()),
            block.version,
            holders(&storage, block).await?.join(", ")
        );
    }
    Ok(())
}

pub async fn show(settings: &Settings, name: &str) -> Result<()> {
    let storage = open::reader(settings).await?;
    let block = find(&storage, name).await?;
    let b = &block.block;
    println!("block      {} ({})", b.label(), block.id);
    println!(
        "size       {}/{} characters{}",
        b.chars(),
        b.limit(),
        if b.is_read_only() { ", read-only" } else { "" }
    );
    if let Some(description) = b.description() {
        println!("about      {description}");
    }
    println!(
        "version    {} (edited {})",
        block.version,
        block.updated_at.to_rfc3339()
    );
    println!("agents     {}", holders(&storage, &block).await?.join(", "));
    println!("\n{}", b.value());
    Ok(())
}

/// What `memgpt blocks create` was given.
pub struct NewBlock {
    pub label: String,
    pub value: String,
    pub limit: Option<usize>,
    pub description: Option<String>,
    pub read_only: bool,
    pub attach: Vec<String>,
}

pub async fn create(settings: &Settings, new: NewBlock) -> Result<()> {
    let storage = open::storage(settings).await?;
    let mut block = MemoryBlock::new(new.label.trim(), "");
    if let Some(limit) = new.limit {
        block = block.with_limit(limit);
    }
    block.set(new.value)?;
    block.set_description(new.description);
    block.set_read_only(new.read_only);
    let shared = SharedBlock::new(block, memgpt::chrono::Utc::now());
    storage.blocks.create_block(&shared).await?;
    println!(
        "created shared block {} ({})",
        shared.block.label(),
        shared.id
    );
    for name in &new.attach {
        attach_to(&storage, &shared, name).await?;
    }
    Ok(())
}

async fn attach_to(storage: &Storage, block: &SharedBlock, agent: &str) -> Result<()> {
    let state = agent_named(storage, agent).await?;
    let mut agent = load(storage, &state).await?;
    agent.attach_block(block.id).await?;
    println!("attached {} to {}", block.block.label(), state.name);
    Ok(())
}

pub async fn attach(settings: &Settings, block: &str, agent: &str) -> Result<()> {
    let storage = open::storage(settings).await?;
    let block = find(&storage, block).await?;
    attach_to(&storage, &block, agent).await
}

pub async fn detach(settings: &Settings, block: &str, agent: &str) -> Result<()> {
    let storage = open::storage(settings).await?;
    let block = find(&storage, block).await?;
    let state = agent_named(&storage, agent).await?;
    let Some(label) = state
        .memory
        .blocks()
        .iter()
        .find(|b| b.shared().is_some_and(|s| s.id == block.id))
        .map(|b| b.label().to_owned())
    else {
        bail!(
            "{} does not hold shared block {}",
            state.name,
            block.block.label()
        );
    };
    load(&storage, &state).await?.detach_block(&label).await?;
    println!("detached {label} from {}", state.name);
    Ok(())
}

/// Replaces (`append` false) or appends to a shared block's text, as a person's edit.
pub async fn edit(settings: &Settings, block: &str, text: String, append: bool) -> Result<()> {
    let storage = open::storage(settings).await?;
    let block = find(&storage, block).await?;
    let edit = |b: &mut MemoryBlock| {
        if append {
            b.append(&text)
        } else {
            b.set(text.clone())
        }
    };
    let edited = storage
        .blocks
        .update_block(
            block.id,
            &BlockUpdate::new(&edit, memgpt::chrono::Utc::now()),
        )
        .await?;
    println!(
        "{} is at version {} ({}/{} characters); its agents see it on their next step",
        edited.block.label(),
        edited.version,
        edited.block.chars(),
        edited.block.limit()
    );
    Ok(())
}

pub async fn delete(settings: &Settings, name: &str) -> Result<()> {
    let storage = open::storage(settings).await?;
    let block = find(&storage, name).await?;
    storage.blocks.delete_block(block.id).await?;
    println!(
        "deleted shared block {} ({})",
        block.block.label(),
        block.id
    );
    Ok(())
}
