//! `job_usage`, `job_tool_usage` and `job_record_counts` on Postgres.

use sqlx::PgConnection;

use crate::domain::JobId;
use crate::store::usage::{self, to_i64};
use crate::store::{StoreError, UsageDelta};

/// Adds `deltas` (per model alias) inside the caller's transaction: one statement for the
/// batch; `deltas` has one row per (job, alias), in that order.
pub(crate) async fn add(conn: &mut PgConnection, deltas: &[UsageDelta]) -> Result<(), StoreError> {
    add_to(conn, ADD_USAGE, deltas).await
}

/// Adds per-column `deltas` (their `model_alias` is the column) as [`add`] does per alias.
pub(crate) async fn add_columns(
    conn: &mut PgConnection,
    deltas: &[UsageDelta],
) -> Result<(), StoreError> {
    add_to(conn, ADD_COLUMN_USAGE, deltas).await
}

/// Counts are added, never overwritten, so concurrent writers (other processes) compose.
const ADD_USAGE: &str = "\
    insert into job_usage (job_id, model_alias, requests, prompt_tokens, completion_tokens, \
                           cached_requests, cost_nanos, created_at, updated_at) \
    select d.job_id, d.k, d.requests, d.prompt, d.completion, d.cached, d.cost, now(), now() \
    from unnest($1::uuid[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], \
                $7::int8[]) as d(job_id, k, requests, prompt, completion, cached, cost) \
    on conflict (job_id, model_alias) do update set \
      requests = job_usage.requests + excluded.requests, \
      prompt_tokens = job_usage.prompt_tokens + excluded.prompt_tokens, \
      completion_tokens = job_usage.completion_tokens + excluded.completion_tokens, \
      cached_requests = job_usage.cached_requests + excluded.cached_requests, \
      cost_nanos = job_usage.cost_nanos + excluded.cost_nanos, \
      updated_at = now()";

const ADD_COLUMN_USAGE: &str = "\
    insert into job_column_usage (job_id, column_name, requests, prompt_tokens, \
                                  completion_tokens, cached_requests, cost_nanos) \
    select d.job_id, d.k, d.requests, d.prompt, d.completion, d.cached, d.cost \
    from unnest($1::uuid[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], \
                $7::int8[]) as d(job_id, k, requests, prompt, completion, cached, cost) \
    on conflict (job_id, column_name) do update set \
      requests = job_column_usage.requests + excluded.requests, \
      prompt_tokens = job_column_usage.prompt_tokens + excluded.prompt_tokens, \
      completion_tokens = job_column_usage.completion_tokens + excluded.completion_tokens, \
      cached_requests = job_column_usage.cached_requests + excluded.cached_requests, \
      cost_nanos = job_column_usage.cost_nanos + excluded.cost_nanos, \
      updated_at = now()";

async fn add_to(
    conn: &mut PgConnection,
    sql: &'static str,
    deltas: &[UsageDelta],
) -> Result<(), StoreError> {
    if deltas.is_empty() {
        return Ok(());
    }
    let col = |f: fn(&UsageDelta) -> i64| deltas.iter().map(f).collect::<Vec<i64>>();
    sqlx::query(sql)
        .bind(deltas.iter().map(|d| d.job_id.0).collect::<Vec<_>>())
        .bind(
            deltas
                .iter()
                .map(|d| d.model_alias.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(col(|d| to_i64(d.counts.requests)))
        .bind(col(|d| to_i64(d.counts.prompt_tokens)))
        .bind(col(|d| to_i64(d.counts.completion_tokens)))
        .bind(col(|d| to_i64(d.counts.cached_requests)))
        .bind(col(|d| to_i64(d.counts.cost_nanos)))
        .execute(conn)
        .await?;
    Ok(())
}

/// Adds tool-use `deltas` inside the caller's transaction, as [`add`] does for LLM usage: one
/// statement for the batch, rows in key order.
pub(crate) async fn add_tools(
    conn: &mut PgConnection,
    deltas: &[usage::ToolDelta<'_>],
) -> Result<(), StoreError> {
    if deltas.is_empty() {
        return Ok(());
    }
    let (mut jobs, mut columns, mut tools, mut outcomes, mut ns) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((job_id, column, tool, outcome), n) in deltas {
        jobs.push(job_id.0);
        columns.push(*column);
        tools.push(*tool);
        outcomes.push(*outcome);
        ns.push(*n);
    }
    sqlx::query(
        "insert into job_tool_usage (job_id, column_name, tool_name, outcome, n, created_at, updated_at)
         select d.job_id, d.col, d.tool, d.outcome, d.n, now(), now()
         from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::int8[])
              as d(job_id, col, tool, outcome, n)
         on conflict (job_id, column_name, tool_name, outcome) do update set
           n = job_tool_usage.n + excluded.n, updated_at = now()",
    )
    .bind(jobs)
    .bind(columns)
    .bind(tools)
    .bind(outcomes)
    .bind(ns)
    .execute(conn)
    .await?;
    Ok(())
}

/// Adds the written records' `tally` to `job_record_counts` inside the caller's transaction:
/// one statement, rows in job order.
pub(crate) async fn add_records(
    conn: &mut PgConnection,
    tally: &[(JobId, usage::RecordTally)],
) -> Result<(), StoreError> {
    if tally.is_empty() {
        return Ok(());
    }
    let jobs: Vec<uuid::Uuid> = tally.iter().map(|(j, _)| j.0).collect();
    let completed: Vec<i64> = tally.iter().map(|(_, t)| t.completed).collect();
    let failed: Vec<i64> = tally.iter().map(|(_, t)| t.failed).collect();
    let passed: Vec<i64> = tally.iter().map(|(_, t)| t.passed).collect();
    let rejected: Vec<i64> = tally.iter().map(|(_, t)| t.rejected).collect();
    sqlx::query(
        "insert into job_record_counts (job_id, completed, failed, passed, rejected)
         select * from unnest($1::uuid[], $2::int8[], $3::int8[], $4::int8[], $5::int8[])
         on conflict (job_id) do update set
           completed = job_record_counts.completed + excluded.completed,
           failed = job_record_counts.failed + excluded.failed,
           passed = job_record_counts.passed + excluded.passed,
           rejected = job_record_counts.rejected + excluded.rejected",
    )
    .bind(jobs)
    .bind(completed)
    .bind(failed)
    .bind(passed)
    .bind(rejected)
    .execute(conn)
    .await?;
    Ok(())
}
