//! `sqlite://` store URLs.

#[cfg(feature = "usearch")]
use super::{Quantization, UsearchOptions};
use super::{RecallIndex, SqliteOptions, VectorIndex};
use crate::url::{StoreUrlError, query_pairs};

impl SqliteOptions {
    /// Options for an `sqlite://PATH?params` store URL: the data directory `PATH` (`./data`,
    /// or `/abs/path` as `sqlite:///abs/path`) with [`SqliteOptions::recommended`] indexes,
    /// changed by the parameters `recall=fts5|tantivy`, `vectors=exact|usearch`,
    /// `quantization=f32|f16|bf16|i8`, `ef_search=N`, `ef_construction=N`, `connectivity=N`
    /// (usearch HNSW parameters), `sync=normal|full` and `mode=rw|ro` (see
    /// [`SqliteOptions::read_only`]).
    ///
    /// ```
    /// use memgpt_backends::{RecallIndex, SqliteOptions};
    ///
    /// let options = SqliteOptions::from_url("sqlite://./data?recall=fts5&sync=full").unwrap();
    /// assert_eq!((options.recall, options.full_sync), (RecallIndex::Fts5, true));
    /// assert!(SqliteOptions::from_url("sqlite://./data?colour=blue").is_err());
    /// ```
    pub fn from_url(url: &str) -> Result<Self, StoreUrlError> {
        let rest = url
            .trim()
            .strip_prefix("sqlite:")
            .ok_or_else(|| StoreUrlError::UnknownScheme(url.to_owned()))?;
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err(StoreUrlError::MissingPath(url.to_owned()));
        }
        let mut options = Self::recommended(path);
        for (name, value) in query_pairs(query) {
            let invalid = |expected| StoreUrlError::invalid(name, value, expected);
            match (name, value) {
                ("recall", "fts5") => options.recall = RecallIndex::Fts5,
                #[cfg(feature = "tantivy")]
                ("recall", "tantivy") => options.recall = RecallIndex::Tantivy,
                #[cfg(not(feature = "tantivy"))]
                ("recall", "tantivy") => {
                    return Err(StoreUrlError::FeatureDisabled {
                        url: url.to_owned(),
                        feature: "tantivy",
                    });
                }
                ("recall", _) => return Err(invalid("fts5 or tantivy")),
                ("vectors", "exact") => options.vectors = VectorIndex::Exact,
                #[cfg(feature = "usearch")]
                ("vectors", "usearch") => {
                    if !matches!(options.vectors, VectorIndex::Usearch(_)) {
                        options.vectors = VectorIndex::Usearch(Default::default());
                    }
                }
                #[cfg(not(feature = "usearch"))]
                ("vectors", "usearch") => {
                    return Err(StoreUrlError::FeatureDisabled {
                        url: url.to_owned(),
                        feature: "usearch",
                    });
                }
                ("vectors", _) => return Err(invalid("exact or usearch")),
                #[cfg(feature = "usearch")]
                ("quantization", q) => {
                    let quantization: Quantization =
                        q.parse().map_err(|_| invalid("f32, f16, bf16 or i8"))?;
                    let mut usearch = match &options.vectors {
                        VectorIndex::Usearch(u) => u.clone(),
                        _ => UsearchOptions::default(),
                    };
                    usearch.quantization = quantization;
                    options.vectors = VectorIndex::Usearch(usearch);
                }
                #[cfg(feature = "usearch")]
                ("ef_search" | "ef_construction" | "connectivity" | "save_every", n) => {
                    let n: usize = n
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| invalid("a positive integer"))?;
                    let mut usearch = match &options.vectors {
                        VectorIndex::Usearch(u) => u.clone(),
                        _ => UsearchOptions::default(),
                    };
                    match name {
                        "ef_search" => usearch.expansion_search = n,
                        "ef_construction" => usearch.expansion_add = n,
                        "save_every" => usearch.save_every = n,
                        _ => usearch.connectivity = n,
                    }
                    options.vectors = VectorIndex::Usearch(usearch);
                }
                #[cfg(feature = "usearch")]
                ("full_scan_kb", n) => {
                    let n: usize = n.parse().map_err(|_| invalid("a number of kilobytes"))?;
                    let mut usearch = match &options.vectors {
                        VectorIndex::Usearch(u) => u.clone(),
                        _ => UsearchOptions::default(),
                    };
                    usearch.full_scan_kb = n;
                    options.vectors = VectorIndex::Usearch(usearch);
                }
                ("sync", "normal") => options.full_sync = false,
                ("sync", "full") => options.full_sync = true,
                ("sync", _) => return Err(invalid("normal or full")),
                ("mode", "rw") => options.read_only = false,
                ("mode", "ro") => options.read_only = true,
                ("mode", _) => return Err(invalid("rw or ro")),
                _ => {
                    return Err(invalid(
                        "one of recall, vectors, quantization, ef_search, ef_construction, \
                         connectivity, save_every, full_scan_kb, sync",
                    ));
                }
            }
        }
        Ok(options)
    }
}
