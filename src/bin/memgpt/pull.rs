//! Pulling the offline models into the model cache: asking first (or taking `--yes`), with a
//! progress bar; and what to say when no model is configured at all.

use std::io::IsTerminal;

use anyhow::{Context, Result, bail};
use memgpt::models::{ModelCache, ModelSpec, Progress};

/// What `memgpt` prints when no LLM is configured and it may not download one.
pub const HOW_TO_CONFIGURE: &str = "\
No LLM is configured.

Use an endpoint (environment, memgpt.toml or flags; see `memgpt config`):
  OpenAI:     export OPENAI_API_KEY=sk-...                                   (optional: MEMGPT_MODEL=gpt-4o)
  Anthropic:  export ANTHROPIC_API_KEY=sk-ant-...                            (a build with --features anthropic)
  Ollama:     export MEMGPT_BASE_URL=http://localhost:11434/v1 MEMGPT_MODEL=llama3.1:8b
  vLLM:       export MEMGPT_BASE_URL=http://localhost:8000/v1 MEMGPT_MODEL=<served model>
  llama.cpp:  export MEMGPT_BASE_URL=http://localhost:8080/v1 MEMGPT_MODEL=<any>
  LM Studio:  export MEMGPT_BASE_URL=http://localhost:1234/v1 MEMGPT_MODEL=<loaded model>

Or run offline on the local models (pulled once, about 190 MB, SHA-256 checked):
  memgpt chat --yes        (without --yes it asks first on a terminal)";

/// Makes sure `spec` is in the cache: asks (or takes `--yes`), then downloads it with a
/// progress bar. `Ok(None)` when the user declines.
pub async fn ensure(
    cache: &ModelCache,
    spec: &ModelSpec,
    yes: bool,
) -> Result<Option<std::path::PathBuf>> {
    if let Some(dir) = cache.find(spec) {
        return Ok(Some(dir));
    }
    let size_mb = spec.size() as f64 / 1e6;
    eprintln!(
        "The local model {} ({}) is not in {}: {size_mb:.0} MB to download.",
        spec.name,
        spec.description,
        cache.root().display()
    );
    if !yes {
        if !std::io::stdin().is_terminal() {
            bail!("not downloading without --yes when not on a terminal\n\n{HOW_TO_CONFIGURE}");
        }
        eprint!("Download it now? [y/N] ");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Ok(None);
        }
    }
    let bar = indicatif::ProgressBar::new(spec.size());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(spec.name.to_owned());
    let progress = |p: Progress<'_>| {
        if let Some(total) = p.total {
            bar.set_length(total);
        }
        bar.set_position(p.done);
    };
    let dir = cache
        .pull(spec, &progress)
        .await
        .with_context(|| format!("downloading {}", spec.name))?;
    bar.finish_with_message(format!("{} (checksum verified)", spec.name));
    Ok(Some(dir))
}
