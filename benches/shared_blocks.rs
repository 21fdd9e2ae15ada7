//! A shared-block edit seen by 100 agents: one block attached to 100 agents on one store, a
//! person's edit, then one step of every agent against the scripted in-process model (no
//! network: the step's own cost). Side by side in one run, interleaved round by round:
//!
//! * `edited`: the block changed since each agent's last step (the step reads it, rebuilds the
//!   prompt, and its record names the block);
//! * `unchanged`: the same agents, the block unchanged (the step still reads it);
//! * `private`: 100 agents with the same block as a block of their own (no read at all).
//!
//! Then the cost of a consolidation run ([`Agent::consolidate`]): a companion reading its
//! primary's last 10 messages and making two calls (an append to a shared block, then
//! `memory_finish_edits`), beside a plain step of the primary with one call, both against the
//! scripted model.
//!
//! ```text
//! cargo bench --bench shared_blocks                 # SQLite (a temporary directory)
//! MEMGPT_TEST_POSTGRES_URL=postgres://... cargo bench --bench shared_blocks --features postgres -- postgres
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use memgpt::backend::testing::ScriptedProvider;
use memgpt::store::{BlockUpdate, SharedBlock, Storage};
use memgpt::{Agent, Event, MemoryBlock};
use serde_json::json;

const AGENTS: usize = 100;
const ROUNDS: usize = 10;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// One step of each agent; the step times (model time excluded: it is scripted, in process).
async fn step_all(agents: &mut [Agent], llm: &ScriptedProvider, changed: bool) -> Vec<Duration> {
    let mut times = Vec::with_capacity(agents.len());
    for agent in agents.iter_mut() {
        llm.push_call("send_message", json!({"message": "ok"}));
        let started = Instant::now();
        let record = agent
            .step(Event::user("what is the plan?"))
            .await
            .expect("step");
        times.push(started.elapsed());
        assert_eq!(record.shared_blocks_changed.len(), usize::from(changed));
    }
    times
}

async fn open(url: &str) -> Storage {
    url.parse::<memgpt::StoreConfig>()
        .expect("store URL")
        .open()
        .await
        .expect("open the store")
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (name, url) = match std::env::args().nth(1).as_deref() {
            Some("postgres") => (
                "PostgreSQL",
                std::env::var("MEMGPT_TEST_POSTGRES_URL").expect("MEMGPT_TEST_POSTGRES_URL"),
            ),
            _ => ("SQLite", format!("sqlite://{}", dir.path().display())),
        };
        let storage = open(&url).await;
        let llm = Arc::new(ScriptedProvider::new());
        let text = "Launch: May 3. Owner: Ada. Budget: 40k.";
        let plan = SharedBlock::new(
            MemoryBlock::new("plan", text).with_limit(5_000),
            memgpt::chrono::Utc::now(),
        );
        storage.blocks.create_block(&plan).await.expect("block");
        let mut shared = Vec::new();
        let mut private = Vec::new();
        for i in 0..AGENTS {
            let builder = || {
                Agent::builder()
                    .provider(llm.clone())
                    .storage(storage.clone())
                    .context_window(16_384)
            };
            shared.push(
                builder()
                    .name(format!("shared-{i}"))
                    .shared_block(&plan)
                    .build()
                    .await
                    .expect("agent"),
            );
            private.push(
                builder()
                    .name(format!("private-{i}"))
                    .block(MemoryBlock::new("plan", text).with_limit(5_000))
                    .build()
                    .await
                    .expect("agent"),
            );
        }
        // Warm-up: every agent steps once (caches warm from here on).
        step_all(&mut shared, &llm, false).await;
        step_all(&mut private, &llm, false).await;

        let (mut edits, mut edited, mut unchanged, mut own) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut seen_by_all = Vec::new();
        for round in 0..ROUNDS {
            let line = format!("Round {round}: on track.");
            let edit = |b: &mut MemoryBlock| b.append(&line);
            let started = Instant::now();
            storage
                .blocks
                .update_block(
                    plan.id,
                    &BlockUpdate::new(&edit, memgpt::chrono::Utc::now()),
                )
                .await
                .expect("edit");
            edits.push(started.elapsed());
            let steps = step_all(&mut shared, &llm, true).await;
            seen_by_all.push(started.elapsed());
            edited.extend(steps);
            unchanged.extend(step_all(&mut shared, &llm, false).await);
            own.extend(step_all(&mut private, &llm, false).await);
        }
        println!(
            "{name}, warm caches, {AGENTS} agents, {ROUNDS} rounds (scripted in-process model)"
        );
        println!("| measure | p50 ms | p99 ms |");
        println!("|---|---|---|");
        println!(
            "| edit (one transaction) | {} | {} |",
            ms(percentile(&mut edits, 0.5)),
            ms(percentile(&mut edits, 0.99))
        );
        println!(
            "| edit until all {AGENTS} agents stepped with it | {} | {} |",
            ms(percentile(&mut seen_by_all, 0.5)),
            ms(percentile(&mut seen_by_all, 0.99))
        );
        for (label, samples) in [
            ("step, shared block edited since", &mut edited),
            ("step, shared block unchanged", &mut unchanged),
            ("step, the same block private", &mut own),
        ] {
            println!(
                "| {label} | {} | {} |",
                ms(percentile(samples, 0.5)),
                ms(percentile(samples, 0.99))
            );
        }

        // Consolidation: a primary with a companion; 5 user messages (10 messages with the
        // replies) between runs.
        let mut primary = Agent::builder()
            .provider(llm.clone())
            .storage(storage.clone())
            .name("primary")
            .context_window(16_384)
            .build()
            .await
            .expect("primary");
        let mut companion = primary
            .add_companion(
                Agent::builder()
                    .provider(llm.clone())
                    .context_window(16_384),
                5,
                None,
                None,
            )
            .await
            .expect("companion");
        let (mut runs, mut plain) = (Vec::new(), Vec::new());
        for round in 0..30 {
            for i in 0..5 {
                llm.push_call("send_message", json!({"message": format!("noted {round}.{i}")}));
                let started = Instant::now();
                primary
                    .step(Event::user(format!("fact {round}.{i}: the sky is blue")))
                    .await
                    .expect("step");
                plain.push(started.elapsed());
            }
            llm.push_call(
                "core_memory_append",
                json!({"label": "human", "content": format!("round {round}"), "request_heartbeat": true}),
            );
            llm.push_call("memory_finish_edits", json!({}));
            let started = Instant::now();
            let record = companion
                .consolidate()
                .await
                .expect("run")
                .expect("something to read");
            runs.push(started.elapsed());
            assert_eq!(record.function_calls.len(), 2);
            assert!(record.function_calls.iter().all(|c| c.ok));
        }
        println!();
        println!("{name}, warm caches, consolidation over 10 messages (scripted in-process model)");
        println!("| measure | p50 ms | p99 ms |");
        println!("|---|---|---|");
        println!(
            "| consolidation run (read 10 messages, 2 model calls, 1 shared-block edit, commit) | {} | {} |",
            ms(percentile(&mut runs, 0.5)),
            ms(percentile(&mut runs, 0.99))
        );
        println!(
            "| the primary's step (1 model call, shared blocks read) | {} | {} |",
            ms(percentile(&mut plain, 0.5)),
            ms(percentile(&mut plain, 0.99))
        );
    });
}
