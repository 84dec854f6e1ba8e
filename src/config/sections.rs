//! The plain sections of the server config: server, database, workers, limits, auth, logging.
//! Defaults here are the documented defaults of `config/synthgate.yaml`.

use std::path::PathBuf;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::HostEntry;

/// The HTTP listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to bind; `0.0.0.0` inside containers.
    pub host: String,
    /// Port to bind; `0` picks a free one (tests).
    pub port: u16,
    /// Deadline for ordinary requests. Streams (events, exports) are exempt.
    pub request_timeout_sec: u64,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Serve Swagger UI at `/docs`.
    pub docs: bool,
    /// Serve the web UI at `/ui` (static code only: its data comes from `/v1`, behind the keys).
    pub ui: bool,
    /// Serve the API as MCP tools at `/mcp` (streamable HTTP), behind the same keys as `/v1`.
    pub mcp: bool,
    /// On SIGTERM/SIGINT: how long open requests and in-flight records get before the process exits.
    pub shutdown_timeout_sec: u64,
    /// A connection must deliver a complete request head this long after it opens, or after
    /// the first byte of a later request on it; else it is closed (slowloris).
    pub header_read_timeout_sec: u64,
    /// A keep-alive connection with no request in progress is closed after this long.
    pub idle_timeout_sec: u64,
    /// Open connections at most. Past it, the connection idle the longest is closed to make
    /// room; when every connection is busy, new ones wait in the listen backlog.
    pub max_connections: usize,
    /// Uploads, event streams and exports (requests `request_timeout_sec` does not cut) in
    /// progress at most; past it they get `503 server_busy`. Unset: three quarters of
    /// `max_connections`, so the rest stay free for short requests (`/healthz`). See
    /// `api::long_requests`.
    pub max_long_requests: Option<usize>,
    /// How many of those one API key may hold at once (`429 too_many_long_requests` past it);
    /// default half of them. Requests without a key (auth off) have no share of their own.
    pub max_long_requests_per_key: Option<usize>,
    /// When set, `GET /metrics` needs `Authorization: Bearer <token>` (use `${env:VAR}`; at
    /// least 16 characters). Absent: `/metrics` is open.
    pub metrics_token: Option<SecretString>,
    /// Host names (`name` or `name:port`) this server answers to; a request whose `Host` is
    /// another gets `403 host_not_allowed` (DNS rebinding). Empty: the loopback names when
    /// `host` is a loopback address, any host otherwise. See `api::host_guard`.
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://app.example.com`) besides the server's own whose pages may call it
    /// from a browser; another `Origin` gets `403 origin_not_allowed`.
    pub allowed_origins: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8080,
            request_timeout_sec: 30,
            max_body_bytes: 10 * 1024 * 1024,
            docs: true,
            ui: true,
            mcp: true,
            shutdown_timeout_sec: 30,
            header_read_timeout_sec: 10,
            idle_timeout_sec: 60,
            max_connections: 1024,
            max_long_requests: None,
            max_long_requests_per_key: None,
            metrics_token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
}

impl ServerConfig {
    /// `max_long_requests`, or its default.
    pub fn long_request_limit(&self) -> usize {
        self.max_long_requests
            .unwrap_or(self.max_connections * 3 / 4)
            .max(1)
    }

    /// `max_long_requests_per_key`, or its default: half of the long requests.
    pub fn long_request_limit_per_key(&self) -> usize {
        self.max_long_requests_per_key
            .unwrap_or(self.long_request_limit() / 2)
            .max(1)
    }

    pub(super) fn problems(&self, out: &mut Vec<String>) {
        if self.request_timeout_sec == 0 {
            out.push("config key `server.request_timeout_sec`: must be at least 1".into());
        }
        if self.max_body_bytes < 1024 {
            out.push("config key `server.max_body_bytes`: must be at least 1024".into());
        }
        if !(1..=86_400).contains(&self.header_read_timeout_sec) {
            out.push(
                "config key `server.header_read_timeout_sec`: must be between 1 and 86400".into(),
            );
        }
        if !(1..=86_400).contains(&self.idle_timeout_sec) {
            out.push("config key `server.idle_timeout_sec`: must be between 1 and 86400".into());
        }
        if !(1..=1_000_000).contains(&self.max_connections) {
            out.push("config key `server.max_connections`: must be between 1 and 1000000".into());
        }
        if let Some(n) = self.max_long_requests
            && (n == 0 || (n >= self.max_connections && self.max_connections > 1))
        {
            out.push(format!(
                "config key `server.max_long_requests`: must be at least 1 and less than \
                 `server.max_connections` ({}), so that short requests always find a connection",
                self.max_connections
            ));
        }
        if let Some(n) = self.max_long_requests_per_key
            && (n == 0 || n > self.long_request_limit())
        {
            out.push(format!(
                "config key `server.max_long_requests_per_key`: must be from 1 to \
                 `server.max_long_requests` ({})",
                self.long_request_limit()
            ));
        }
        for h in &self.allowed_hosts {
            if HostEntry::parse(h).is_none() {
                out.push(format!(
                    "config key `server.allowed_hosts`: `{h}` is not a host name, `name:port`, or `[v6]:port`"
                ));
            }
        }
        for o in &self.allowed_origins {
            let valid = o.split_once("://").is_some_and(|(scheme, rest)| {
                matches!(scheme, "http" | "https")
                    && HostEntry::parse(rest.trim_end_matches('/')).is_some()
            });
            if !valid {
                out.push(format!(
                    "config key `server.allowed_origins`: `{o}` is not an origin such as `https://app.example.com`"
                ));
            }
        }
        if let Some(t) = &self.metrics_token
            && t.expose_secret().len() < 16
        {
            out.push(
                "config key `server.metrics_token`: must be at least 16 characters (or absent for an open /metrics)"
                    .into(),
            );
        }
    }
}

/// The longest `database.job_retention_days`: 100 years.
pub const MAX_JOB_RETENTION_DAYS: u32 = 36_500;

/// Where data lives. No `url` = an embedded SQLite file at `sqlite_path`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `postgres://...` for Postgres, `sqlite://path` for another SQLite file. May hold a password,
    /// so it is a secret and never logged.
    pub url: Option<SecretString>,
    /// The embedded SQLite file used when `url` is absent.
    pub sqlite_path: PathBuf,
    /// Connection pool size. `None`: 10 on Postgres; on SQLite one writer plus one reader per
    /// core, at most 10 (see `store::sqlite::default_pool_size` for why).
    pub max_connections: Option<u32>,
    /// How long to wait for a pooled connection before failing the operation.
    pub acquire_timeout_sec: u64,
    /// Finished jobs (completed, failed, cancelled) are deleted, with their records, traces,
    /// media and usage, this many days after they finished; absent keeps them.
    pub job_retention_days: Option<u32>,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: None,
            sqlite_path: PathBuf::from("./data/synthgate.db"),
            max_connections: None,
            acquire_timeout_sec: 5,
            job_retention_days: None,
        }
    }
}

impl DatabaseConfig {
    pub(super) fn problems(&self, out: &mut Vec<String>) {
        if let Some(url) = &self.url {
            let u = url.expose_secret();
            let ok = ["postgres://", "postgresql://", "sqlite:"]
                .iter()
                .any(|p| u.starts_with(p));
            if !ok && !u.is_empty() {
                out.push(
                    "config key `database.url`: must start with postgres://, postgresql:// or sqlite:"
                        .into(),
                );
            }
        }
        if self.max_connections == Some(0) {
            out.push("config key `database.max_connections`: must be at least 1".into());
        }
        if self.job_retention_days == Some(0) {
            out.push(
                "config key `database.job_retention_days`: must be at least 1 (absent keeps jobs)"
                    .into(),
            );
        }
        // The sweep subtracts the retention from now: 1e8 days is before any date the clock
        // can say, and the sweep panicked on every run, so retention never ran.
        if self
            .job_retention_days
            .is_some_and(|d| d > MAX_JOB_RETENTION_DAYS)
        {
            out.push(format!(
                "config key `database.job_retention_days`: at most {MAX_JOB_RETENTION_DAYS} \
                 (100 years; absent keeps jobs for good)"
            ));
        }
    }

    /// How long a finished job is kept, when a retention is set (at most
    /// [`MAX_JOB_RETENTION_DAYS`], checked at load).
    pub fn job_retention(&self) -> Option<std::time::Duration> {
        self.job_retention_days
            .map(|days| std::time::Duration::from_secs(u64::from(days) * 86_400))
    }

    /// The URL, treating an empty string as absent (so `SYNTHGATE__DATABASE__URL=` falls back).
    pub fn url(&self) -> Option<&str> {
        self.url
            .as_ref()
            .map(|u| u.expose_secret())
            .filter(|u| !u.is_empty())
    }
}

/// The record worker pool of this replica.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkersConfig {
    /// Records this replica works on at once: sampling, rendering, parsing, tool calls. A
    /// record waiting for an LLM answer (or for its model's `max_parallel_requests` limiter)
    /// gives its slot back meanwhile, so records that only wait do not block other work.
    pub count: u32,
    /// Records this replica has started at once, working or waiting for an LLM; the bound on
    /// claimed work. `None` = 4 × `count`. The replica also holds up to a sixteenth more
    /// claimed ahead (see [`WorkersConfig::claim_ahead`]), waiting to start.
    pub max_in_flight: Option<u32>,
    /// A record whose lease expired this many times (its worker crashed, hung or lost the
    /// database while generating it) fails with `record_abandoned` instead of being claimed
    /// again. Releases at drain do not count.
    pub max_lease_expiries: u32,
    /// Records claimed per database round trip. After a claim of CPU-only chunks (jobs of
    /// samplers, expressions and seed columns only) the next claim takes every free lease
    /// instead, after waiting up to `write_interval_ms` for half of them: such a chunk is
    /// generated by one task in one slot, and the claim and the write, not the generation,
    /// were the cost.
    pub claim_batch_size: u32,
    /// A claimed record is re-claimable by another replica this long after its last renewal.
    pub lease_ttl_sec: u64,
    /// How often to look for work when not woken by a submit on this replica.
    pub poll_interval_ms: u64,
    /// Finished records written per transaction; also the writer's queue length. Each commit
    /// rewrites the pages it touched (records, three indexes, chunks, counters), so bigger
    /// batches write fewer pages per record; 512 halved the write cost of the quickstart job
    /// against 128 (`bench/README.md`).
    pub write_batch_size: usize,
    /// Longest a finished record waits before its batch is written. A batch is written at once
    /// when this replica's last claim found nothing and no record it started is still on its
    /// way to the writer.
    pub write_interval_ms: u64,
    /// Most batches written at once. `None`: one per core this process may use. The
    /// database lowers it to what it can write side by side: 1 on SQLite (one writer at a
    /// time), half of `database.max_connections` on Postgres.
    pub writers: Option<u32>,
    /// Lease owner name; defaults to hostname plus a random suffix (unique per process).
    pub replica_id: Option<String>,
}

impl Default for WorkersConfig {
    fn default() -> Self {
        Self {
            count: 32,
            max_in_flight: None,
            max_lease_expiries: 3,
            claim_batch_size: 32,
            lease_ttl_sec: 60,
            poll_interval_ms: 500,
            write_batch_size: 512,
            write_interval_ms: 50,
            writers: None,
            replica_id: None,
        }
    }
}

impl WorkersConfig {
    pub(super) fn problems(&self, out: &mut Vec<String>) {
        if self.count == 0 {
            out.push("config key `workers.count`: must be at least 1".into());
        }
        if self.claim_batch_size == 0 {
            out.push("config key `workers.claim_batch_size`: must be at least 1".into());
        }
        if let Some(m) = self.max_in_flight
            && m < self.count
        {
            out.push(format!(
                "config key `workers.max_in_flight`: must be at least `workers.count` ({})",
                self.count
            ));
        }
        if self.max_lease_expiries == 0 {
            out.push("config key `workers.max_lease_expiries`: must be at least 1".into());
        }
        if self.lease_ttl_sec < 2 {
            out.push("config key `workers.lease_ttl_sec`: must be at least 2".into());
        }
        if self.poll_interval_ms == 0 {
            out.push("config key `workers.poll_interval_ms`: must be at least 1".into());
        }
        if self.write_batch_size == 0 {
            out.push("config key `workers.write_batch_size`: must be at least 1".into());
        }
        if self.writers == Some(0) {
            out.push("config key `workers.writers`: must be at least 1".into());
        }
    }

    /// Records this replica has started at once (see `max_in_flight`).
    pub fn in_flight_limit(&self) -> u32 {
        self.max_in_flight
            .unwrap_or_else(|| self.count.saturating_mul(4))
            .max(self.count)
            .max(1)
    }

    /// Records claimed ahead of a free place in [`WorkersConfig::in_flight_limit`]: a record
    /// that ends is replaced at once by one of them, while the claim that refills them runs.
    /// Without them each place stood empty for a claim's round trip (waiting for the claim
    /// loop, then for the database), 5 to 10 ms in every 200 ms model call at 512 in flight
    /// (`bench/README.md`). A sixteenth of the limit covers a round trip of a sixteenth of the
    /// model's latency, and keeps what a job submitted later waits behind to as little: the
    /// records claimed ahead start first. Small limits (under 16) claim none ahead, as before.
    pub fn claim_ahead(&self) -> u32 {
        self.in_flight_limit() / 16
    }

    /// Records this replica holds a lease on at once: those started and those claimed ahead.
    pub fn lease_limit(&self) -> u32 {
        self.in_flight_limit().saturating_add(self.claim_ahead())
    }

    /// Records of a CPU-only chunk (samplers, expressions, seed columns) one lease and one
    /// place among the records started stand for, in a claim sized for such chunks: enough
    /// that every lease together covers two write batches. Such a chunk is generated in a few
    /// milliseconds by one task and holds no model request, so a lease per record held a
    /// replica to `lease_limit` records per claim's round trip (136 by default), and the
    /// round trips, not the cores, set the pace: with leases for 512 records and more the
    /// quickstart job ran 30 % faster on Postgres and 23 % on SQLite, on 2 cores
    /// (`bench/README.md`).
    pub fn cpu_records_per_lease(&self) -> u32 {
        let batch = u32::try_from(self.write_batch_size).unwrap_or(u32::MAX);
        batch
            .saturating_mul(2)
            .div_ceil(self.lease_limit().max(1))
            .max(1)
    }

    /// Batches written at once on a database that can take `parallel` writers side by side
    /// (see `writers`).
    pub fn writers(&self, parallel: usize) -> usize {
        let wanted = self.writers.map_or_else(
            || std::thread::available_parallelism().map_or(1, usize::from),
            |w| usize::try_from(w).unwrap_or(usize::MAX),
        );
        wanted.min(parallel).max(1)
    }

    /// The lease duration.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_sec)
    }
}

/// API keys. Authentication is on when at least one key is configured.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// The accepted keys.
    pub api_keys: Vec<ApiKeyConfig>,
}

/// One API key: a name (job owner) and where its value comes from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Owner name recorded on the jobs this key creates.
    pub name: String,
    /// Environment variable holding the key (preferred: keeps it out of the file).
    #[serde(default)]
    pub key_env: Option<String>,
    /// The key itself (use `${env:VAR}` rather than a literal).
    #[serde(default)]
    pub key: Option<SecretString>,
    /// Model aliases this key's jobs may use; absent = all.
    #[serde(default)]
    pub allow_models: Option<Vec<String>>,
    /// Tool aliases this key's jobs may use; absent = all.
    #[serde(default)]
    pub allow_tools: Option<Vec<String>>,
}

impl AuthConfig {
    /// Keys whose `key_env` names a variable this environment does not set: `serve` refuses
    /// to start on them, so `config check` says so too.
    pub(super) fn env_problems(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
        out: &mut Vec<String>,
    ) {
        for (i, k) in self.api_keys.iter().enumerate() {
            if let Some(var) = &k.key_env
                && lookup(var).is_none()
            {
                out.push(format!(
                    "config key `auth.api_keys[{i}]`: environment variable {var} (key_env) is not set"
                ));
            }
        }
    }

    pub(super) fn problems(&self, out: &mut Vec<String>) {
        let mut names = std::collections::HashSet::new();
        for (i, k) in self.api_keys.iter().enumerate() {
            if k.name.trim().is_empty() {
                out.push(format!(
                    "config key `auth.api_keys[{i}].name`: must not be empty"
                ));
            }
            if !names.insert(&k.name) {
                out.push(format!(
                    "config key `auth.api_keys[{i}].name`: duplicate key name '{}'",
                    k.name
                ));
            }
            if k.key_env.is_none() == k.key.is_none() {
                out.push(format!(
                    "config key `auth.api_keys[{i}]`: set exactly one of `key_env` or `key`"
                ));
            }
        }
    }
}

/// What samplers read from the server's disk.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SamplersConfig {
    /// DataDesigner's managed-assets directory (its `DATA_DESIGNER_MANAGED_ASSETS_PATH`,
    /// `~/.data-designer/managed-assets` by default there): `person` samplers read
    /// `datasets/<locale>.parquet` under it. Absent = `person` samplers are refused.
    pub managed_assets_dir: Option<std::path::PathBuf>,
}

/// Log output.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoggingConfig {
    /// `pretty` for terminals, `json` for log collectors.
    pub format: LogFormat,
    /// An `EnvFilter` directive; `RUST_LOG` wins when set.
    pub level: String,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Pretty,
            level: "info".into(),
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable, one event per line.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// The MCP client as a whole (each server is an `mcp_providers` entry).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Connect to every MCP provider and list its tools before serving, so a broken provider
    /// shows in the log and `/readyz` at once rather than at the first job that needs it. A
    /// failure is logged and the service starts anyway (each connect is bounded by the
    /// provider's `connect_timeout_sec`). Off by default: providers connect on first use.
    pub connect_on_start: bool,
}
