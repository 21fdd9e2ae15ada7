//! Consolidation companions from the command line: `memgpt agents companion` makes one,
//! `memgpt agents consolidate` runs one, and `memgpt chat` runs an agent's companion in the
//! background after its steps (the chat never waits for it).

use anyhow::{Result, bail};
use memgpt::Agent;
use memgpt::consolidation::Consolidation;
use memgpt::store::{AgentState, Storage};
use tokio::sync::mpsc;

use crate::open::{self, Llm};
use crate::settings::Settings;

/// Loads the stored agent `state` with the configured model and its own functions.
async fn load(llm: &Llm, storage: &Storage, state: &AgentState) -> Result<Agent> {
    Ok(open::builder(llm, storage.clone())
        .functions(open::functions_for(state, None))
        .load(state.id)
        .await?)
}

/// The model, the store and the agent called `name`, loaded to step.
async fn open_named(settings: &Settings, name: &str) -> Result<(Llm, Storage, Agent)> {
    let storage = open::storage(settings).await?;
    let stored = open::stored_space(&storage).await?;
    let Some(llm) = open::llm(settings, stored.as_ref()).await? else {
        bail!("{}", crate::pull::HOW_TO_CONFIGURE);
    };
    let Some(state) = open::find_agent(&storage, name).await? else {
        bail!("no agent named `{name}` (see `memgpt agents list`)");
    };
    let agent = load(&llm, &storage, &state).await?;
    Ok((llm, storage, agent))
}

/// Loads the companion of `agent` (or the agent itself, if it is one).
async fn load_companion(llm: &Llm, storage: &Storage, agent: &Agent) -> Result<Option<Agent>> {
    let Some(consolidation) = Consolidation::of(agent.id(), agent.config()) else {
        return Ok(None);
    };
    let Some(state) = storage.agents.load_agent(consolidation.companion).await? else {
        return Ok(None);
    };
    load(llm, storage, &state).await.map(Some)
}

/// An agent's companion running in a task of its own.
pub struct Background {
    steps: mpsc::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Background {
    /// Says the agent stepped: the companion consolidates if its run is due. Never waits.
    pub fn stepped(&self) {
        // Full means runs are pending already: this step's messages are read by them.
        let _ = self.steps.try_send(());
    }

    /// Lets a run in progress (or due) finish, then stops.
    pub async fn finish(self) {
        drop(self.steps);
        let _ = self.task.await;
    }
}

/// Runs `agent`'s companion in a task of its own: after each step of the agent
/// ([`Background::stepped`]) the companion consolidates if its run is due. `None` for an
/// agent without one.
pub async fn background(llm: &Llm, storage: &Storage, agent: &Agent) -> Result<Option<Background>> {
    let Some(mut companion) = load_companion(llm, storage, agent).await? else {
        return Ok(None);
    };
    let (tx, mut rx) = mpsc::channel::<()>(16);
    let task = tokio::spawn(async move {
        while rx.recv().await.is_some() {
            let due = match companion.consolidation_due().await {
                Ok(due) => due,
                Err(e) => {
                    eprintln!("\n(the companion could not check its primary: {e})");
                    continue;
                }
            };
            if due && let Err(e) = companion.consolidate().await {
                eprintln!(
                    "\n(the companion's run failed: {e}; it is tried again after the next step)"
                );
            }
        }
    });
    Ok(Some(Background { steps: tx, task }))
}

/// `memgpt agents companion NAME`.
pub async fn create(
    settings: &Settings,
    name: &str,
    every_steps: u32,
    idle_minutes: Option<u32>,
) -> Result<()> {
    let (llm, storage, mut agent) = open_named(settings, name).await?;
    let idle = idle_minutes.map(|m| memgpt::chrono::Duration::minutes(i64::from(m)));
    let companion = agent
        .add_companion(open::builder(&llm, storage), every_steps, idle, None)
        .await?;
    println!(
        "created {} to consolidate {name}'s memory after every {every_steps} of its messages; \
         its blocks ({}) are now shared with it",
        companion.name(),
        agent
            .memory()
            .blocks()
            .iter()
            .map(|b| b.label())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// `memgpt agents consolidate NAME`: one run now, whether due or not.
pub async fn run(settings: &Settings, name: &str) -> Result<()> {
    let (llm, storage, agent) = open_named(settings, name).await?;
    let Some(mut companion) = load_companion(&llm, &storage, &agent).await? else {
        bail!("{name} has no consolidation companion (`memgpt agents companion {name}` makes one)");
    };
    match companion.consolidate().await? {
        None => println!("nothing new for {} to consolidate", companion.name()),
        Some(record) => {
            for call in &record.function_calls {
                let status = if call.ok { "ok" } else { "refused" };
                println!(
                    "{} {}({}): {status}",
                    companion.name(),
                    call.name,
                    call.arguments
                );
            }
            println!("({:?})", record.stop_reason);
        }
    }
    Ok(())
}
