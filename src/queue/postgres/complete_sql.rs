//! A batch write's statements on Postgres ([`CompleteSteps`]), in one read-committed
//! transaction. The fence locks the chunks the writer still holds, in key order (the only
//! statement that locks several chunks and waits), so a claim cannot take one over mid-write.
//! Every multi-row statement binds arrays and `unnest`s them: one statement whatever the
//! batch size.

use std::collections::BTreeMap;

use serde_json::Value;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::INSERT_RECORDS;
use crate::domain::media::Media;
use crate::domain::record::{RecordStage, Trace};
use crate::domain::selection::Selection;
use crate::domain::{JobId, RecordId};
use crate::queue::complete::CompleteSteps;
use crate::queue::written::Written;
use crate::queue::{ChunkKey, RecordResult, StoreError};
use crate::store::usage::{RecordTally, ToolDelta, UsageDelta};

/// One batch write's transaction, for the lease `owner`.
pub(super) struct PgComplete<'a> {
    pub(super) tx: Transaction<'static, Postgres>,
    pub(super) owner: &'a str,
}

impl CompleteSteps for PgComplete<'_> {
    async fn held(&mut self, keys: &[ChunkKey]) -> Result<Vec<(Uuid, i64, i64)>, StoreError> {
        Ok(sqlx::query_as(
            "select c.job_id, c.start_idx, c.end_idx from chunks c \
             join unnest($2::uuid[], $3::bigint[]) as k(job_id, start_idx) \
               on c.job_id = k.job_id and c.start_idx = k.start_idx \
             where c.lease_owner = $1 \
             order by c.job_id, c.start_idx \
             for update of c",
        )
        .bind(self.owner)
        .bind(keys.iter().map(|k| k.job_id.0).collect::<Vec<_>>())
        .bind(keys.iter().map(|k| i64::from(k.start)).collect::<Vec<_>>())
        .fetch_all(&mut *self.tx)
        .await?)
    }

    async fn insert_records(&mut self, results: &[&RecordResult]) -> Result<Vec<Uuid>, StoreError> {
        let n = results.len();
        let mut ids = Vec::with_capacity(n);
        let mut jobs = Vec::with_capacity(n);
        let mut idxs = Vec::with_capacity(n);
        let mut statuses = Vec::with_capacity(n);
        let mut values: Vec<Option<&Value>> = Vec::with_capacity(n);
        let mut attempts = Vec::with_capacity(n);
        let (mut codes, mut messages, mut columns, mut stages) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut selections = Vec::with_capacity(n);
        for result in results {
            let w = Written::from(*result);
            ids.push(result.id.0);
            selections.push(w.selection.map(Selection::as_str));
            jobs.push(result.job_id.0);
            idxs.push(i64::from(result.index));
            statuses.push(w.status.as_str());
            values.push(w.values);
            attempts.push(i64::from(result.attempts));
            codes.push(w.error.map(|e| e.code.as_str()));
            messages.push(w.error.map(|e| e.message.as_str()));
            columns.push(w.error.and_then(|e| e.column.as_deref()));
            stages.push(
                w.error
                    .and_then(|e| e.stage.as_ref())
                    .map(RecordStage::as_str),
            );
        }
        let inserted: Vec<(Uuid, Uuid, i64)> = sqlx::query_as(INSERT_RECORDS)
            .bind(ids)
            .bind(jobs)
            .bind(idxs)
            .bind(statuses)
            .bind(values)
            .bind(attempts)
            .bind(codes)
            .bind(messages)
            .bind(columns)
            .bind(stages)
            .bind(selections)
            .fetch_all(&mut *self.tx)
            .await?;
        Ok(inserted.into_iter().map(|(id, _, _)| id).collect())
    }

    async fn count_written(
        &mut self,
        per_chunk: &BTreeMap<ChunkKey, i64>,
    ) -> Result<(), StoreError> {
        let (cj, cs, cn): (Vec<Uuid>, Vec<i64>, Vec<i64>) = per_chunk
            .iter()
            .map(|(k, n)| (k.job_id.0, i64::from(k.start), *n))
            .collect();
        sqlx::query(
            "update chunks c set written = c.written + k.n, updated_at = now() \
             from unnest($1::uuid[], $2::bigint[], $3::bigint[]) as k(job_id, start_idx, n) \
             where c.job_id = k.job_id and c.start_idx = k.start_idx",
        )
        .bind(&cj)
        .bind(&cs)
        .bind(cn)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(
            "delete from chunks c \
             using unnest($1::uuid[], $2::bigint[]) as k(job_id, start_idx) \
             where c.job_id = k.job_id and c.start_idx = k.start_idx \
               and c.written >= c.end_idx - c.start_idx",
        )
        .bind(cj)
        .bind(cs)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn insert_traces(&mut self, traces: &[(RecordId, &Trace)]) -> Result<(), StoreError> {
        let (ids, names, messages): (Vec<Uuid>, Vec<&str>, Vec<&Value>) = traces
            .iter()
            .map(|(id, t)| (id.0, t.column.as_str(), &t.messages))
            .collect();
        sqlx::query(
            "insert into traces (record_id, column_name, messages) \
             select * from unnest($1::uuid[], $2::text[], $3::jsonb[])",
        )
        .bind(ids)
        .bind(names)
        .bind(messages)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn insert_media(&mut self, record: RecordId, media: &[Media]) -> Result<(), StoreError> {
        for m in media {
            sqlx::query(
                "insert into media (record_id, column_name, idx, mime_type, data) \
                 values ($1, $2, $3, $4, $5) on conflict do nothing",
            )
            .bind(record.0)
            .bind(m.column.as_str())
            .bind(i64::from(m.index))
            .bind(m.mime_type.as_str())
            .bind(m.data.as_slice())
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }

    async fn add_usage(
        &mut self,
        deltas: &[UsageDelta],
        columns: &[UsageDelta],
        tools: &[ToolDelta<'_>],
        tally: &[(JobId, RecordTally)],
    ) -> Result<(), StoreError> {
        crate::store::postgres::usage::add(&mut self.tx, deltas).await?;
        crate::store::postgres::usage::add_columns(&mut self.tx, columns).await?;
        crate::store::postgres::usage::add_tools(&mut self.tx, tools).await?;
        crate::store::postgres::usage::add_records(&mut self.tx, tally).await
    }
}
