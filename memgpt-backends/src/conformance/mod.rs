//! The storage conformance suite, for anyone who writes a store.
//!
//! Every backend in this crate passes the same cases as the in-memory reference
//! ([`InMemoryStore`](memgpt_core::store::InMemoryStore)): agent lifecycle, atomic versioned
//! commits, recall text search and paging, date ranges and message kinds, Unicode and long texts,
//! hostile queries, archival insert/search/delete, facts that are superseded, forgotten or expire, hybrid ranking, shared memory blocks edited from several handles at once, the embedding-space check,
//! persistence across reopen, concurrent commits, all-or-nothing imports, and agreement with the reference on every
//! query. A store written outside this crate runs the very same cases by describing how to open
//! it as a [`StoreUnderTest`] and invoking [`store_conformance_tests!`](crate::store_conformance_tests)
//! in a test file:
//!
//! ```no_run
//! // tests/conformance.rs of a crate with
//! // `memgpt-backends = { version = "…", features = ["conformance"] }` in [dev-dependencies].
//! use std::sync::Arc;
//!
//! use memgpt_backends::conformance::StoreUnderTest;
//! use memgpt_backends::{InMemoryStore, Storage};
//!
//! fn my_store() -> StoreUnderTest {
//!     // Open the store under test here; `InMemoryStore` stands in for yours.
//!     let shared = Storage::from_store(Arc::new(InMemoryStore::new()));
//!     StoreUnderTest::new("my store", move || {
//!         let storage = shared.clone();
//!         async move { storage }
//!     })
//! }
//!
//! memgpt_backends::store_conformance_tests!(my_store());
//! # fn main() {}
//! ```
//!
//! Each case is an ordinary `#[test]` that builds its own multi-threaded tokio runtime and
//! panics with the store's name on the first broken expectation, so a failure reads like any
//! other test failure. The cases are also public async functions in [`cases`] for harnesses
//! that want to run them another way. The SIGKILL crash campaign ([`crash::Campaign`]) needs a
//! child process to kill, so it is not one of the generated tests: a test (or a program) names
//! the child command and runs it.
//!
//! Requires the `conformance` feature.

mod blocks;
pub mod cases;
pub mod crash;
mod documents;
pub mod fixtures;
mod hybrid;
mod lifetimes;
pub mod model;
mod queue;
mod sequences;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use memgpt_core::store::Storage;

type OpenFuture = Pin<Box<dyn Future<Output = Storage> + Send>>;

/// A store as the conformance cases see it: how to open it (again), whether its data survives
/// that, and anything that must live as long as the store.
///
/// `open` is called once per handle a case needs; a persistent store must show the same data on
/// every handle (the cases drop one handle and open another to test persistence), and a
/// non-persistent store must hand out handles on one shared store.
pub struct StoreUnderTest {
    name: String,
    persistent: bool,
    url: Option<String>,
    open: Box<dyn Fn() -> OpenFuture + Send + Sync>,
    _guard: Option<Box<dyn Send + Sync>>,
}

impl StoreUnderTest {
    /// A store named `name` (it appears in every failure message), opened by `open`.
    /// Not persistent until [`persistent`](Self::persistent) says so.
    pub fn new<F, Fut>(name: impl Into<String>, open: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Storage> + Send + 'static,
    {
        Self {
            name: name.into(),
            persistent: false,
            url: None,
            open: Box::new(move || Box::pin(open())),
            _guard: None,
        }
    }

    /// A store opened from a [`StoreConfig`](crate::StoreConfig) URL (`sqlite://dir?...`,
    /// `postgres://...`), persistent. Opening panics with the URL's error if it does not parse
    /// or the store cannot be opened: in a test that is the clearest report.
    pub fn from_url(name: impl Into<String>, url: impl Into<String>) -> Self {
        let url = url.into();
        let open_url = url.clone();
        let mut store = Self::new(name, move || {
            let url = open_url.clone();
            async move {
                let config: crate::StoreConfig = match url.parse() {
                    Ok(config) => config,
                    Err(e) => panic!("store URL {url:?}: {e}"),
                };
                match config.open().await {
                    Ok(storage) => storage,
                    Err(e) => panic!("open {url:?}: {e}"),
                }
            }
        });
        store.persistent = true;
        store.url = Some(url);
        store
    }

    /// The in-memory reference store, shared by every handle.
    pub fn in_memory() -> Self {
        let shared =
            Storage::from_store(std::sync::Arc::new(memgpt_core::store::InMemoryStore::new()));
        Self::new("memory", move || {
            let storage = shared.clone();
            async move { storage }
        })
    }

    /// Marks the store persistent: data committed through one handle is there after it is
    /// dropped and another is opened. Enables the reopen cases.
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// Keeps `guard` (a temporary directory, a database schema dropped on `Drop`, a server)
    /// alive as long as the store under test.
    pub fn keep(mut self, guard: impl Send + Sync + 'static) -> Self {
        self._guard = Some(Box::new(guard));
        self
    }

    /// The name failure messages use.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether data survives reopening.
    pub fn is_persistent(&self) -> bool {
        self.persistent
    }

    /// The URL another process can open the store with, if it was made by
    /// [`from_url`](Self::from_url).
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// A fresh handle on the store's data.
    pub async fn open(&self) -> Storage {
        (self.open)().await
    }

    /// A second handle on the data `first` opened, as another process has (a pool of its
    /// own); a store with a tantivy index admits one opener per directory, so it shares
    /// `first`.
    pub async fn another_handle(&self, first: &Storage) -> Storage {
        if self.url().is_some_and(admits_one_opener) {
            first.clone()
        } else {
            self.open().await
        }
    }
}

/// Whether the store at `url` admits one opener of its directory at a time: SQLite with tantivy
/// recall, whether the URL names it or takes [`SqliteOptions::recommended`](crate::SqliteOptions::recommended)'s.
fn admits_one_opener(url: &str) -> bool {
    #[cfg(feature = "tantivy")]
    if let Ok(crate::StoreConfig::Sqlite(options)) = crate::StoreConfig::from_url(url) {
        return options.recall == crate::RecallIndex::Tantivy;
    }
    let _ = url;
    false
}

impl fmt::Debug for StoreUnderTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreUnderTest")
            .field("name", &self.name)
            .field("persistent", &self.persistent)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Runs `future` until it has waited `waits` times (each time one of its awaits was pending:
/// a query, a blocking task, a lock) and drops it there, unfinished; a future that finishes
/// first just finishes. Waiting for its wake-up before polling again, as an executor does,
/// makes "the n-th await" the same place on every run, so a failure shrinks.
pub(crate) async fn drop_after_waits<F: Future>(future: F, waits: u8) {
    struct Wakeup(tokio::sync::Notify);
    impl std::task::Wake for Wakeup {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.notify_one();
        }
    }
    let wakeup = std::sync::Arc::new(Wakeup(tokio::sync::Notify::new()));
    let waker = std::task::Waker::from(wakeup.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    for _ in 0..=waits {
        if future.as_mut().poll(&mut cx).is_ready() {
            return;
        }
        // Bounded: a future that is never woken again is dropped all the same.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), wakeup.0.notified()).await;
    }
}

/// Runs `future` to completion on a fresh two-worker tokio runtime: how every test that
/// [`store_conformance_tests!`](crate::store_conformance_tests) generates runs its case.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => panic!("cannot start a tokio runtime for the conformance case: {e}"),
    };
    runtime.block_on(future)
}

/// Expands to one `#[test]` per conformance case, each run against the store the expression
/// builds (a [`StoreUnderTest`](crate::conformance::StoreUnderTest), or an
/// `Option<StoreUnderTest>` where `None` skips the case, for example when a database URL is not
/// set). The expression is evaluated afresh for every case. Invoke it once per store, each in its
/// own module; see [the module documentation](crate::conformance).
///
/// A store whose data survives reopening adds `persistent`
/// (`store_conformance_tests!(my_store(), persistent)`), which adds the cases that drop every
/// handle and open the store again; they fail for a store that is not
/// [persistent](crate::conformance::StoreUnderTest::persistent). A store without it runs no
/// persistence case at all, rather than passing one that cannot apply.
#[macro_export]
macro_rules! store_conformance_tests {
    ($store:expr, persistent) => {
        $crate::store_conformance_tests!($store);
        $crate::store_conformance_tests!(@cases $store; persistence_across_reopen);
    };
    ($store:expr) => {
        $crate::__every_conformance_case!(store_conformance_tests { @cases $store; });
    };
    (@cases $store:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::conformance::block_on(async {
                    let store: ::core::option::Option<$crate::conformance::StoreUnderTest> =
                        ::core::convert::Into::into($store);
                    if let ::core::option::Option::Some(store) = store {
                        $crate::conformance::cases::$case(&store).await;
                    }
                });
            }
        )*
    };
}

/// Hands the name of every case any store runs, after `$prefix`, to the exported macro
/// `$callback`: the one list behind both [`store_conformance_tests!`](crate::store_conformance_tests)
/// and [`ALL_CASES`](crate::conformance::cases::ALL_CASES), so neither can miss a case.
#[doc(hidden)]
#[macro_export]
macro_rules! __every_conformance_case {
    ($callback:ident { $($prefix:tt)* }) => {
        $crate::$callback! { $($prefix)*
            agents_lifecycle,
            commits_are_atomic_and_versioned,
            recall_text_search_and_pagination,
            recall_date_ranges_and_kinds,
            unicode_and_long_texts,
            hostile_queries_never_error,
            archival_insert_search_delete,
            archival_hybrid_and_text,
            archival_finds_an_exact_match_among_equal_vectors,
            embedding_space_is_enforced,
            concurrent_commits,
            agrees_with_the_reference,
            hybrid_recall_agrees_with_the_reference,
            message_embeddings_are_checked_and_backfilled,
            long_messages_are_found_by_every_window,
            embeddings_can_be_cleared_and_rebuilt,
            extreme_pages_are_safe,
            archival_filters_by_tag_and_date,
            archival_ranking_agrees_with_the_reference,
            facts_with_a_lifetime_agree_with_the_reference,
            shared_blocks_are_exact,
            queues_change_by_what_a_step_changed,
            documents_follow_commits_of_another_handle,
            imports_are_all_or_nothing,
            nul_characters_are_refused_alike,
            rows_after_deletions_are_found,
            dropped_calls_leave_nothing_open,
        }
    };
}

/// The macro as a store author invokes it, on the embedded SQLite store with `persistent`: one
/// `#[test]` per case of [`ALL_CASES`](cases::ALL_CASES) and
/// [`PERSISTENT_CASES`](cases::PERSISTENT_CASES).
#[cfg(all(test, feature = "sqlite"))]
mod the_macro_expands_to_every_case {
    fn sqlite() -> super::StoreUnderTest {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}", dir.path().display());
        super::StoreUnderTest::from_url("sqlite (macro)", url).keep(dir)
    }

    crate::store_conformance_tests!(sqlite(), persistent);
}
