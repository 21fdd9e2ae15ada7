//! What a storage backend is built with, beyond the seams of [`store`](crate::store): how
//! recall storage's documents are made and counted, so a store's full-text index holds what
//! [`retrieval`](crate::retrieval) ranks. Applications never need these; store authors do (as
//! sqlx keeps its driver-facing API apart from the user's).
//!
//! * [`DocumentBuilder`] and [`MessageDocument`]: the search document of each message, built
//!   in append order (a store keeps each agent's latest [`WINDOW_NEIGHBOURS`] conversation
//!   turns to continue it).
//! * [`TermStatistics`]: the collection statistics a store reports with its text candidates.
//! * [`ANALYZER_VERSION`]: stores record it and rebuild their documents when it changes.
//!
//! The crash tests' failpoints are in [`failpoint`](crate::failpoint); the scripted provider
//! for tests in [`testing`](crate::testing).

pub use crate::retrieval::analyzer::ANALYZER_VERSION;
pub use crate::retrieval::bm25::TermStatistics;
pub use crate::retrieval::document::{DocumentBuilder, MessageDocument, WINDOW_NEIGHBOURS};
