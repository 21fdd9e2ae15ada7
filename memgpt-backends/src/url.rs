//! Store URLs: the error every backend's URL parsing reports, and the query-string reading
//! they share.

/// Why a store URL could not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreUrlError {
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

/// The `name=value` pairs of a URL's query string (a pair without `=` has an empty value).
#[cfg(feature = "_sql")]
pub(crate) fn query_pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
}

#[cfg(feature = "_sql")]
impl StoreUrlError {
    /// A parameter with a value that is not one of `expected`.
    pub(crate) fn invalid(name: &str, value: &str, expected: &'static str) -> Self {
        StoreUrlError::InvalidParameter {
            name: name.to_owned(),
            value: value.to_owned(),
            expected,
        }
    }
}
