//! Embedded SQLite store, the default when no database URL is configured.
//!
//! One file in WAL mode: readers never block the writer, and writes are serialized by SQLite.
//! Every multi-statement write runs in a transaction begun `immediate`, which takes the write
//! lock up front: two connections (or two processes sharing the file) can then never both read
//! the same stale chunk or job cursor and claim them, and a transaction never fails
//! half-way when it tries to upgrade a read lock. `busy_timeout` makes waiting writers queue instead of failing.
//!
//! Timestamps are integer microseconds from the application clock, which is the database clock
//! for an embedded database. See `migrations/sqlite` for the column encodings.
//!
//! This file holds opening, jobs and the read side; `datasets.rs` the datasets. The work queue on
//! this store is `crate::queue::sqlite`.

mod cache;
mod datasets;
pub(crate) mod usage;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Sqlite, Transaction};

use super::job_select::{JobsDialect, push_job_select};
use super::rows::{self, FinishedDb, JobDb, RecordDb, SummaryDb, TraceDb, job_columns};
use super::{
    CreateOutcome, DeleteJob, FinishedRecord, JobCounts, JobRow, JobSelect, JobStore, JobSummary,
    NewJob, RecordRow, RecordStore, Store, StoreError, TraceRow,
};
use super::{RecordSelect, job_delete, migrations, reads};
use crate::domain::{JobId, RecordId};

/// How long a connection waits for the write lock before failing with `SQLITE_BUSY`. Generous:
/// a large dataset import or export holds the database busy for a while, and waiting beats
/// failing a claim.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// SQLite's page cache per connection, in KiB. SQLite's default (2,000 KiB) fills as the file
/// grows and stays, so with 10 connections a large database held about 20 MiB of the process's
/// memory that a small one did not. 1 MiB keeps the hot pages of the write path (the right
/// edges of the record and trace B-trees) and bounds the whole cache at one MiB per pooled
/// connection; reads past it come from the operating system's file cache.
const PAGE_CACHE_KIB: u32 = 1024;

/// The pool size when `database.max_connections` is unset: one connection for the writer and
/// one reader per core, at most 10. SQLite writes one transaction at a time (this process
/// queues its writers before they take a connection, see [`SqliteStore`]'s `write`), and sqlx
/// runs each connection on an OS thread of its own, so connections past the cores add no
/// parallel reads, only memory: each keeps its page cache (up to [`PAGE_CACHE_KIB`]), its
/// prepared statements, its thread and that thread's allocator cache, about 1.3 MiB in all
/// once a job has run (bench/README.md, "SQLite connections by the core"). Bursts of reads
/// beyond it wait for a connection for the length of one short read.
pub fn default_pool_size() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(cores + 1).unwrap_or(u32::MAX).min(10)
}

pub(crate) type Job = JobDb<String, i64>;
type Record = RecordDb<String, i64>;

/// The embedded SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pub(crate) pool: SqlitePool,
    /// Taken by every write of this process before it asks SQLite for the write lock. Writers
    /// on two connections that meet at SQLite's lock do not queue: the second one sleeps in
    /// SQLite's busy handler (1, 2, 5, 10 ms and up) and retries, so a claim arriving during a
    /// batch write lost milliseconds after the write had committed. Queued here instead, the
    /// next writer starts as soon as the last one commits. Other processes on the same file
    /// still meet at SQLite's lock and `busy_timeout`.
    write: Arc<tokio::sync::Mutex<()>>,
}

impl SqliteStore {
    /// Opens (creating if missing, with its parent directory) the database at `path_or_url`, a
    /// file path or a `sqlite:` URL, and applies migrations. A wait for one of the pool's
    /// `max_connections` fails after `acquire_timeout` (`database.acquire_timeout_sec`), as on
    /// Postgres, so a request answers `503` rather than hanging when the pool stays busy.
    ///
    /// `sqlite::memory:` gives a private in-memory database for tests; it uses one connection,
    /// kept open for the store's life, since the database vanishes with its last connection.
    pub async fn open(
        path_or_url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let in_memory = path_or_url.contains(":memory:") || path_or_url.contains("mode=memory");
        let options = if let Some(rest) = path_or_url
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("sqlite:"))
            .map(|_| &path_or_url[7..])
        {
            // sqlx strips only a lowercase scheme.
            SqliteConnectOptions::from_str(&format!("sqlite:{rest}"))?
        } else {
            SqliteConnectOptions::new().filename(path_or_url)
        };
        Self::open_with(options, in_memory, max_connections, acquire_timeout).await
    }

    /// Like [`SqliteStore::open`], for a file path that may not be UTF-8.
    pub async fn open_path(
        path: &Path,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new().filename(path);
        Self::open_with(options, false, max_connections, acquire_timeout).await
    }

    async fn open_with(
        options: SqliteConnectOptions,
        in_memory: bool,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT)
            // Negative: a size in KiB rather than in pages.
            .pragma("cache_size", format!("-{PAGE_CACHE_KIB}"));
        let mut pool = SqlitePoolOptions::new()
            .acquire_timeout(acquire_timeout)
            .after_release(super::pool::discard_if_in_transaction);
        if in_memory {
            pool = pool
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
        } else {
            if let Some(dir) = options.get_filename().parent()
                && !dir.as_os_str().is_empty()
            {
                tokio::fs::create_dir_all(dir)
                    .await
                    .map_err(sqlx::Error::Io)?;
            }
            pool = pool.max_connections(max_connections.max(1));
        }
        tracing::info!(
            db.backend = "sqlite",
            db.path = %options.get_filename().display(),
            db.pool = pool.get_max_connections(),
            "opening database"
        );
        let pool = pool.connect_with(options).await?;
        migrations::migrator(migrations::SQLITE).run(&pool).await?;
        Ok(Self {
            pool,
            write: Arc::default(),
        })
    }

    /// Begins a write transaction (`immediate`: it takes SQLite's write lock up front) behind
    /// this process's write lock; keep the guard until the transaction ends.
    pub(crate) async fn begin_write(
        &self,
    ) -> Result<
        (
            tokio::sync::MutexGuard<'_, ()>,
            Transaction<'static, Sqlite>,
        ),
        StoreError,
    > {
        let guard = self.write.lock().await;
        let tx = self.pool.begin_with("begin immediate").await?;
        Ok((guard, tx))
    }

    /// This process's write lock, for a write outside a transaction.
    pub(crate) async fn write_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.write.lock().await
    }

    /// The connection pool, for tests and tools.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// The current time as stored: microseconds since the Unix epoch.
pub(crate) fn now_us() -> i64 {
    Utc::now().timestamp_micros()
}

/// `now + lease` in stored microseconds, saturating instead of overflowing.
pub(crate) fn expiry_us(now: i64, lease: Duration) -> i64 {
    now.saturating_add(i64::try_from(lease.as_micros()).unwrap_or(i64::MAX))
}

/// Appends `(?, ?, ...)` with one bind per id. Callers never pass an empty list.
pub(crate) fn push_ids<I: IntoIterator<Item = uuid::Uuid>>(qb: &mut QueryBuilder<Sqlite>, ids: I) {
    qb.push("(");
    let mut list = qb.separated(", ");
    for id in ids {
        list.push_bind(id);
    }
    list.push_unseparated(")");
}

#[async_trait]
impl Store for SqliteStore {
    async fn probe_write(&self) -> Result<(), StoreError> {
        let _write = self.write_lock().await;
        sqlx::query(
            "insert into readiness (id, checked_at) values (1, $1) \
             on conflict (id) do update set checked_at = excluded.checked_at",
        )
        .bind(now_us())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn now(&self) -> Result<DateTime<Utc>, StoreError> {
        rows::DbTime::into_utc(now_us(), "now")
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

#[async_trait]
impl JobStore for SqliteStore {
    async fn create_job(&self, job: &NewJob) -> Result<CreateOutcome, StoreError> {
        let now = now_us();
        let (_write, mut tx) = self.begin_write().await?;
        // `do nothing` only for the idempotency index: any other conflict is a real error.
        let inserted: Option<Job> = sqlx::query_as(concat!(
            "insert into jobs (id, owner, status, config, num_records, seed, metadata, \
             run_config, idempotency_key, request_hash, output_columns, seed_datasets, \
             name, trace_context, max_candidates, on_exhausted, cache_mode, max_cost_nanos, \
             created_at, updated_at) \
             values ($1, $2, 'queued', $3, $4, $5, $6, $7, $8, $9, $11, $12, $13, $14, $15, $16, \
                     $17, $18, $10, $10) \
             on conflict (coalesce(owner, ''), idempotency_key) \
             where idempotency_key is not null do nothing \
             returning ",
            job_columns!()
        ))
        .bind(job.id.0)
        .bind(job.owner.as_deref())
        .bind(job.config.to_string())
        .bind(i64::from(job.num_records))
        .bind(job.seed as i64) // bit-cast; see the migration
        .bind(job.metadata.as_ref().map(|m| m.to_string()))
        .bind(job.run_config.to_string())
        .bind(job.idempotency_key.as_deref())
        .bind(job.request_hash.as_deref())
        .bind(now)
        .bind(serde_json::Value::from(job.output_columns.clone()).to_string())
        .bind(
            crate::store::dataset_rows::seed_datasets_json(&job.seed_datasets)
                .map(|v| v.to_string()),
        )
        .bind(job.name.as_deref())
        .bind(job.trace_context.as_deref())
        .bind(job.selection.map(|s| i64::from(s.max_candidates)))
        .bind(job.selection.map(|s| s.on_exhausted.as_str()))
        .bind(job.cache_mode.as_str())
        .bind(
            job.max_cost_nanos
                .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
        )
        .fetch_optional(&mut *tx)
        .await?;

        let Some(inserted) = inserted else {
            let existing: Job = reads::job_by_key(
                &mut *tx,
                job.owner.as_deref(),
                job.idempotency_key.as_deref(),
            )
            .await?;
            return Ok(CreateOutcome::Existing(existing.try_into()?));
        };
        let found: Vec<uuid::Uuid> = if job.seed_datasets.is_empty() {
            Vec::new()
        } else {
            // Under the write lock taken by `begin immediate`: no delete can slip in between
            // this check and the commit.
            let mut qb = QueryBuilder::<Sqlite>::new(
                "select id from datasets where status = 'ready' and id in ",
            );
            push_ids(&mut qb, job.seed_datasets.iter().map(|id| id.0));
            qb.build_query_scalar()
                .persistent(false)
                .fetch_all(&mut *tx)
                .await?
        };
        if let Some(refused) = reads::refusal::<Sqlite>(&mut tx, job, &found).await? {
            return Ok(refused);
        }
        tx.commit().await?;
        Ok(CreateOutcome::Created(inserted.try_into()?))
    }

    async fn get_job(&self, id: JobId, owner: Option<&str>) -> Result<Option<JobRow>, StoreError> {
        let mut qb = reads::job_query::<Sqlite>(id, owner);
        let row: Option<Job> = qb.build_query_as().fetch_optional(&self.pool).await?;
        row.map(JobRow::try_from).transpose()
    }

    async fn job_summaries(
        &self,
        select: JobSelect<'_>,
        first_errors: u32,
    ) -> Result<Vec<JobSummary>, StoreError> {
        let mut qb = QueryBuilder::<Sqlite>::new(concat!(
            "select ",
            job_columns!(),
            ", (select json_group_object(status, n) from \
                 (select 'completed' as status, completed as n from job_record_counts \
                  where job_id = jobs.id \
                  union all \
                  select 'failed', failed from job_record_counts where job_id = jobs.id \
                  union all \
                  select 'passed', passed from job_record_counts where job_id = jobs.id \
                  union all \
                  select 'rejected', rejected from job_record_counts where job_id = jobs.id \
                  union all \
                  select 'in_progress', coalesce(sum(end_idx - start_idx - written), 0) \
                  from chunks where job_id = jobs.id and lease_owner is not null)) \
                 as counts, \
               (select json_group_array(json_array(lower(hex(id)), idx, error_code, error_message, \
                 error_column, error_stage)) from \
                 (select id, idx, error_code, error_message, error_column, error_stage from records \
                  where job_id = jobs.id and status = 'failed' order by idx limit "
        ));
        qb.push_bind(i64::from(first_errors)).push(
            ")) as first_errors, \
               (select json_group_object(model_alias, \
                 json_array(requests, prompt_tokens, completion_tokens, cached_requests, cost_nanos)) \
                 from job_usage where job_id = jobs.id) as usage, \
               (select json_group_object(column_name, \
                 json_array(requests, prompt_tokens, completion_tokens, cached_requests, cost_nanos)) \
                 from job_column_usage where job_id = jobs.id) as column_usage, \
               (select json_group_array(json_array(column_name, tool_name, outcome, n)) \
                 from job_tool_usage where job_id = jobs.id) as tool_usage \
             from jobs",
        );
        push_job_select(&mut qb, select, &SqliteJobs);
        let rows: Vec<SummaryDb<String, i64>> = qb.build_query_as().fetch_all(&self.pool).await?;
        rows::convert(rows)
    }

    async fn job_counts(&self, id: JobId) -> Result<JobCounts, StoreError> {
        let Some(job) = self.get_job(id, None).await? else {
            return Ok(JobCounts::default());
        };
        let rows = reads::count_rows(&self.pool, id).await?;
        super::counts::job_counts(&job, rows)
    }

    async fn delete_job(&self, id: JobId) -> Result<DeleteJob, StoreError> {
        let (_write, tx) = self.begin_write().await?;
        let status = "select status from jobs where id = $1";
        job_delete::delete_in::<Sqlite>(tx, id, status).await
    }

    async fn live_jobs(&self) -> Result<Vec<JobId>, StoreError> {
        reads::live_jobs(&self.pool).await
    }

    async fn expired_jobs(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<JobId>, StoreError> {
        reads::expired_jobs(&self.pool, before.timestamp_micros(), limit).await
    }
}

#[async_trait]
impl RecordStore for SqliteStore {
    async fn get_record(
        &self,
        id: RecordId,
        owner: Option<&str>,
    ) -> Result<Option<RecordRow>, StoreError> {
        let mut qb = reads::record_query::<Sqlite>(id, owner);
        let row: Option<Record> = qb.build_query_as().fetch_optional(&self.pool).await?;
        row.map(RecordRow::try_from).transpose()
    }

    async fn list_records(
        &self,
        job_id: JobId,
        after_index: Option<u32>,
        filter: RecordSelect,
        limit: u32,
    ) -> Result<Vec<RecordRow>, StoreError> {
        let mut qb = reads::records_page_query::<Sqlite>(job_id, after_index, filter, limit);
        let rows: Vec<Record> = qb.build_query_as().fetch_all(&self.pool).await?;
        rows::convert(rows)
    }

    async fn finished_since(
        &self,
        job_id: JobId,
        since: DateTime<Utc>,
    ) -> Result<Vec<FinishedRecord>, StoreError> {
        let rows: Vec<FinishedDb<i64>> = sqlx::query_as(
            "select id, idx, status, error_code, updated_at from records \
             where job_id = $1 and updated_at >= $2 \
               and status in ('completed', 'failed') \
             order by updated_at, idx",
        )
        .bind(job_id.0)
        .bind(since.timestamp_micros())
        .fetch_all(&self.pool)
        .await?;
        rows::convert(rows)
    }

    async fn get_traces(
        &self,
        record_id: RecordId,
        column: Option<&str>,
    ) -> Result<Vec<TraceRow>, StoreError> {
        let mut qb = reads::traces_query::<Sqlite>(record_id, column);
        qb.push(" order by column_name");
        let rows: Vec<TraceDb<String, i64>> = qb.build_query_as().fetch_all(&self.pool).await?;
        rows::convert(rows)
    }

    async fn get_media(
        &self,
        record_id: RecordId,
        column: &str,
        index: u32,
    ) -> Result<Option<(String, Vec<u8>)>, StoreError> {
        reads::media(&self.pool, record_id, column, index).await
    }

    async fn traces_for(&self, record_ids: &[RecordId]) -> Result<Vec<TraceRow>, StoreError> {
        if record_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb = QueryBuilder::<Sqlite>::new(
            "select record_id, column_name, messages, created_at from traces where record_id in (",
        );
        let mut ids = qb.separated(", ");
        for id in record_ids {
            ids.push_bind(id.0);
        }
        qb.push(")");
        let rows: Vec<TraceDb<String, i64>> = qb
            .build_query_as()
            .persistent(false)
            .fetch_all(&self.pool)
            .await?;
        rows::convert(rows)
    }

    async fn job_usage(
        &self,
        job_id: JobId,
    ) -> Result<std::collections::BTreeMap<String, super::UsageCounts>, StoreError> {
        crate::store::usage::get(&self.pool, job_id).await
    }
}

/// How SQLite says a job listing's JSON paths and times.
struct SqliteJobs;

impl<'a> JobsDialect<'a, Sqlite> for SqliteJobs {
    fn metadata_eq(&self, qb: &mut QueryBuilder<Sqlite>, key: &'a str, json: String) {
        // `$."key"`: a bare label would be read as a path (`a.b` as two keys).
        qb.push("jobs.metadata -> ")
            .push_bind(format!("$.\"{key}\""))
            .push(" = json(")
            .push_bind(json)
            .push(")");
    }

    fn metadata_text(&self, qb: &mut QueryBuilder<Sqlite>, path: &'a [String]) {
        let quoted: Vec<String> = path
            .iter()
            .map(|k| format!("\"{}\"", k.replace('"', "\\\"")))
            .collect();
        qb.push("json_extract(jobs.metadata, ")
            .push_bind(format!("$.{}", quoted.join(".")))
            .push(")");
    }

    fn push_time(&self, qb: &mut QueryBuilder<Sqlite>, t: DateTime<Utc>) {
        qb.push_bind(t.timestamp_micros());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default pool always has a reader beside the writer, follows the cores, and never
    /// exceeds the pool a Postgres replica gets.
    #[test]
    fn the_default_pool_is_a_writer_and_a_reader_per_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool = default_pool_size();
        assert!((2..=10).contains(&pool), "{pool}");
        assert_eq!(pool as usize, (cores + 1).min(10));
    }
}
