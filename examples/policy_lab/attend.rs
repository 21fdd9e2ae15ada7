//! Real attention for the lab's `attention` policy: what SmolLM2 attended to while it read each
//! conversation.
//!
//! The local provider reports, for each request message, the share of attention the query that
//! picks the reply's first token gives it ([`AttentionProvider`](memgpt::llm::AttentionProvider)).
//! Asking it at every question of every seed and window, over the exact context each policy
//! keeps, would take a model pass over up to 8k tokens about a thousand times per seed and
//! window: days on two cores (the model reads about a hundred prompt tokens a second). The lab
//! measures the affordable proxy instead, once per conversation and independent of the seed
//! and the policy: the model reads the conversation turn by turn through a sliding window
//! (the newest turns within [`Measured::window`] tokens; when a turn would overflow it, the
//! oldest turns go until the rest fits in half), and after each turn reports the attention each
//! earlier turn in the window receives. During a replay, when turn `j` is said, its shares are
//! added to the queued copies of the turns it attended to: a policy only ever sees attention
//! paid before the flush that reads it, as online. What differs from an agent: the model sees
//! the raw conversation (turns an eviction removed included; no system prompt, summary,
//! questions or reloaded search results), and questions add no attention.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// What turn `j` paid earlier turns: `(i, share)` for each turn `i` in the window when `j` was
/// the newest.
pub type Shares = Vec<(usize, f32)>;

/// The attention measured on a set of conversations.
#[derive(Debug, Deserialize, Serialize)]
pub struct Measured {
    /// The model that read them.
    pub model: String,
    /// The sliding window's size, in tokens as the lab counts them.
    pub window: usize,
    /// Per conversation (LoCoMo sample id), per turn: its [`Shares`].
    pub conversations: BTreeMap<String, Vec<Shares>>,
}

impl Measured {
    /// Reads what [`measure`] wrote.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading attention from {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// Writes it as JSON.
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_string(self)?)
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// Where the window starts once turn `j` (of `sizes[j]` tokens) joins turns `start..j` that use
/// `used` tokens: unchanged while everything fits in `window`, otherwise the oldest turns go
/// until the rest fits in half of it. Returns the new start and tokens used.
#[cfg_attr(not(feature = "local"), allow(dead_code))]
pub fn slide(
    sizes: &[usize],
    start: usize,
    used: usize,
    j: usize,
    window: usize,
) -> (usize, usize) {
    let (mut start, mut used) = (start, used + sizes[j]);
    if used > window {
        while used > window / 2 && start < j {
            used -= sizes[start];
            start += 1;
        }
    }
    (start, used)
}

/// Has the local model at `model_path` read every conversation (`turns`: per sample id, each
/// turn's text) through a `window`-token sliding window, counting tokens with `counter`.
#[cfg(feature = "local")]
pub fn measure(
    model_path: &Path,
    turns: &BTreeMap<String, Vec<String>>,
    window: usize,
    counter: &memgpt::tokens::TiktokenCounter,
) -> Result<Measured> {
    use chrono::{DateTime, Utc};
    use memgpt::ids::AgentId;
    use memgpt::llm::{AttentionProvider, ChatMessage, ChatRequest, LlmProvider};
    use memgpt::local::{LlamaConfig, LlamaProvider};
    use memgpt::message::{Message, MessageKind};
    use memgpt::tokens::TokenCounter;

    // The model's own tokens outnumber the lab's count; leave it room.
    let provider = LlamaProvider::new(
        LlamaConfig::new(model_path)
            .with_context_window((2 * window + 512) as u32)
            .with_max_tokens(1)
            .with_temperature(0.0),
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let agent = AgentId::new();
    let total: usize = turns.values().map(Vec::len).sum();
    let mut done = 0;
    let started = std::time::Instant::now();
    let mut conversations = BTreeMap::new();
    for (id, texts) in turns {
        let messages: Vec<ChatMessage> = texts
            .iter()
            .map(|t| {
                Message::new(agent, MessageKind::User, t, DateTime::<Utc>::UNIX_EPOCH).to_chat()
            })
            .collect();
        let sizes: Vec<usize> = messages.iter().map(|m| counter.count_message(m)).collect();
        let mut received = vec![Vec::new(); messages.len()];
        let (mut start, mut used) = (0, 0);
        for j in 0..messages.len() {
            (start, used) = slide(&sizes, start, used, j, window);
            done += 1;
            if start == j {
                continue;
            }
            let mut request = ChatRequest::new(provider.model(), messages[start..=j].to_vec());
            request.max_tokens = Some(1);
            request.temperature = Some(0.0);
            let (_, weights) = runtime
                .block_on(provider.complete_with_attention(&request))
                .with_context(|| format!("{id}, turn {j}"))?;
            if let Some(weights) = weights {
                received[j] = (start..j).zip(weights).filter(|(_, w)| *w > 0.0).collect();
            }
            if done % 100 == 0 {
                eprintln!(
                    "attention: {done}/{total} turns read in {:.0} s",
                    started.elapsed().as_secs_f64()
                );
            }
        }
        conversations.insert(id.clone(), received);
    }
    // The file and the folder it is in ("smollm2-135m-instruct/model.gguf"), not the machine's
    // path.
    let parts: Vec<_> = model_path.iter().rev().take(2).collect();
    let model = parts
        .iter()
        .rev()
        .map(|p| p.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    Ok(Measured {
        model,
        window,
        conversations,
    })
}

#[cfg(test)]
mod tests {
    use super::slide;

    #[test]
    fn the_window_slides_to_half_when_a_turn_overflows_it() {
        let sizes = [40, 30, 20, 50, 10];
        let mut state = (0, 0);
        let mut starts = Vec::new();
        for j in 0..sizes.len() {
            state = slide(&sizes, state.0, state.1, j, 100);
            starts.push(state);
        }
        // 40+30+20 fit in 100; +50 makes 140: drop 40 (100), 30 (70) and 20 (50), down to
        // half; +10 fits.
        assert_eq!(starts, [(0, 40), (0, 70), (0, 90), (3, 50), (3, 60)]);
        // A single turn larger than the window stays alone.
        assert_eq!(slide(&[10, 300], 0, 10, 1, 100), (1, 300));
    }
}
