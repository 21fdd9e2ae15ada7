//! # memgpt-server
//!
//! `memgpt serve`: memgpt-rs agents as a multi-tenant HTTP service any language can call.
//!
//! * **Resources** under `/v1` ([`routes`]): agents, messages (a step per send, or its progress
//!   streamed as Server-Sent Events), memory blocks, archival passages, recall search, the
//!   compiled context window, agent files.
//! * **Tenancy** ([`tenants`], [`auth`]): the admin key creates tenants and their API keys
//!   (random, shown once, stored hashed); a key sees only its tenant's agents, and another
//!   tenant's agent is a `404`, exactly like one that does not exist.
//! * **Errors** ([`error`]): JSON with a stable `code` for every 4xx and 5xx.
//! * **Live agents** ([`hub`]): each agent loaded once per process, one request at a time.
//! * **Timers** ([`timers`]): one-off and repeating timer events in the database, fired once;
//!   they also run agents' consolidation companions (Letta's sleep-time agents) after their
//!   primaries' steps, without the primary waiting.
//! * **Shared memory blocks** (`/v1/blocks`): one block attached to several of a tenant's
//!   agents, edited once, seen by all on their next step.
//! * **Operations**: `/healthz`, `/readyz`, Prometheus metrics at `/metrics` ([`metrics`]),
//!   graceful shutdown.
//! * **OpenAPI 3.1** at `/openapi.json`, generated from the handlers' types (aide).
//! * **An agent inspector** at `/`: a browser view of the agents, their chat, context window,
//!   memory and storage, on the same API (assets compiled in; no external requests).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use memgpt_server::{Server, ServerConfig};
//! # let provider: Arc<dyn memgpt_core::llm::LlmProvider> = unimplemented!();
//! let config = ServerConfig {
//!     admin_key: std::env::var("MEMGPT_ADMIN_KEY").ok(),
//!     ..ServerConfig::default()
//! };
//! let server = Server::open("sqlite://./memgpt-data", provider, None, config).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8283").await?;
//! server.serve(listener, std::future::pending()).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod auth;
pub mod body;
mod consolidation;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod db;
pub mod error;
pub mod hub;
pub mod idempotency;
mod inspector;
mod messenger;
pub mod metrics;
pub mod query;
pub mod reply;
pub mod routes;
mod scheduler;
pub mod state;
mod stepping;
pub mod tenants;
pub mod timers;
pub mod views;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use memgpt_backends::StoreConfig;
use memgpt_core::embed::Embedder;
use memgpt_core::llm::LlmProvider;
use memgpt_core::store::{InMemoryStore, Storage, StoreError};

use crate::hub::AgentHub;
use crate::metrics::Metrics;
pub use crate::routes::openapi;
pub use crate::state::{AppState, ServerConfig, ServerState, ServerTables, TablesError};

/// Errors of starting a server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The store URL is not one.
    #[error("the store URL is not valid: {0}")]
    StoreUrl(#[from] memgpt_backends::StoreUrlError),
    /// The store did not open.
    #[error("opening the store: {0}")]
    Store(#[from] StoreError),
    /// The server's tables could not be created.
    #[error("preparing the server's tables: {0}")]
    Tables(#[from] TablesError),
    /// Another server process serves this SQLite data directory.
    #[error(
        "another `memgpt serve` is serving {0}: on SQLite one process serves a data directory; \
         to run several processes, share a PostgreSQL database (store = \"postgres://...\")"
    )]
    DirectoryBusy(std::path::PathBuf),
    /// Serving failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// A configured server: the routes over one store and one model.
#[derive(Debug, Clone)]
pub struct Server {
    state: AppState,
    /// On SQLite, the data directory's serve lock, held while the server lives.
    directory_lock: Option<Arc<std::fs::File>>,
}

impl Server {
    /// Opens the store at `url` (`sqlite://DIR`, `postgres://...`, `memory://`) with its tenant
    /// tables next to the agents.
    pub async fn open(
        url: &str,
        provider: Arc<dyn LlmProvider>,
        embedder: Option<Arc<dyn Embedder>>,
        config: ServerConfig,
    ) -> Result<Self, ServerError> {
        let store: StoreConfig = url.parse()?;
        #[cfg_attr(not(feature = "sqlite"), allow(unused_mut))]
        let mut directory_lock = None;
        let (storage, tables) = match store {
            StoreConfig::Memory => (
                Storage::from_store(Arc::new(InMemoryStore::new())),
                ServerTables::in_memory(),
            ),
            #[cfg(feature = "sqlite")]
            StoreConfig::Sqlite(options) => {
                directory_lock = Some(Arc::new(lock_directory(&options.dir)?));
                let store = memgpt_backends::SqliteStore::open(options).await?;
                let tables = ServerTables::in_database(db::Db::Sqlite(store.pool().clone()));
                (Storage::from_store(Arc::new(store)), tables)
            }
            #[cfg(feature = "postgres")]
            StoreConfig::Postgres(options) => {
                let store = memgpt_backends::postgres::PgStore::open(options).await?;
                let tables = ServerTables::in_database(db::Db::Postgres(store.pool().clone()));
                (Storage::from_store(Arc::new(store)), tables)
            }
            #[allow(unreachable_patterns)]
            _ => {
                return Err(ServerError::Store(StoreError::InvalidQuery(format!(
                    "{url}: this memgpt-server was built without that store's feature"
                ))));
            }
        };
        tables.migrate().await?;
        let mut server = Self::with_parts(storage, tables, provider, embedder, config);
        server.directory_lock = directory_lock;
        Ok(server)
    }

    /// A server over an opened store and its tables (tests, custom deployments); the tables
    /// must be migrated.
    pub fn with_parts(
        storage: Storage,
        tables: ServerTables,
        provider: Arc<dyn LlmProvider>,
        embedder: Option<Arc<dyn Embedder>>,
        config: ServerConfig,
    ) -> Self {
        let hub = AgentHub::new(storage, provider, embedder, config.live_agents)
            .with_registry(config.functions.clone());
        let state = Arc::new(ServerState {
            hub,
            tenants: tables.tenants,
            timers: tables.timers,
            metrics: Metrics::default(),
            admin_key: config.admin_key.clone(),
            idempotency: idempotency::Idempotency::new(config.idempotency),
            config,
            naming: tokio::sync::Mutex::new(()),
        });
        state
            .hub
            .set_messenger(Arc::new(messenger::HubMessenger::new(Arc::downgrade(
                &state,
            ))));
        Self {
            directory_lock: None,
            state,
        }
    }

    /// The shared state (for embedding the routes in a larger application).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The routes, with `/openapi.json`.
    pub fn router(&self) -> Router {
        routes::router(self.state.clone())
    }

    /// Serves on `listener` (and fires due timers) until `shutdown` completes, then stops
    /// accepting and lets requests in flight finish.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let scheduler = tokio::spawn(scheduler::run_scheduler(self.state.clone(), stopped));
        let served = axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await;
        // Timers fire no more; a timer's step in progress finishes in its own task.
        let _ = stop.send(true);
        let _ = scheduler.await;
        served?;
        Ok(())
    }
}

/// Takes the serve lock of an SQLite data directory (`serve.lock`), or says who holds it.
#[cfg(feature = "sqlite")]
fn lock_directory(dir: &std::path::Path) -> Result<std::fs::File, ServerError> {
    std::fs::create_dir_all(dir)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("serve.lock"))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(ServerError::DirectoryBusy(dir.to_owned())),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}
