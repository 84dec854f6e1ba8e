//! `job_usage`, `job_tool_usage` and `job_record_counts` on SQLite.

use sqlx::SqliteConnection;

use crate::domain::JobId;
use crate::store::usage::{self, to_i64};
use crate::store::{StoreError, UsageDelta};

/// Adds `deltas` (per model alias) inside the caller's transaction (the one writing the
/// records they belong to); `now` is its timestamp.
pub(crate) async fn add(
    conn: &mut SqliteConnection,
    deltas: &[UsageDelta],
    now: i64,
) -> Result<(), StoreError> {
    add_to(conn, ADD_USAGE, deltas, now).await
}

/// Adds per-column `deltas` (their `model_alias` is the column) as [`add`] does per alias.
pub(crate) async fn add_columns(
    conn: &mut SqliteConnection,
    deltas: &[UsageDelta],
    now: i64,
) -> Result<(), StoreError> {
    add_to(conn, ADD_COLUMN_USAGE, deltas, now).await
}

/// Counts are added, never overwritten, so concurrent writers (other processes) compose.
const ADD_USAGE: &str = "\
    insert into job_usage (job_id, model_alias, requests, prompt_tokens, completion_tokens, \
                           cached_requests, cost_nanos, created_at, updated_at) \
    values ($1, $2, $3, $4, $5, $7, $8, $6, $6) \
    on conflict (job_id, model_alias) do update set \
      requests = job_usage.requests + excluded.requests, \
      cached_requests = job_usage.cached_requests + excluded.cached_requests, \
      prompt_tokens = job_usage.prompt_tokens + excluded.prompt_tokens, \
      completion_tokens = job_usage.completion_tokens + excluded.completion_tokens, \
      cost_nanos = job_usage.cost_nanos + excluded.cost_nanos, \
      updated_at = excluded.updated_at";

const ADD_COLUMN_USAGE: &str = "\
    insert into job_column_usage (job_id, column_name, requests, prompt_tokens, \
                                  completion_tokens, cached_requests, cost_nanos, created_at, \
                                  updated_at) \
    values ($1, $2, $3, $4, $5, $7, $8, $6, $6) \
    on conflict (job_id, column_name) do update set \
      requests = job_column_usage.requests + excluded.requests, \
      cached_requests = job_column_usage.cached_requests + excluded.cached_requests, \
      prompt_tokens = job_column_usage.prompt_tokens + excluded.prompt_tokens, \
      completion_tokens = job_column_usage.completion_tokens + excluded.completion_tokens, \
      cost_nanos = job_column_usage.cost_nanos + excluded.cost_nanos, \
      updated_at = excluded.updated_at";

async fn add_to(
    conn: &mut SqliteConnection,
    sql: &'static str,
    deltas: &[UsageDelta],
    now: i64,
) -> Result<(), StoreError> {
    for d in deltas {
        sqlx::query(sql)
            .bind(d.job_id.0)
            .bind(&d.model_alias)
            .bind(to_i64(d.counts.requests))
            .bind(to_i64(d.counts.prompt_tokens))
            .bind(to_i64(d.counts.completion_tokens))
            .bind(now)
            .bind(to_i64(d.counts.cached_requests))
            .bind(to_i64(d.counts.cost_nanos))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Adds tool-use `deltas` inside the caller's transaction, as [`add`] does for LLM usage.
pub(crate) async fn add_tools(
    conn: &mut SqliteConnection,
    deltas: &[usage::ToolDelta<'_>],
    now: i64,
) -> Result<(), StoreError> {
    for ((job_id, column, tool, outcome), n) in deltas {
        sqlx::query(
            "insert into job_tool_usage (job_id, column_name, tool_name, outcome, n, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6, $6)
             on conflict (job_id, column_name, tool_name, outcome) do update set
               n = job_tool_usage.n + excluded.n, updated_at = excluded.updated_at",
        )
        .bind(job_id.0)
        .bind(*column)
        .bind(*tool)
        .bind(*outcome)
        .bind(*n)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Adds the written records' `tally` to `job_record_counts` inside the caller's transaction.
pub(crate) async fn add_records(
    conn: &mut SqliteConnection,
    tally: &[(JobId, usage::RecordTally)],
) -> Result<(), StoreError> {
    for (job_id, t) in tally {
        sqlx::query(
            "insert into job_record_counts (job_id, completed, failed, passed, rejected)
             values ($1, $2, $3, $4, $5)
             on conflict (job_id) do update set
               completed = job_record_counts.completed + excluded.completed,
               failed = job_record_counts.failed + excluded.failed,
               passed = job_record_counts.passed + excluded.passed,
               rejected = job_record_counts.rejected + excluded.rejected",
        )
        .bind(job_id.0)
        .bind(t.completed)
        .bind(t.failed)
        .bind(t.passed)
        .bind(t.rejected)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
