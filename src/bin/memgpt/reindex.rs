//! `memgpt reindex`: embeds every agent's messages and passages again with the embedder the
//! settings name (`--embedder NAME`), in place and resumably, after a change of model or to
//! fill in what was stored without a vector.

use anyhow::{Context, Result};
use memgpt::indexing::{ReindexProgress, reindex_store};

use crate::open;
use crate::settings::Settings;

pub async fn run(settings: &Settings) -> Result<()> {
    let storage = open::storage(settings).await?;
    let stored = open::stored_space(&storage).await?;
    let embedder = crate::embedders::required_embedder(settings, stored.as_ref()).await?;
    let url = crate::settings::without_password(&settings.store_url());
    match &stored {
        Some(space)
            if space.model != embedder.model() || space.dimension != embedder.dimension() =>
        {
            println!(
                "re-embedding {url}: its {} vectors ({}-d) are replaced by {} ({}-d); what the \
                 agents remember is kept, and an interrupted run continues where it stopped",
                space.model,
                space.dimension,
                embedder.model(),
                embedder.dimension()
            )
        }
        _ => println!(
            "embedding what has no vector yet in {url} with {}",
            embedder.model()
        ),
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let started = std::time::Instant::now();
    let report = reindex_store(&storage, embedder.as_ref(), &mut |p: ReindexProgress<
        '_,
    >| {
        bar.set_message(format!(
            "{}: {} messages, {} passages",
            p.agent.name, p.messages, p.passages
        ));
        bar.tick();
    })
    .await
    .context("re-embedding (run it again to continue)")?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{} agents: {} messages and {} passages embedded with {} in {seconds:.1} s{}",
        report.agents,
        report.messages,
        report.passages,
        embedder.model(),
        if report.cleared {
            " (the previous vectors were forgotten first)"
        } else {
            ""
        }
    );
    Ok(())
}
