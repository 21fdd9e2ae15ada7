//! Command-line options shared by every harness.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Parsed options.
#[derive(Clone, Debug, Default)]
pub struct Args {
    pub command: String,
    pub data: Option<PathBuf>,
    /// BEAM chats (a folder such as `chats/500K`) for the retrieval harness.
    pub beam: Option<PathBuf>,
    pub limit: Option<usize>,
    pub seed: u64,
    pub jobs: usize,
    pub out: PathBuf,
    pub fresh: bool,
    pub offline: bool,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub judge: bool,
    pub judge_model: Option<String>,
    pub levels: Vec<usize>,
    pub k: Vec<usize>,
    pub embedder: Option<PathBuf>,
    pub embed_base_url: Option<String>,
    pub embed_model: Option<String>,
    pub embed_dim: usize,
    /// The store a retrieval run measures (`--store`).
    pub store: crate::stores::EvalStore,
}

impl Args {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self> {
        let mut out = Args {
            jobs: 1,
            out: PathBuf::from("target/eval"),
            levels: vec![0, 1, 2, 3, 4, 5],
            k: vec![1, 5, 10, 20, 50],
            embed_dim: 1536,
            ..Args::default()
        };
        let mut args = args.into_iter();
        let value = |args: &mut dyn Iterator<Item = String>, name: &str| {
            args.next().with_context(|| format!("{name} needs a value"))
        };
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
                _ => (arg.clone(), None),
            };
            let mut take = || match &inline {
                Some(v) => Ok(v.clone()),
                None => value(&mut args, &name),
            };
            match name.as_str() {
                "--data" => out.data = Some(take()?.into()),
                "--beam" => out.beam = Some(take()?.into()),
                "--limit" => out.limit = Some(number(&take()?, "--limit")?),
                "--seed" => out.seed = number(&take()?, "--seed")?,
                "--jobs" => out.jobs = number::<usize>(&take()?, "--jobs")?.max(1),
                "--out" => out.out = take()?.into(),
                "--fresh" => out.fresh = true,
                "--offline" => out.offline = true,
                "--judge" => out.judge = true,
                "--judge-model" => {
                    out.judge = true;
                    out.judge_model = Some(take()?)
                }
                "--model" => out.model = Some(take()?),
                "--base-url" => out.base_url = Some(take()?),
                "--levels" => out.levels = list(&take()?, "--levels")?,
                "--k" => out.k = list(&take()?, "--k")?,
                "--embedder" => out.embedder = Some(take()?.into()),
                "--embed-base-url" => out.embed_base_url = Some(take()?),
                "--embed-model" => out.embed_model = Some(take()?),
                "--embed-dim" => out.embed_dim = number(&take()?, "--embed-dim")?,
                "--store" => out.store = crate::stores::EvalStore::parse(&take()?)?,
                flag if flag.starts_with('-') && flag != "-h" => bail!("unknown option `{flag}`"),
                command if out.command.is_empty() => out.command = command.to_owned(),
                extra => bail!("unexpected argument `{extra}`"),
            }
        }
        if out.command.is_empty() {
            bail!("which harness?");
        }
        Ok(out)
    }

    /// The data file: `--data`, or `default` under the shared data folder.
    pub fn data_file(&self, default: &str) -> Result<PathBuf> {
        if let Some(path) = &self.data {
            return Ok(path.clone());
        }
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data")
            .join(default);
        if !path.exists() {
            bail!(
                "{} is missing: pass --data PATH (a file in the same format) or put the shared \
                 evaluation data next to the project (see ../shared/data/README.md)",
                path.display()
            );
        }
        Ok(path)
    }

    /// Applies `--limit`: the first N items, or with `--seed` other than 0 a seeded random
    /// sample of N (kept in their original order).
    pub fn limited<T>(&self, items: Vec<T>) -> Vec<T> {
        let Some(limit) = self.limit else {
            return items;
        };
        if self.seed == 0 || limit >= items.len() {
            return items.into_iter().take(limit).collect();
        }
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let mut picked: Vec<usize> = (0..items.len()).collect();
        rng.shuffle(&mut picked);
        picked.truncate(limit);
        picked.sort_unstable();
        let mut picked = picked.into_iter().peekable();
        items
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| {
                (picked.peek() == Some(&i)).then(|| {
                    picked.next();
                    item
                })
            })
            .collect()
    }
}

impl Args {
    /// What makes a run's results comparable: the harness, the data (by content), the models,
    /// the sample and `extra` (harness settings). Result files remember it, and a run with
    /// another fingerprint never reuses their lines.
    pub fn fingerprint(&self, data: &Path, extra: serde_json::Value) -> Result<serde_json::Value> {
        self.fingerprint_files(&[data.to_owned()], extra)
    }

    /// [`Args::fingerprint`] of data spread over several files (their contents, in order).
    pub fn fingerprint_files(
        &self,
        files: &[PathBuf],
        extra: serde_json::Value,
    ) -> Result<serde_json::Value> {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        for data in files {
            let mut file =
                std::fs::File::open(data).with_context(|| format!("reading {}", data.display()))?;
            std::io::copy(&mut file, &mut hasher)?;
        }
        let digest: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(serde_json::json!({
            "harness": self.command,
            "data_sha256": digest,
            "model": self.model.clone().or_else(|| std::env::var("MEMGPT_MODEL").ok()),
            "base_url": self.base_url.clone().or_else(|| std::env::var("MEMGPT_BASE_URL").ok()),
            "judge": self.judge,
            "judge_model": self.judge_model,
            "embedder": self.embedder.as_ref().map(|p| p.display().to_string()),
            "embed_model": self.embed_model,
            "embed_base_url": self.embed_base_url,
            "limit": self.limit,
            "seed": self.seed,
            "extra": extra,
        }))
    }
}

/// A path as shown in reports: relative to the project root when under it.
pub fn shown(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    path.strip_prefix(root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

fn number<T: std::str::FromStr>(text: &str, name: &str) -> Result<T> {
    text.trim()
        .parse()
        .ok()
        .with_context(|| format!("{name} needs a number, got `{text}`"))
}

fn list(text: &str, name: &str) -> Result<Vec<usize>> {
    text.split(',').map(|t| number(t, name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Args> {
        Args::parse(line.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn flags_values_and_lists() {
        let a = parse("nested-kv --offline --levels 0,2 --limit=5 --jobs 0 --out x").unwrap();
        assert_eq!(a.command, "nested-kv");
        assert!(a.offline);
        assert_eq!(a.levels, [0, 2]);
        assert_eq!(a.limit, Some(5));
        assert_eq!(a.jobs, 1);
        assert_eq!(a.out, PathBuf::from("x"));
        assert!(parse("nested-kv --limit").is_err());
        assert!(parse("nested-kv --bogus").is_err());
        assert!(parse("--offline").is_err());
    }

    #[test]
    fn limits_take_the_first_items_or_a_seeded_sample() {
        let items: Vec<u32> = (0..100).collect();
        assert_eq!(
            parse("x --limit 3").unwrap().limited(items.clone()),
            [0, 1, 2]
        );
        let a = parse("x --limit 5 --seed 7")
            .unwrap()
            .limited(items.clone());
        let b = parse("x --limit 5 --seed 7")
            .unwrap()
            .limited(items.clone());
        let c = parse("x --limit 5 --seed 8")
            .unwrap()
            .limited(items.clone());
        assert_eq!(a, b, "deterministic");
        assert_ne!(a, c);
        assert_eq!(a.len(), 5);
        assert!(a.windows(2).all(|w| w[0] < w[1]), "original order");
        assert_eq!(parse("x").unwrap().limited(items.clone()).len(), 100);
    }
}
