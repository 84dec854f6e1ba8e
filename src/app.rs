//! Composition root: opens the database (store and queue), builds the job service, worker pool and router; binds; and orders
//! shutdown (stop accepting → drain requests → drain workers → close the store).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::ApiKeys;
use crate::config::Config;
use crate::datasets::DatasetService;
use crate::datasets::sources::SeedSources;
use crate::jobs::{Catalog, JobService};
use crate::llm::{AdmissionPolicy, LlmClient, RetryPolicy, answer_bound};
use crate::mcp::McpPool;
use crate::queue::Queue;
use crate::serve::ConnectionLimits;
use crate::state::AppState;
use crate::store::Store;
use crate::tools::ToolHub;
use crate::worker::WorkerPool;

/// A started service.
pub struct Running {
    /// The bound address (useful with port 0).
    pub addr: SocketAddr,
    /// Cancel to shut down; `wait` returns once everything has stopped.
    pub shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Running {
    /// Waits until the server and workers have stopped and the store is closed.
    pub async fn wait(self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// Starts the service from a validated config. Returns once it is listening.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    crate::install_crypto_provider();
    crate::metrics::install();
    let config = Arc::new(config);
    let db = &config.database;
    let acquire = Duration::from_secs(db.acquire_timeout_sec);
    let database = crate::queue::open(db.url(), &db.sqlite_path, db.max_connections, acquire)
        .await
        .context("opening the database")?;
    let store: Arc<dyn Store> = database.clone();
    let queue: Arc<dyn Queue> = database.clone();
    tracing::info!(
        backend = if db.url().is_some_and(|u| u.starts_with("postgres")) {
            "postgres"
        } else {
            "sqlite"
        },
        "database ready"
    );

    // Once at start, which MCP providers exist and how they connect: names and transports
    // only, since endpoints, commands and headers may carry credentials.
    for p in &config.mcp_providers {
        tracing::info!(
            mcp.provider = %p.name,
            mcp.transport = p.transport().as_str(),
            "MCP provider configured"
        );
    }
    let mcp = McpPool::new(&config.mcp_providers)
        .context("building the MCP clients (config key `mcp_providers`)")?;
    let tools = ToolHub::new(mcp, &config.tools, config.limits.max_tool_result_chars)
        .context("building the inline tools' clients (config key `tools`)")?;
    if config.mcp.connect_on_start {
        connect_mcp_providers(&tools, &config).await;
    }
    let llm = Arc::new(
        LlmClient::new(&config.model_providers, RetryPolicy::from(&config.llm))
            .context("building the LLM client (config key `model_providers`)")?
            .with_max_answer_bytes(answer_bound(config.limits.max_image_bytes))
            .with_admission(AdmissionPolicy::from(&config.llm.admission)),
    );
    llm.register_models(&config.model_configs);
    let jobs = JobService::new(
        database,
        Catalog::from_config(&config),
        config.limits.clone(),
        llm,
        tools.clone(),
    )
    .with_datasets(
        config.datasets.seed_cache_bytes,
        SeedSources::from_config(&config),
    )
    .with_render_dir(config.datasets.upload_dir())
    .with_cache_default(config.llm.cache.default_mode);
    let validators = jobs.validators().clone();
    let owner = config
        .workers
        .replica_id
        .clone()
        .unwrap_or_else(default_replica_id);
    let pool = WorkerPool::new(queue, jobs.clone(), config.workers.clone(), owner);

    let keys = ApiKeys::load(&config.auth, |v| std::env::var(v).ok())?;
    if keys.enabled() {
        tracing::info!(
            keys = config.auth.api_keys.len(),
            "authentication on for /v1 routes"
        );
    }
    let retention = config
        .database
        .job_retention()
        .map(|keep| (jobs.clone(), keep));
    let cache = &config.llm.cache;
    let cache_sweep = (
        jobs.clone(),
        std::time::Duration::from_secs(u64::from(cache.max_age_days) * 86_400),
        cache.max_mib.saturating_mul(1 << 20),
    );
    let datasets = DatasetService::new(store.clone(), config.datasets.clone());
    match datasets.delete_stale_imports().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(datasets = n, "deleted dataset imports left by a crash"),
        // Only invisible rows are left behind; the next import retries.
        Err(e) => tracing::warn!(error = %e, "could not delete stale dataset imports"),
    }
    let shutdown = CancellationToken::new();
    let state = AppState {
        keys,
        tools: tools.clone(),
        jobs,
        datasets,
        config: config.clone(),
        shutdown: shutdown.clone(),
    };
    let addr = format!("{}:{}", config.server.host, config.server.port);
    let listener = TcpListener::bind(&addr)
        .await
        .with_context(|| format!("binding {addr} (config key `server.host`/`server.port`)"))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, worker.owner = pool.owner(), "listening");

    let drain = Duration::from_secs(config.server.shutdown_timeout_sec);
    let tracker = TaskTracker::new();
    let router = crate::api::router(state);
    let server_token = shutdown.clone();
    let workers_token = shutdown.clone();
    let limits = ConnectionLimits::from(&config.server);
    let http = tracker.spawn(async move {
        let serve = crate::serve::serve(listener, router, limits, server_token.clone());
        let deadline = async {
            server_token.cancelled().await;
            tokio::time::sleep(drain).await;
        };
        tokio::select! {
            () = serve => {},
            () = deadline => tracing::warn!("open requests did not finish before the shutdown deadline"),
        }
        tracing::info!("HTTP server stopped");
    });
    let workers = tracker.spawn(pool.run(workers_token, drain));
    tracker.spawn(crate::metrics::upkeep(shutdown.clone()));
    if let Some((jobs, keep)) = retention {
        tracker.spawn(jobs.sweep_expired(keep, shutdown.clone()));
    }
    tracker.spawn(
        cache_sweep
            .0
            .sweep_cache(cache_sweep.1, cache_sweep.2, shutdown.clone()),
    );
    // Python code validators need ruff: found, or fetched (the pinned release) in the
    // background, so a server without it starts at once and says what it did.
    let fetch_token = shutdown.clone();
    tracker.spawn(async move {
        tokio::select! {
            () = validators.provision_ruff() => {}
            () = fetch_token.cancelled() => {}
        }
    });
    tracker.spawn(async move {
        let _ = http.await;
        let _ = workers.await;
        // After the workers: no record needs a tool any more. Children are reaped here.
        tools.pool().shutdown(Duration::from_secs(15)).await;
        store.close().await;
        tracing::info!("database closed; shutdown complete");
    });
    Ok(Running {
        addr,
        shutdown,
        tracker,
    })
}

/// Hostname plus a random suffix: unique per process, readable in the records table.
fn default_replica_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "synthgate".into());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}", &suffix[..8])
}

/// `mcp.connect_on_start`: connects every MCP provider and lists its tools, all at once, each
/// bounded by its own `connect_timeout_sec`. A failure is logged and leaves the provider
/// `unavailable` (as `/readyz` shows); it never stops the start, since jobs that do not use
/// the provider can still run and the pool retries it on first use.
async fn connect_mcp_providers(tools: &ToolHub, config: &Config) {
    let connects = config.mcp_providers.iter().map(|p| async move {
        match tools.pool().tools(&p.name, None).await {
            Ok(list) => tracing::info!(
                mcp.provider = %p.name,
                tools = list.tools.len(),
                "MCP provider connected at start"
            ),
            Err(error) => tracing::warn!(
                mcp.provider = %p.name,
                error = %error,
                "MCP provider could not be connected at start; it is retried on first use"
            ),
        }
    });
    futures::future::join_all(connects).await;
}
