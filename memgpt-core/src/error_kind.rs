//! The kinds of failure, shared by the crate's error types (below all of them).

/// What kind of failure an [`Error`](crate::Error) (or
/// [`StoreError`](crate::store::StoreError)) is: what a caller can do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The agent (or the passage asked for) does not exist.
    NotFound,
    /// An agent with this id already exists.
    AlreadyExists,
    /// Another writer changed the agent meanwhile: reload it and try again.
    Conflict,
    /// The caller's input was refused (too large, empty, another agent's, a bad edit or
    /// query); nothing was stored.
    InvalidInput,
    /// The agent's or store's configuration cannot work (unknown function or policy, no
    /// provider, a window too small, another embedding model).
    Config,
    /// A service was unavailable (storage connection, the embedder): retrying may succeed.
    Unavailable,
    /// Stored data is corrupt or inconsistent.
    Corrupt,
    /// Storage failed for another reason.
    Backend,
}
