//! Choosing and composing stores from a URL.

use std::str::FromStr;
use std::sync::Arc;

use memgpt_core::store::{InMemoryStore, Storage, StoreError};

use crate::url::StoreUrlError;

/// Which stores to use, parsed from a URL:
///
/// * `memory://`: everything in process memory ([`InMemoryStore`]).
/// * `sqlite://PATH`: the embedded stack in the data directory `PATH` (`./data`, or
///   `/abs/path` as `sqlite:///abs/path`), with tantivy recall and usearch archival when those
///   features are compiled in. Parameters: `recall=fts5|tantivy`, `vectors=exact|usearch`,
///   `quantization=f32|f16|bf16|i8`, `ef_search=N`, `ef_construction=N`, `connectivity=N` (usearch
///   HNSW parameters), `save_every=N`, `full_scan_kb=N` (searches among at most N KB of vectors
///   scan them exactly; default 10000, 0 never), `sync=normal|full`.
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
    pub fn from_url(url: &str) -> Result<Self, StoreUrlError> {
        let url = url.trim();
        let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
        match scheme {
            "memory" => Ok(StoreConfig::Memory),
            "sqlite" => Self::sqlite(url),
            "postgres" | "postgresql" => Self::postgres(url),
            _ => Err(StoreUrlError::UnknownScheme(url.to_owned())),
        }
    }

    #[cfg(feature = "sqlite")]
    fn sqlite(url: &str) -> Result<Self, StoreUrlError> {
        crate::SqliteOptions::from_url(url).map(StoreConfig::Sqlite)
    }

    #[cfg(not(feature = "sqlite"))]
    fn sqlite(url: &str) -> Result<Self, StoreUrlError> {
        Err(StoreUrlError::FeatureDisabled {
            url: url.to_owned(),
            feature: "sqlite",
        })
    }

    #[cfg(feature = "postgres")]
    fn postgres(url: &str) -> Result<Self, StoreUrlError> {
        crate::postgres::PgOptions::from_url(url).map(StoreConfig::Postgres)
    }

    #[cfg(not(feature = "postgres"))]
    fn postgres(url: &str) -> Result<Self, StoreUrlError> {
        Err(StoreUrlError::FeatureDisabled {
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
    type Err = StoreUrlError;

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
            Err(StoreUrlError::MissingPath(_))
        ));
        assert!(matches!(
            StoreConfig::from_url("sqlite://x?recall=bm42"),
            Err(StoreUrlError::InvalidParameter { .. })
        ));
        assert!(matches!(
            StoreConfig::from_url("sqlite://x?colour=blue"),
            Err(StoreUrlError::InvalidParameter { .. })
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
                    Err(StoreUrlError::InvalidParameter { .. })
                ),
                "ef_search={bad}"
            );
        }
    }

    #[cfg(feature = "usearch")]
    #[test]
    fn hnsw_parameters() {
        let StoreConfig::Sqlite(options) = StoreConfig::from_url(
            "sqlite://x?vectors=usearch&ef_search=256&quantization=i8&connectivity=32&ef_construction=200&full_scan_kb=0",
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
                usearch.quantization,
                usearch.full_scan_kb
            ),
            (256, 32, 200, crate::Quantization::I8, 0)
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
            StoreConfig::from_url("sqlite://x?full_scan_kb=lots"),
            Err(StoreUrlError::InvalidParameter { .. })
        ));
        assert!(matches!(
            StoreConfig::from_url("sqlite://x?quantization=f8"),
            Err(StoreUrlError::InvalidParameter { .. })
        ));
        assert!(matches!(
            StoreConfig::from_url("sqlite://x?ef_search=0"),
            Err(StoreUrlError::InvalidParameter { .. })
        ));
    }
}
