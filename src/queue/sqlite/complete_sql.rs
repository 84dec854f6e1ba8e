//! A batch write's statements on SQLite ([`CompleteSteps`]). The write runs in one transaction
//! begun `immediate` under the store's write lock, so the fence (the chunks the writer still
//! holds) cannot be taken over before the commit. Rows go in multi-row inserts of at most
//! [`INSERT_ROWS`], kept out of the statement cache (see `queue.rs`).

use std::collections::BTreeMap;

use sqlx::{QueryBuilder, Sqlite, Transaction};
use uuid::Uuid;

use super::push_keys;
use crate::domain::media::Media;
use crate::domain::record::{RecordStage, Trace};
use crate::domain::selection::Selection;
use crate::domain::{JobId, RecordId};
use crate::queue::complete::CompleteSteps;
use crate::queue::written::Written;
use crate::queue::{ChunkKey, RecordResult, StoreError};
use crate::store::usage::{RecordTally, ToolDelta, UsageDelta};

/// Rows per multi-row insert: 13 binds each for records, well under SQLite's 32,766.
pub(super) const INSERT_ROWS: usize = 1_000;

/// One batch write's transaction, for the lease `owner`, at `now` (microseconds).
pub(super) struct SqliteComplete<'a> {
    pub(super) tx: Transaction<'static, Sqlite>,
    pub(super) owner: &'a str,
    pub(super) now: i64,
}

impl CompleteSteps for SqliteComplete<'_> {
    async fn held(&mut self, keys: &[ChunkKey]) -> Result<Vec<(Uuid, i64, i64)>, StoreError> {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "select job_id, start_idx, end_idx from chunks where lease_owner = ",
        );
        qb.push_bind(self.owner)
            .push(" and (job_id, start_idx) in ");
        push_keys(&mut qb, keys);
        Ok(qb
            .build_query_as()
            .persistent(false)
            .fetch_all(&mut *self.tx)
            .await?)
    }

    async fn insert_records(&mut self, results: &[&RecordResult]) -> Result<Vec<Uuid>, StoreError> {
        let mut written = Vec::with_capacity(results.len());
        for part in results.chunks(INSERT_ROWS) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "insert into records (id, job_id, idx, status, \"values\", attempts, error_code, \
                 error_message, error_column, error_stage, created_at, updated_at, selection) ",
            );
            qb.push_values(part, |mut row, r| {
                let w = Written::from(*r);
                row.push_bind(r.id.0)
                    .push_bind(r.job_id.0)
                    .push_bind(i64::from(r.index))
                    .push_bind(w.status.as_str())
                    .push_bind(w.values.map(|v| v.to_string()))
                    .push_bind(i64::from(r.attempts))
                    .push_bind(w.error.map(|e| e.code.as_str()))
                    .push_bind(w.error.map(|e| e.message.as_str()))
                    .push_bind(w.error.and_then(|e| e.column.as_deref()))
                    .push_bind(
                        w.error
                            .and_then(|e| e.stage.as_ref())
                            .map(RecordStage::as_str),
                    )
                    .push_bind(self.now)
                    .push_bind(self.now)
                    .push_bind(w.selection.map(Selection::as_str));
            });
            qb.push(" on conflict (job_id, idx) do nothing returning id");
            let ids: Vec<Uuid> = qb
                .build_query_scalar()
                .persistent(false)
                .fetch_all(&mut *self.tx)
                .await?;
            written.extend(ids);
        }
        Ok(written)
    }

    async fn count_written(
        &mut self,
        per_chunk: &BTreeMap<ChunkKey, i64>,
    ) -> Result<(), StoreError> {
        for (key, n) in per_chunk {
            sqlx::query(
                "update chunks set written = written + $3, updated_at = $4 \
                 where job_id = $1 and start_idx = $2",
            )
            .bind(key.job_id.0)
            .bind(i64::from(key.start))
            .bind(n)
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        }
        let keys: Vec<ChunkKey> = per_chunk.keys().copied().collect();
        let mut qb = QueryBuilder::<Sqlite>::new(
            "delete from chunks where written >= end_idx - start_idx and (job_id, start_idx) in ",
        );
        push_keys(&mut qb, &keys);
        qb.build().persistent(false).execute(&mut *self.tx).await?;
        Ok(())
    }

    async fn insert_traces(&mut self, traces: &[(RecordId, &Trace)]) -> Result<(), StoreError> {
        for part in traces.chunks(INSERT_ROWS) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "insert into traces (record_id, column_name, messages, created_at, updated_at) ",
            );
            qb.push_values(part, |mut row, (id, t)| {
                row.push_bind(id.0)
                    .push_bind(t.column.as_str())
                    .push_bind(t.messages.to_string())
                    .push_bind(self.now)
                    .push_bind(self.now);
            });
            qb.build().persistent(false).execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn insert_media(&mut self, record: RecordId, media: &[Media]) -> Result<(), StoreError> {
        for m in media {
            sqlx::query(
                "insert or ignore into media (record_id, column_name, idx, mime_type, data, \
                 created_at) values ($1, $2, $3, $4, $5, $6)",
            )
            .bind(record.0)
            .bind(m.column.as_str())
            .bind(i64::from(m.index))
            .bind(m.mime_type.as_str())
            .bind(m.data.as_slice())
            .bind(self.now)
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
        crate::store::sqlite::usage::add(&mut self.tx, deltas, self.now).await?;
        crate::store::sqlite::usage::add_columns(&mut self.tx, columns, self.now).await?;
        crate::store::sqlite::usage::add_tools(&mut self.tx, tools, self.now).await?;
        crate::store::sqlite::usage::add_records(&mut self.tx, tally).await
    }
}
