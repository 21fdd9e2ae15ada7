//! `embeddings`: real sentence embeddings of the shared data, written in the `.fvecs` format of
//! the ANN benchmarks, so the storage benchmark can check its synthetic vectors against real
//! ones (`cargo bench -p memgpt-backends --bench storage -- --calibrate DIR`).
//!
//! The base set is what an agent would store: every LoCoMo turn, LoCoMo observation and NQ
//! passage, and each sentence of the NQ passages. The query set is what it would search with:
//! the NQ and LoCoMo questions.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::args::Args;
use crate::data::{self, NqQuestion};
use crate::embed;

const NQ: &str = "nq_open/nq-open-oracle.jsonl.gz";
const LOCOMO: &str = "locomo/locomo5_dev.json";

/// Embeds the texts and writes `DIR/real-base.fvecs` and `DIR/real-query.fvecs`. Reads two
/// datasets, so `--data` names the data folder (laid out like ../shared/data) rather than a file.
pub async fn run(args: &Args) -> Result<String> {
    let (nq_path, locomo_path) = match &args.data {
        Some(root) => (root.join(NQ), root.join(LOCOMO)),
        None => (args.data_file(NQ)?, args.data_file(LOCOMO)?),
    };
    let nq: Vec<NqQuestion> = data::json_lines(&nq_path)?;
    let locomo = data::locomo(&locomo_path)?;
    let (mut base, mut queries) = (Vec::new(), Vec::new());
    for q in &nq {
        queries.push(q.question.clone());
        if let Some(gold) = q.gold() {
            base.push(gold.document());
            base.extend(sentences(&gold.text));
        }
    }
    for c in &locomo {
        base.extend(
            c.sessions
                .iter()
                .flat_map(|s| s.turns.iter().map(|t| t.content())),
        );
        base.extend(c.facts.iter().map(|(_, _, fact)| fact.clone()));
        queries.extend(c.questions.iter().map(|q| q.question.clone()));
    }
    base.sort();
    base.dedup();
    queries.sort();
    queries.dedup();
    let base = args.limited(base);
    let embedder = embed::embedder(args)?;
    let base_vectors = embed::embed_all(embedder.as_ref(), &base, "base texts").await?;
    let query_vectors = embed::embed_all(embedder.as_ref(), &queries, "queries").await?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let base_path = args.out.join("real-base.fvecs");
    let query_path = args.out.join("real-query.fvecs");
    write_fvecs(&base_path, &base_vectors)?;
    write_fvecs(&query_path, &query_vectors)?;
    Ok(format!(
        "{} base vectors -> {}\n{} query vectors -> {}\n(model {}, {} dimensions)",
        base_vectors.len(),
        crate::args::shown(&base_path),
        query_vectors.len(),
        crate::args::shown(&query_path),
        embedder.model(),
        embedder.dimension()
    ))
}

/// Sentences of at least four words: split after `.`, `!` or `?` followed by a space.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let end = matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| *n == b' ');
        if end {
            out.push(text[start..=i].trim().to_owned());
            start = i + 1;
        }
    }
    out.push(text[start..].trim().to_owned());
    out.retain(|s| s.split_whitespace().count() >= 4);
    out
}

/// `.fvecs`: each vector as its dimension (little-endian i32), then its floats.
fn write_fvecs(path: &Path, vectors: &[Vec<f32>]) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for v in vectors {
        out.write_all(&i32::try_from(v.len())?.to_le_bytes())?;
        for x in v {
            out.write_all(&x.to_le_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_on_terminal_punctuation() {
        assert_eq!(
            sentences("The cat sat down. It was 3.5 m tall! Why is it so? ok then"),
            vec!["The cat sat down.", "It was 3.5 m tall!", "Why is it so?"]
        );
    }

    #[test]
    fn fvecs_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.fvecs");
        write_fvecs(&path, &[vec![1.0, -2.0], vec![0.5, 0.25]]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 2 * (4 + 8));
        assert_eq!(&bytes[..4], &2i32.to_le_bytes());
        assert_eq!(&bytes[4..8], &1.0f32.to_le_bytes());
        assert_eq!(&bytes[12..16], &2i32.to_le_bytes());
    }
}
