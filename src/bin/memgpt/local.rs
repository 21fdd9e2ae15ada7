//! The offline path: the local chat model and the local embedder (both pure Rust, on candle),
//! pulled into the model cache on first use.

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use memgpt::embed::Embedder;
use memgpt::models::{ModelCache, ModelSpec, Progress};

use crate::open::Llm;
use crate::settings::Settings;

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

/// The local chat model and embedder; `Ok(None)` when the user declines the download.
pub async fn llm(
    settings: &Settings,
    stored: Option<&memgpt::store::EmbeddingSpace>,
) -> Result<Option<Llm>> {
    use memgpt::local::{LlamaConfig, LlamaProvider};
    use memgpt::models::SMOLLM2_135M_INSTRUCT;

    let cache = ModelCache::from_env();
    let Some(dir) = ensure(&cache, &SMOLLM2_135M_INSTRUCT, settings.assume_yes).await? else {
        return Ok(None);
    };
    let threads = std::env::var("MEMGPT_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    let mut config = LlamaConfig::new(dir.join("model.gguf")).with_threads(threads);
    config.model_id = Some(SMOLLM2_135M_INSTRUCT.name.to_owned());
    let provider = LlamaProvider::new(config).context("loading the local chat model")?;
    // Offline, `auto` pulls the embedder too: the local agent is all local.
    let embedder = match settings.get("embedder").unwrap_or("auto") {
        "none" => None,
        "auto" => crate::open::choose_embedder(settings, None, stored, true).await?,
        _ => crate::open::embedder(settings, None, stored).await?,
    };
    Ok(Some(Llm {
        provider: Arc::new(provider),
        kind: crate::open::ProviderKind::Local,
        description: format!(
            "local model {} on {threads} thread(s){}, offline",
            SMOLLM2_135M_INSTRUCT.name,
            match &embedder {
                Some(e) => format!(" with the local embedder {}", e.model()),
                None => String::new(),
            }
        ),
        embedder,
    }))
}

/// The local embedding model `spec`: `required` pulls it if missing (asking first, or with
/// `--yes`); otherwise it is used only when already present.
pub async fn embedder(
    spec: &ModelSpec,
    required: bool,
    yes: bool,
) -> Result<Option<Arc<dyn Embedder>>> {
    let cache = ModelCache::from_env();
    let dir = match cache.find(spec) {
        Some(dir) => dir,
        None if required => match ensure(&cache, spec, yes).await? {
            Some(dir) => dir,
            None => bail!(
                "the embedder {} was not downloaded (set embedder = \"none\" to go without)",
                spec.name
            ),
        },
        None => return Ok(None),
    };
    Ok(Some(Arc::new(
        memgpt::local_embed::LocalEmbedder::from_dir(dir)
            .with_context(|| format!("loading the local embedder {}", spec.name))?,
    )))
}
