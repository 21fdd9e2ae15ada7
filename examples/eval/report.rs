//! Resumable results (one JSON line per finished item), progress bars and summary tables.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Finished items of one harness run, kept in `DIR/<name>.jsonl`.
#[derive(Debug)]
pub struct Results<T> {
    dir: PathBuf,
    name: String,
    done: Mutex<BTreeMap<String, T>>,
    file: Mutex<File>,
}

#[derive(serde::Deserialize, Serialize)]
struct Line<T> {
    id: String,
    result: T,
}

/// The first line of a results file: the run it belongs to.
#[derive(serde::Deserialize, Serialize)]
struct Header {
    fingerprint: serde_json::Value,
}

impl<T: Serialize + DeserializeOwned + Clone> Results<T> {
    /// Opens (or, with `fresh`, restarts) `dir/name.jsonl` for the run `fingerprint` (see
    /// [`Args::fingerprint`](crate::args::Args::fingerprint)). Lines of a run with another
    /// fingerprint (other data, model, embedder, sample...) are never reused: the file starts
    /// over, saying so. A torn last line from an interrupted run is ignored; that item runs
    /// again.
    pub fn open(
        dir: &Path,
        name: &str,
        fresh: bool,
        fingerprint: serde_json::Value,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(format!("{name}.jsonl"));
        let mut done = BTreeMap::new();
        if fresh {
            let _ = std::fs::remove_file(&path);
        } else if let Ok(file) = File::open(&path) {
            let mut lines = BufReader::new(file).lines();
            let same_run = match lines.next().transpose()? {
                Some(first) => serde_json::from_str::<Header>(&first)
                    .is_ok_and(|h| h.fingerprint == fingerprint),
                None => true,
            };
            if same_run {
                for line in lines {
                    let line = line?;
                    if let Ok(Line { id, result }) = serde_json::from_str::<Line<T>>(&line) {
                        done.insert(id, result);
                    }
                }
            } else {
                eprintln!(
                    "note: {} holds results of another run (other data, models or settings); starting over",
                    path.display()
                );
            }
        }
        // Rewrite the file from what parsed, so a torn line cannot glue onto the next one.
        let mut file =
            File::create(&path).with_context(|| format!("writing {}", path.display()))?;
        serde_json::to_writer(&mut file, &Header { fingerprint })?;
        file.write_all(b"\n")?;
        for (id, result) in &done {
            serde_json::to_writer(
                &mut file,
                &Line {
                    id: id.clone(),
                    result,
                },
            )?;
            file.write_all(b"\n")?;
        }
        drop(file);
        let file = OpenOptions::new().append(true).open(&path)?;
        Ok(Self {
            dir: dir.to_owned(),
            name: name.to_owned(),
            done: Mutex::new(done),
            file: Mutex::new(file),
        })
    }

    /// Whether `id` finished in this or an earlier run.
    pub fn contains(&self, id: &str) -> bool {
        self.done.lock().is_ok_and(|d| d.contains_key(id))
    }

    /// Records a finished item (appended and flushed at once).
    pub fn record(&self, id: &str, result: T) -> Result<()> {
        let line = serde_json::to_string(&Line {
            id: id.to_owned(),
            result: &result,
        })?;
        {
            let mut file = self.file.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            file.write_all(line.as_bytes())?;
            file.write_all(b"\n")?;
            file.flush()?;
        }
        if let Ok(mut done) = self.done.lock() {
            done.insert(id.to_owned(), result);
        }
        Ok(())
    }

    /// Every finished item, by id.
    pub fn all(&self) -> Vec<(String, T)> {
        self.done
            .lock()
            .map(|d| d.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// Writes `DIR/<name>.md` and `DIR/<name>.summary.json` (and says where on stderr);
    /// returns the markdown.
    pub fn write_summary(&self, markdown: String, json: &impl Serialize) -> Result<String> {
        std::fs::write(self.dir.join(format!("{}.md", self.name)), &markdown)?;
        std::fs::write(
            self.dir.join(format!("{}.summary.json", self.name)),
            serde_json::to_string_pretty(json)?,
        )?;
        eprintln!(
            "results: {}/{}.{{jsonl,md,summary.json}}",
            self.dir.display(),
            self.name
        );
        Ok(markdown)
    }
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>16} [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

/// A markdown table.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|", headers.join(" | "));
    for _ in headers {
        out.push_str("---|");
    }
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// `x` as a percentage with one decimal.
pub fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// The mean of `xs` (0 for none).
pub fn mean(xs: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = xs
        .into_iter()
        .fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_resume_and_survive_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let run = || serde_json::json!({"model": "m1"});
        let r = Results::<u32>::open(dir.path(), "x", false, run()).unwrap();
        r.record("a", 1).unwrap();
        r.record("b", 2).unwrap();
        drop(r);
        let path = dir.path().join("x.jsonl");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"id\": \"c\", \"res");
        std::fs::write(&path, text).unwrap();
        let r = Results::<u32>::open(dir.path(), "x", false, run()).unwrap();
        assert!(r.contains("a") && r.contains("b") && !r.contains("c"));
        r.record("c", 3).unwrap();
        drop(r);
        let r = Results::<u32>::open(dir.path(), "x", false, run()).unwrap();
        assert_eq!(r.all().len(), 3);
        drop(r);
        // Another run (here: another model) reuses nothing.
        let other =
            Results::<u32>::open(dir.path(), "x", false, serde_json::json!({"model": "m2"}))
                .unwrap();
        assert!(other.all().is_empty());
        drop(other);
        let r = Results::<u32>::open(dir.path(), "x", false, run()).unwrap();
        assert!(
            r.all().is_empty(),
            "the other run's file replaced this one's"
        );
        let r = Results::<u32>::open(dir.path(), "x", true, run()).unwrap();
        assert!(r.all().is_empty());
    }

    #[test]
    fn tables_and_means() {
        assert_eq!(
            table(&["a", "b"], &[vec!["1".into(), "2".into()]]),
            "| a | b |\n|---|---|\n| 1 | 2 |\n"
        );
        assert_eq!(mean([1.0, 2.0]), 1.5);
        assert_eq!(mean([]), 0.0);
        assert_eq!(percent(0.5), "50.0%");
    }
}
