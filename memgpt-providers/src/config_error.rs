//! The one configuration error of every provider.

/// Why a provider's configuration could not be built (the same type for every provider).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Nothing in the environment says where the provider is (no key, no base URL).
    #[error("{provider} is not configured: {help}")]
    NotConfigured {
        /// The provider, e.g. `Anthropic`.
        provider: &'static str,
        /// Which variables to set.
        help: &'static str,
    },
    /// A value is malformed.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}
