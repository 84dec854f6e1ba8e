//! Postgres store, for deployments where several replicas share one database.
//!
//! Claims take over stale chunks with `for update skip locked` and carve new ones under the
//! lock of the job's cursor, so concurrent claimers (in one process or many) take disjoint
//! chunks. Every timestamp, lease expiry included, comes from the database clock (`now()`), so
//! replicas whose clocks disagree still agree on when a lease has expired. See
//! `crate::queue::postgres` for the lock order.
//!
//! This file holds connecting, jobs and the read side; `datasets.rs` the datasets. The work queue
//! on this store is `crate::queue::postgres`.

mod cache;
mod datasets;
pub(crate) mod usage;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

use super::job_select::{JobsDialect, push_job_select};
use super::rows::{self, FinishedDb, JobDb, RecordDb, SummaryDb, TraceDb, job_columns};
use super::{
    CreateOutcome, DeleteJob, FinishedRecord, JobCounts, JobRow, JobSelect, JobStore, JobSummary,
    NewJob, RecordRow, RecordStore, Store, StoreError, TraceRow,
};
use super::{RecordSelect, job_delete, migrations, reads};
use crate::domain::{JobId, RecordId};

/// The pool size when `database.max_connections` is unset. Postgres runs each connection's
/// statements in a backend of its own, so the pool is the database's parallelism for this
/// replica (half of it for batch writes, `workers.writers`); keep replicas × pool under the
/// server's `max_connections`.
pub const DEFAULT_POOL_SIZE: u32 = 10;

pub(crate) type Job = JobDb<Value, DateTime<Utc>>;
type Record = RecordDb<Value, DateTime<Utc>>;

/// The Postgres store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pub(crate) pool: PgPool,
}

impl PgStore {
    /// Connects to `url` and applies migrations. Safe when several replicas start at once:
    /// the migrator holds a Postgres advisory lock while it runs.
    ///
    /// `acquire_timeout` bounds every wait for a pooled connection, so a saturated or
    /// unreachable database fails requests instead of hanging them.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)?;
        // Host, port and database only: the URL itself may carry a password.
        tracing::info!(
            db.backend = "postgres",
            db.host = options.get_host(),
            db.port = options.get_port(),
            db.name = options.get_database().unwrap_or_default(),
            db.pool = max_connections.max(1),
            "connecting to database"
        );
        let pool = PgPoolOptions::new()
            .after_release(super::pool::discard_if_in_transaction)
            .max_connections(max_connections.max(1))
            .acquire_timeout(acquire_timeout)
            .connect_with(options)
            .await?;
        migrations::migrator(migrations::POSTGRES)
            .run(&pool)
            .await?;
        Ok(Self { pool })
    }

    /// The connection pool, for tests and tools.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl Store for PgStore {
    async fn probe_write(&self) -> Result<(), StoreError> {
        sqlx::query(
            "insert into readiness (id, checked_at) values (1, now()) \
             on conflict (id) do update set checked_at = excluded.checked_at",
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn now(&self) -> Result<DateTime<Utc>, StoreError> {
        Ok(sqlx::query_scalar("select now()")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

#[async_trait]
impl JobStore for PgStore {
    async fn create_job(&self, job: &NewJob) -> Result<CreateOutcome, StoreError> {
        let mut tx = self.pool.begin().await?;
        if job.max_live_jobs.is_some() || job.max_live_records.is_some() {
            // Serializes the count-and-insert of one owner's submits (SQLite gets the same from
            // `begin immediate`); other owners are not held up.
            sqlx::query("select pg_advisory_xact_lock(hashtextextended(coalesce($1, ''), 7151))")
                .bind(job.owner.as_deref())
                .execute(&mut *tx)
                .await?;
        }
        // `do nothing` only for the idempotency index: any other conflict is a real error. A
        // concurrent insert of the same key waits for the first transaction to finish.
        let inserted: Option<Job> = sqlx::query_as(concat!(
            "insert into jobs (id, owner, status, config, num_records, seed, metadata, \
             run_config, idempotency_key, request_hash, output_columns, seed_datasets, name, \
             trace_context, max_candidates, on_exhausted, cache_mode, max_cost_nanos) \
             values ($1, $2, 'queued', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
                     $16, $17) \
             on conflict (coalesce(owner, ''), idempotency_key) \
             where idempotency_key is not null do nothing \
             returning ",
            job_columns!()
        ))
        .bind(job.id.0)
        .bind(job.owner.as_deref())
        .bind(&job.config)
        .bind(i64::from(job.num_records))
        .bind(job.seed as i64) // bit-cast; see the migration
        .bind(job.metadata.as_ref())
        .bind(&job.run_config)
        .bind(job.idempotency_key.as_deref())
        .bind(job.request_hash.as_deref())
        .bind(serde_json::Value::from(job.output_columns.clone()))
        .bind(crate::store::dataset_rows::seed_datasets_json(
            &job.seed_datasets,
        ))
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
            // Read committed: this statement sees the row the conflicting insert committed.
            let existing: Job = reads::job_by_key(
                &mut *tx,
                job.owner.as_deref(),
                job.idempotency_key.as_deref(),
            )
            .await?;
            return Ok(CreateOutcome::Existing(existing.try_into()?));
        };
        let found: Vec<Uuid> = if job.seed_datasets.is_empty() {
            Vec::new()
        } else {
            // `for share` holds off a concurrent `delete_dataset` (which locks the row `for
            // update` before checking for jobs that list it) until this job is committed, and
            // waits for one already under way: then the row is gone and the job refused.
            let ids: Vec<Uuid> = job.seed_datasets.iter().map(|id| id.0).collect();
            sqlx::query_scalar(
                "select id from datasets where status = 'ready' and id = any($1) for share",
            )
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?
        };
        if let Some(refused) = reads::refusal::<Postgres>(&mut tx, job, &found).await? {
            return Ok(refused);
        }
        tx.commit().await?;
        Ok(CreateOutcome::Created(inserted.try_into()?))
    }

    async fn get_job(&self, id: JobId, owner: Option<&str>) -> Result<Option<JobRow>, StoreError> {
        let mut qb = reads::job_query::<Postgres>(id, owner);
        let row: Option<Job> = qb.build_query_as().fetch_optional(&self.pool).await?;
        row.map(JobRow::try_from).transpose()
    }

    async fn job_summaries(
        &self,
        select: JobSelect<'_>,
        first_errors: u32,
    ) -> Result<Vec<JobSummary>, StoreError> {
        let mut qb = QueryBuilder::<Postgres>::new(concat!(
            "select ",
            job_columns!(),
            ", (select coalesce(json_object_agg(c.status, c.n), '{}'::json) from \
                 (select 'completed' as status, completed as n from job_record_counts \
                  where job_id = jobs.id \
                  union all \
                  select 'failed', failed from job_record_counts where job_id = jobs.id \
                  union all \
                  select 'passed', passed from job_record_counts where job_id = jobs.id \
                  union all \
                  select 'rejected', rejected from job_record_counts where job_id = jobs.id \
                  union all \
                  select 'in_progress', coalesce(sum(end_idx - start_idx - written), 0)::bigint \
                  from chunks where job_id = jobs.id and lease_owner is not null) c) as counts, \
               (select coalesce(json_agg(json_build_array(e.id::text, e.idx, e.error_code, \
                 e.error_message, e.error_column, e.error_stage) order by e.idx), '[]'::json) from \
                 (select id, idx, error_code, error_message, error_column, error_stage from records \
                  where job_id = jobs.id and status = 'failed' order by idx limit "
        ));
        qb.push_bind(i64::from(first_errors)).push(
            ") e) as first_errors, \
               (select coalesce(json_object_agg(model_alias, \
                 json_build_array(requests, prompt_tokens, completion_tokens, cached_requests, \
                 cost_nanos)), '{}'::json) \
                 from job_usage where job_id = jobs.id) as usage, \
               (select coalesce(json_object_agg(column_name, \
                 json_build_array(requests, prompt_tokens, completion_tokens, cached_requests, \
                 cost_nanos)), '{}'::json) \
                 from job_column_usage where job_id = jobs.id) as column_usage, \
               (select coalesce(json_agg(json_build_array(column_name, tool_name, outcome, n)), \
                 '[]'::json) from job_tool_usage where job_id = jobs.id) as tool_usage \
             from jobs",
        );
        push_job_select(&mut qb, select, &PgJobs);
        let rows: Vec<SummaryDb<Value, DateTime<Utc>>> =
            qb.build_query_as().fetch_all(&self.pool).await?;
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
        let tx = self.pool.begin().await?;
        let status = "select status from jobs where id = $1 for update";
        job_delete::delete_in::<Postgres>(tx, id, status).await
    }

    async fn live_jobs(&self) -> Result<Vec<JobId>, StoreError> {
        reads::live_jobs(&self.pool).await
    }

    async fn expired_jobs(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<JobId>, StoreError> {
        reads::expired_jobs(&self.pool, before, limit).await
    }
}

#[async_trait]
impl RecordStore for PgStore {
    async fn get_record(
        &self,
        id: RecordId,
        owner: Option<&str>,
    ) -> Result<Option<RecordRow>, StoreError> {
        let mut qb = reads::record_query::<Postgres>(id, owner);
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
        let mut qb = reads::records_page_query::<Postgres>(job_id, after_index, filter, limit);
        let rows: Vec<Record> = qb.build_query_as().fetch_all(&self.pool).await?;
        rows::convert(rows)
    }

    async fn finished_since(
        &self,
        job_id: JobId,
        since: DateTime<Utc>,
    ) -> Result<Vec<FinishedRecord>, StoreError> {
        let rows: Vec<FinishedDb<DateTime<Utc>>> = sqlx::query_as(
            "select id, idx, status, error_code, updated_at from records \
             where job_id = $1 and updated_at >= $2 \
               and status in ('completed', 'failed') \
             order by updated_at, idx",
        )
        .bind(job_id.0)
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        rows::convert(rows)
    }

    async fn get_traces(
        &self,
        record_id: RecordId,
        column: Option<&str>,
    ) -> Result<Vec<TraceRow>, StoreError> {
        let mut qb = reads::traces_query::<Postgres>(record_id, column);
        qb.push(" order by column_name collate \"C\"");
        let rows: Vec<TraceDb<Value, DateTime<Utc>>> =
            qb.build_query_as().fetch_all(&self.pool).await?;
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
        let mut qb = QueryBuilder::<Postgres>::new(
            "select record_id, column_name, messages, created_at from traces where record_id in (",
        );
        let mut ids = qb.separated(", ");
        for id in record_ids {
            ids.push_bind(id.0);
        }
        qb.push(")");
        let rows: Vec<TraceDb<Value, DateTime<Utc>>> =
            qb.build_query_as().fetch_all(&self.pool).await?;
        rows::convert(rows)
    }

    async fn job_usage(
        &self,
        job_id: JobId,
    ) -> Result<std::collections::BTreeMap<String, super::UsageCounts>, StoreError> {
        crate::store::usage::get(&self.pool, job_id).await
    }
}

/// How Postgres says a job listing's JSON paths and times.
struct PgJobs;

impl<'a> JobsDialect<'a, Postgres> for PgJobs {
    fn metadata_eq(&self, qb: &mut QueryBuilder<Postgres>, key: &'a str, json: String) {
        qb.push("jobs.metadata -> ")
            .push_bind(key)
            .push(" = ")
            .push_bind(json)
            .push("::jsonb");
    }

    fn metadata_text(&self, qb: &mut QueryBuilder<Postgres>, path: &'a [String]) {
        qb.push("(jobs.metadata #>> ").push_bind(path).push(")");
    }

    fn push_time(&self, qb: &mut QueryBuilder<Postgres>, t: DateTime<Utc>) {
        qb.push_bind(t);
    }
}
