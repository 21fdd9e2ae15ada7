//! Token accounting per appended message, at 8k, 128k and 1M-token windows.
//!
//! Each appended message is counted once, when it joins the FIFO queue; the queue keeps its
//! total; the context's statistics and the memory-pressure check read totals. So the cost of
//! appending one message must not depend on how many messages the window holds. This bench
//! fills main context to 70% of each window with ordinary conversation turns, then times 2,000
//! appends, each followed by the statistics and pressure check the agent loop runs (the oldest
//! message is removed after each, untimed, so the queue keeps its size). For contrast it also
//! times a full recount of the queue, which is what the accounting avoids.
//!
//! ```text
//! cargo bench --bench token_accounting
//! ```

#[path = "support/words.rs"]
mod vocabulary;

use std::sync::Arc;
use std::time::{Duration, Instant};

use memgpt::chrono::Utc;
use memgpt::ids::AgentId;
use memgpt::message::{Message, MessageKind};
use memgpt::tokens::{TiktokenCounter, TokenCounter};
use memgpt::{MainContext, MemoryBlock, PaperPolicy, QueueManager, WorkingContext};
use vocabulary::WORDS;

/// A conversation turn of about 25-40 tokens, different for every `i`.
fn turn(agent: AgentId, i: usize) -> Arc<Message> {
    let mut state = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let len = 20 + i % 12;
    let text: Vec<&str> = (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            WORDS[(state % WORDS.len() as u64) as usize]
        })
        .collect();
    let kind = if i.is_multiple_of(2) {
        MessageKind::User
    } else {
        MessageKind::Assistant
    };
    Arc::new(Message::new(agent, kind, text.join(" "), Utc::now()))
}

fn percentile(values: &mut [Duration], p: f64) -> Duration {
    values.sort();
    values[((values.len() - 1) as f64 * p).round() as usize]
}

fn us(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e6)
}

fn main() {
    let counter: Arc<dyn TokenCounter> = Arc::new(TiktokenCounter::for_model("gpt-4o-mini"));
    let manager = QueueManager::new(Arc::new(PaperPolicy::default()));
    let agent = AgentId::new();
    println!(
        "| window (tokens) | queued messages | append + stats + pressure p50 us | p99 us | counting the new message alone p50 us | full recount of the queue ms |"
    );
    println!("|---|---|---|---|---|---|");
    for window in [8_192, 128_000, 1_000_000] {
        let memory = WorkingContext::from_blocks([
            MemoryBlock::new("persona", "I am a helpful assistant with a long memory."),
            MemoryBlock::new("human", "Name: Chad. Likes hiking and jazz."),
        ])
        .expect("blocks");
        let mut context = MainContext::new(
            "You are MemGPT.".to_owned(),
            memory,
            Arc::from(Vec::new()),
            window,
            counter.clone(),
            Utc::now(),
        );
        let mut next = 0;
        while context.stats().total_tokens < window * 7 / 10 {
            context
                .queue_mut()
                .push(turn(agent, next), counter.as_ref());
            next += 1;
        }
        let queued = context.queue().len();
        let fresh: Vec<Arc<Message>> = (next..next + 2_000).map(|i| turn(agent, i)).collect();
        // The same messages counted alone, in the same process state: the part of an append
        // that is tokenizing the new message itself.
        let mut alone = Vec::with_capacity(fresh.len());
        for message in &fresh {
            let started = Instant::now();
            let chat = message.to_chat();
            std::hint::black_box(counter.count_message(&chat));
            alone.push(started.elapsed());
        }
        let mut times = Vec::with_capacity(fresh.len());
        let mut sink = 0usize;
        for message in fresh {
            let started = Instant::now();
            context.queue_mut().push(message, counter.as_ref());
            let stats = context.stats();
            let pressure = manager.pressure(
                context.queue(),
                stats.window,
                stats.total_tokens - stats.queue_tokens,
            );
            times.push(started.elapsed());
            sink += stats.total_tokens + pressure as usize;
            context.queue_mut().remove(&[0]);
        }
        let started = Instant::now();
        let recount: usize = context
            .queue()
            .entries()
            .map(|e| counter.count_message(e.chat()))
            .sum();
        let recount_time = started.elapsed();
        std::hint::black_box((sink, recount));
        println!(
            "| {window} | {queued} | {} | {} | {} | {:.1} |",
            us(percentile(&mut times, 0.5)),
            us(percentile(&mut times, 0.99)),
            us(percentile(&mut alone, 0.5)),
            recount_time.as_secs_f64() * 1e3
        );
    }
}
