//! The LLM under evaluation: any OpenAI-compatible endpoint, from flags or the environment.

use std::sync::Arc;

use anyhow::{Context, Result};
use memgpt::llm::{ChatMessage, ChatRequest, LlmProvider, Usage};
use memgpt::openai::{OpenAiConfig, OpenAiProvider};

use crate::args::Args;

/// The provider named by `--base-url`/`--model` (falling back to `MEMGPT_BASE_URL`,
/// `MEMGPT_MODEL`, `OPENAI_API_KEY`...; see [`OpenAiConfig::from_lookup`]).
pub fn provider(args: &Args) -> Result<Arc<dyn LlmProvider>> {
    provider_for(args, args.model.clone())
}

/// The judge of `--judge`: the model of `--judge-model` on the same endpoint, else the model
/// under evaluation; `None` without `--judge`.
pub fn judge(args: &Args, llm: &Arc<dyn LlmProvider>) -> Result<Option<Arc<dyn LlmProvider>>> {
    if !args.judge {
        return Ok(None);
    }
    Ok(Some(match &args.judge_model {
        Some(model) => provider_for(args, Some(model.clone()))?,
        None => llm.clone(),
    }))
}

fn provider_for(args: &Args, model: Option<String>) -> Result<Arc<dyn LlmProvider>> {
    let config = OpenAiConfig::from_lookup(|name| match name {
        "MEMGPT_BASE_URL" if args.base_url.is_some() => args.base_url.clone(),
        "MEMGPT_MODEL" if model.is_some() => model.clone(),
        _ => std::env::var(name).ok(),
    })
    .context(
        "no LLM configured: pass --base-url URL --model NAME (any OpenAI-compatible server), \
         set OPENAI_API_KEY, or use an offline arm (--offline, *-retrieval)",
    )?;
    Ok(Arc::new(OpenAiProvider::new(config)?))
}

/// One plain completion (no functions): the reply text and its usage.
pub async fn ask(llm: &dyn LlmProvider, system: &str, user: &str) -> Result<(String, Usage)> {
    let mut messages = Vec::new();
    if !system.is_empty() {
        messages.push(ChatMessage::system(system));
    }
    messages.push(ChatMessage::user(user));
    let mut request = ChatRequest::new("", messages);
    request.temperature = Some(0.0);
    let response = llm.complete(&request).await?;
    Ok((response.content, response.usage))
}
