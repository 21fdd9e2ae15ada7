//! Choosing and composing stores from a URL.

use std::str::FromStr;
use std::sync::Arc;

use memgpt_core::store::{InMemoryStore, Storage, StoreError};

/// Why a store URL could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The scheme is not one of `memory`, `sqlite`, `postgres`.
    #[error("unsupported store URL `{0}`: use memory://, sqlite://PATH or postgres://...")]
    UnknownScheme(String),
    /// The URL needs a backend this build does not include.
    #[error(
        "`{url}` needs the `{feature}` Cargo feature of memgpt, which this build does not enable"
    )]
    FeatureDisabled {
        /// The URL.
        url: String,
        /// The feature to enable.
        feature: &'static str,
    },
    /// A query parameter is unknown or has a bad value.
    #[error("invalid store URL parameter `{name}={value}`: {expected}")]
    InvalidParameter {
        /// The parameter.
        name: String,
        /// Its value.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// The URL has no path where one is needed.
    #[error("`{0}` has no path: use sqlite://./data or sqlite:///absolute/path")]
    MissingPath(String),
}

/// Which stores to use, parsed from a URL:
///
/// * `memory://`: everything in process memory ([`InMemoryStore`]).
/// * `sqlite://PATH`: the embedded stack in the data directory `PATH` (`./data`, or
///   `/abs/path` as `sqlite:///abs/path`), with tantivy recall and usearch archival when those
///   features are compiled in. Parameters: `recall=fts5|tantivy`, `vectors=exact|usearch`,
///   `quantization=f32|f16|bf16|i8`, `ef_search=N`, `ef_construction=N`, `connectivity=N` (usearch
///   HNSW parameters), `sync=normal|full`.
/// * `postgres://...` (or `postgresql://`): PostgreSQL + pgvector (feature `postgres`).
///   Parameters of ours (the rest go to sqlx): `schema=NAME`, `ef_search=N` (1-1000, the
///   smallest HNSW candidate list of a vector search; default 100).
///
/// ```
/// use memgpt_backends::StoreConfig;
///
/// assert_eq!("memory://".parse::<StoreConfig>().unwrap(), StoreConfig::Memory);
/// assert!("mysql://x".parse::<StoreConfig>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum StoreConfig {
    /// [`InMemoryStore`].
    Memory,
    /// [`SqliteStore`](crate::SqliteStore).
    #[cfg(feature = "sqlite")]
    Sqlite(crate::SqliteOptions),
    /// `PgStore`.
    #[cfg(feature = "postgres")]
    Postgres(crate::postgres::PgOptions),
}

impl StoreConfig {
    /// Parses a store URL (see the type's documentation).
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        let url = url.trim();
        let (scheme, rest) = url
            .split_once(':')
            .ok_or_else(|| ConfigError::UnknownScheme(url.to_owned()))?;
        match scheme {
            "memory" => Ok(StoreConfig::Memory),
            "sqlite" => Self::sqlite(url, rest.strip_prefix("//").unwrap_or(rest)),
            "postgres" | "postgresql" => Self::postgres(url),
            _ => Err(ConfigError::UnknownScheme(url.to_owned())),
        }
    }

    #[cfg(feature = "sqlite")]
    fn sqlite(url: &str, rest: &str) -> Result<Self, ConfigError> {
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err(ConfigError::MissingPath(url.to_owned()));
        }
        let mut options = crate::SqliteOptions::recommended(path);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let invalid = |expected| ConfigError::InvalidParameter {
                name: name.to_owned(),
                value: value.to_owned(),
                expected,
            };
            match (name, value) {
                ("recall", "fts5") => options.recall = crate::RecallIndex::Fts5,
                #[cfg(feature = "tantivy")]
                ("recall", "tantivy") => options.recall = crate::RecallIndex::Tantivy,
                #[cfg(not(feature = "tantivy"))]
                ("recall", "tantivy") => {
                    return Err(ConfigError::FeatureDisabled {
                        url: url.to_owned(),
                        feature: "tantivy",
                    });
                }
                ("recall", _) => return Err(invalid("fts5 or tantivy")),
                ("vectors", "exact") => options.vectors = crate::VectorIndex::Exact,
                #[cfg(feature = "usearch")]
                ("vectors", "usearch") => {
                    if !matches!(options.vectors, crate::VectorIndex::Usearch(_)) {
                        options.vectors = crate::VectorIndex::Usearch(Default::default());
                    }
                }
                #[cfg(not(feature = "usearch"))]
                ("vectors", "usearch") => {
                    return Err(ConfigError::FeatureDisabled {
                        url: url.to_owned(),
                        feature: "usearch",
                    });
                }
                ("vectors", _) => return Err(invalid("exact or usearch")),
                #[cfg(feature = "usearch")]
                ("quantization", q) => {
                    let quantization: crate::Quantization =
                        q.parse().map_err(|_| invalid("f32, f16, bf16 or i8"))?;
                    let mut usearch = match &options.vectors {
                        crate::VectorIndex::Usearch(u) => u.clone(),
                        _ => crate::UsearchOptions::default(),
                    };
                    usearch.quantization = quantization;
                    options.vectors = crate::VectorIndex::Usearch(usearch);
                }
                #[cfg(feature = "usearch")]
                ("ef_search" | "ef_construction" | "connectivity", n) => {
                    let n: usize = n
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| invalid("a positive integer"))?;
                    let mut usearch = match &options.vectors {
                        crate::VectorIndex::Usearch(u) => u.clone(),
                        _ => crate::UsearchOptions::default(),
                    };
                    match name {
                        "ef_search" => usearch.expansion_search = n,
                        "ef_construction" => usearch.expansion_add = n,
                        _ => usearch.connectivity = n,
                    }
                    options.vectors = crate::VectorIndex::Usearch(usearch);
                }
                ("sync", "normal") => options.full_sync = false,
                ("sync", "full") => options.full_sync = true,
                ("sync", _) => return Err(invalid("normal or full")),
                _ => {
                    return Err(invalid(
                        "one of recall, vectors, quantization, ef_search, ef_construction, \
                         connectivity, sync",
                    ));
                }
            }
        }
        Ok(StoreConfig::Sqlite(options))
    }

    #[cfg(not(feature = "sqlite"))]
    fn sqlite(url: &str, _rest: &str) -> Result<Self, ConfigError> {
        Err(ConfigError::FeatureDisabled {
            url: url.to_owned(),
            feature: "sqlite",
        })
    }

    #[cfg(feature = "postgres")]
    fn postgres(url: &str) -> Result<Self, ConfigError> {
        let query = url.split_once('?').map_or("", |(_, q)| q);
        for pair in query.split('&') {
            if let Some(("ef_search", value)) = pair.split_once('=')
                && crate::postgres::parse_ef_search(value).is_none()
            {
                return Err(ConfigError::InvalidParameter {
                    name: "ef_search".into(),
                    value: value.into(),
                    expected: "an integer from 1 to 1000",
                });
            }
        }
        Ok(StoreConfig::Postgres(crate::postgres::PgOptions::new(url)))
    }

    #[cfg(not(feature = "postgres"))]
    fn postgres(url: &str) -> Result<Self, ConfigError> {
        Err(ConfigError::FeatureDisabled {
            url: url.to_owned(),
            feature: "postgres",
        })
    }

    /// Opens (creating and migrating as needed) the configured stores.
    pub async fn open(&self) -> Result<Storage, StoreError> {
        match self {
            StoreConfig::Memory => Ok(Storage::from_store(Arc::new(InMemoryStore::new()))),
            #[cfg(feature = "sqlite")]
            StoreConfig::Sqlite(options) => Ok(Storage::from_store(Arc::new(
                crate::SqliteStore::open(options.clone()).await?,
            ))),
            #[cfg(feature = "postgres")]
            StoreConfig::Postgres(options) => Ok(Storage::from_store(Arc::new(
                crate::postgres::PgStore::open(options.clone()).await?,
            ))),
        }
    }
}

impl FromStr for StoreConfig {
    type Err = ConfigError;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        Self::from_url(url)
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls() {
        let StoreConfig::Sqlite(options) =
            StoreConfig::from_url("sqlite://./data?recall=fts5&vectors=exact&sync=full").unwrap()
        else {
            panic!("not sqlite")
        };
        assert_eq!(options.dir, std::path::PathBuf::from("./data"));
        assert_eq!(options.recall, crate::RecallIndex::Fts5);
        assert_eq!(options.vectors, crate::VectorIndex::Exact);
        assert!(options.full_sync);
        let StoreConfig::Sqlite(options) =
            StoreConfig::from_url("sqlite:///var/lib/memgpt").unwrap()
        else {
            panic!("not sqlite")
        };
        assert_eq!(options.dir, std::path::PathBuf::from("/var/lib/memgpt"));
        assert!(matches!(
            StoreConfig::from_url("sqlite://"),
            Err(ConfigError::MissingPath(_))
        ));
        assert!(matches!(
            StoreConfig::from_url("sqlite://x?recall=bm42"),
            Err(ConfigError::InvalidParameter { .. })
        ));
        assert!(matches!(
            StoreConfig::from_url("sqlite://x?colour=blue"),
            Err(ConfigError::InvalidParameter { .. })
        ));
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_ef_search() {
        let StoreConfig::Postgres(options) =
            StoreConfig::from_url("postgres://h/db?schema=s&ef_search=300").unwrap()
        else {
            panic!("not postgres")
        };
        assert_eq!(
            (options.ef_search, options.schema.as_deref()),
            (300, Some("s"))
        );
        for bad in ["0", "1001", "x", ""] {
            assert!(
                matches!(
                    StoreConfig::from_url(&format!("postgres://h/db?ef_search={bad}")),
                    Err(ConfigError::InvalidParameter { .. })
                ),
                "ef_search={bad}"
            );
        }
    }

    #[cfg(feature = "usearch")]
    #[test]
    fn hnsw_parameters() {
        let StoreConfig::Sqlite(options) = StoreConfig::from_url(
            "sqlite://x?vectors=usearch&ef_search=256&quantization=i8&connectivity=32&ef_construction=200",
        )
        .unwrap() else {
            panic!("not sqlite")
        };
        let crate::VectorIndex::Usearch(usearch) = options.vectors else {
            panic!("not usearch")
        };
        assert_eq!(
            (
                usearch.expansion_search,
                usearch.connectivity,
                usearch.expansion_add,
                usearch.quantization
            ),
            (256, 32, 200, crate::Quantization::I8)
        );
        let StoreConfig::Sqlite(options) =
            StoreConfig::from_url("sqlite://x?quantization=bf16").unwrap()
        else {
            panic!("not sqlite")
        };
        assert!(matches!(
            options.vectors,
            crate::VectorIndex::Usearch(crate::UsearchOptions {
                quantization: crate::Quantization::BF16,
                ..
            })
        ));
        assert!(matches!(
            StoreConfig::from_url("sqlite://x?quantization=f8"),
            Err(ConfigError::InvalidParameter { .. })
        ));
        assert!(matches!(
            StoreConfig::from_url("sqlite://x?ef_search=0"),
            Err(ConfigError::InvalidParameter { .. })
        ));
    }
}
