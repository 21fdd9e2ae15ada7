//! `memgpt ingest`: the paper's document upload from the command line. Text, Markdown, HTML and
//! PDF files (folders recursively) are split into overlapping token chunks, embedded in batches
//! and stored in the agent's archival memory.
//!
//! Every passage records its file's SHA-256 and its chunk number, so ingesting a file again adds
//! nothing, and an ingest stopped half-way (Ctrl-C, a crash) adds only the chunks no committed
//! batch holds. A file is read, extracted and chunked one at a time; chunks are embedded and
//! committed in batches, so memory stays bounded by one file's text.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use memgpt::chunk::{PassageBudget, chunk_text_with_overlap};
use memgpt::store::Page;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::open;
use crate::settings::Settings;

/// Chunks embedded and committed together.
const BATCH: usize = 32;

/// File types ingest reads, by extension.
const KNOWN: &[&str] = &["txt", "text", "md", "markdown", "html", "htm", "pdf"];

pub async fn run(settings: &Settings, name: &str, paths: &[PathBuf]) -> Result<()> {
    let files = collect(paths)?;
    if files.is_empty() {
        bail!(
            "no text, Markdown, HTML or PDF files in {}",
            display_paths(paths)
        );
    }
    let storage = open::storage(settings).await?;
    let Some(state) = open::find_agent(&storage, name).await? else {
        bail!("no agent named `{name}` (create it with `memgpt chat --agent {name}`)");
    };
    // Embedding needs only the embedder; no chat model is involved.
    let embedder = crate::embedders::embedder(
        settings,
        open::stored_space(&storage).await?.as_ref(),
        crate::embedders::WhenMissing::GoWithout,
    )
    .await?;
    let mut builder = memgpt::Agent::builder()
        .without_model()
        .storage(storage.clone());
    if let Some(embedder) = &embedder {
        builder = builder.embedder(embedder.clone());
    }
    let mut agent = builder
        .functions(open::functions_for(&state, None))
        .load(state.id)
        .await
        .with_context(|| format!("loading agent {name}"))?;
    let passage_tokens = agent.config().passage_tokens;
    let overlap = passage_tokens / 6;
    let counter = agent.context().counter().clone();

    let done = ingested_chunks(&storage, state.id).await?;
    let bar = indicatif::ProgressBar::new(files.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:25}] {pos}/{len} files {msg} ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_prefix("ingest");
    let started = Instant::now();
    let (mut added, mut skipped, mut failed) = (0usize, 0usize, 0usize);
    for file in &files {
        let (hash, text) = match read_document(file) {
            Ok(document) => document,
            Err(e) => {
                bar.suspend(|| eprintln!("{}: {e:#}", file.display()));
                failed += 1;
                bar.inc(1);
                continue;
            }
        };
        // Passages fit the agent's budget and the embedder's window (every word embedded).
        let budget = PassageBudget::new(counter.as_ref(), embedder.as_deref(), passage_tokens);
        let chunks = chunk_text_with_overlap(&text, passage_tokens, overlap, &budget);
        drop(text);
        let stored = done.get(&hash);
        let is_stored = |i: &usize| stored.is_some_and(|s| s.contains(i));
        if (0..chunks.len()).all(|i| is_stored(&i)) {
            skipped += 1;
            bar.inc(1);
            continue;
        }
        let total = chunks.len();
        let source = file.display().to_string();
        let mut pending = chunks
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !is_stored(i))
            .peekable();
        while pending.peek().is_some() {
            let batch: Vec<(usize, String)> = pending.by_ref().take(BATCH).collect();
            let batch_start = batch[0].0;
            let items = batch
                .into_iter()
                .map(|(i, text)| {
                    let mut metadata = Map::new();
                    metadata.insert("source".into(), json!(source));
                    metadata.insert("sha256".into(), json!(hash));
                    metadata.insert("chunk".into(), json!(i));
                    metadata.insert("chunks".into(), json!(total));
                    (text, metadata)
                })
                .collect::<Vec<_>>();
            let n = items.len();
            agent
                .insert_archival_chunks(items)
                .await
                .with_context(|| format!("{source}: storing chunks from {batch_start}"))?;
            added += n;
            let rate = added as f64 / started.elapsed().as_secs_f64().max(1e-3);
            bar.set_message(format!("{added} chunks, {rate:.0} chunks/s"));
        }
        bar.inc(1);
    }
    bar.finish();
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "ingested {} files into {name}: {added} new chunks in {seconds:.1} s ({:.0} chunks/s); {skipped} already ingested; {failed} failed",
        files.len() - skipped - failed,
        added as f64 / seconds.max(1e-3),
    );
    if failed > 0 {
        bail!("{failed} of {} files could not be ingested", files.len());
    }
    Ok(())
}

/// Which chunks of each file (by SHA-256) the agent's archival memory already holds.
async fn ingested_chunks(
    storage: &memgpt::store::Storage,
    agent: memgpt::ids::AgentId,
) -> Result<HashMap<String, HashSet<usize>>> {
    let mut counts = HashMap::new();
    let mut page = 0;
    loop {
        let found = storage
            .archival
            .list_passages(agent, Page::new(page, 500))
            .await?;
        for hit in &found.hits {
            let metadata = &hit.item.metadata;
            if let (Some(Value::String(hash)), Some(chunk)) = (
                metadata.get("sha256"),
                metadata.get("chunk").and_then(Value::as_u64),
            ) {
                counts
                    .entry(hash.clone())
                    .or_insert_with(HashSet::new)
                    .insert(chunk as usize);
            }
        }
        if !found.has_more() {
            break;
        }
        page += 1;
    }
    Ok(counts)
}

/// The files under `paths`: files as given, folders recursively (known types only), sorted.
fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
        if meta.is_dir() {
            walk(path, &mut files)?;
        } else {
            files.push(path.clone());
        }
    }
    files.dedup();
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading the folder {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            walk(&path, files)?;
        } else if KNOWN.contains(&extension(&path).as_str()) {
            files.push(path);
        }
    }
    Ok(())
}

fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// A file's SHA-256 (hex) and its text.
fn read_document(path: &Path) -> Result<(String, String)> {
    let bytes = std::fs::read(path)?;
    Ok((hex(&Sha256::digest(&bytes)), extract(path, &bytes)?))
}

/// The text of a file, by its type.
fn extract(path: &Path, bytes: &[u8]) -> Result<String> {
    let text = match extension(path).as_str() {
        "pdf" => pdf_extract::extract_text_from_mem(bytes)
            .map_err(|e| anyhow::anyhow!("not a readable PDF: {e}"))?,
        "html" | "htm" => html2text::from_read(bytes, 100)
            .map_err(|e| anyhow::anyhow!("not readable HTML: {e}"))?,
        _ => String::from_utf8(bytes.to_vec()).map_err(|_| {
            anyhow::anyhow!("not UTF-8 text (ingest reads text, Markdown, HTML and PDF)")
        })?,
    };
    if text.trim().is_empty() {
        bail!("no text in it");
    }
    Ok(text)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
