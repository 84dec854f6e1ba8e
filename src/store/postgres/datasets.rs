//! Datasets on Postgres: metadata rows and blocks of rows. See `migrations/postgres/0006`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::Postgres;
use uuid::Uuid;

use super::PgStore;
use crate::domain::DatasetId;
use crate::domain::stored_dataset::{DatasetColumn, DatasetMeta, DatasetQuery, DeleteDataset};
use crate::store::dataset_rows::{
    DatasetDb, columns_json, dataset_columns, delete_unless_used, find_in, one_in, one_query,
    read_block, to_i64,
};
use crate::store::{DatasetStore, DatasetUsage, StoreError};

type Dataset = DatasetDb<Value, DateTime<Utc>>;

#[async_trait]
impl DatasetStore for PgStore {
    async fn find_datasets(
        &self,
        owner: Option<&str>,
        q: &DatasetQuery,
    ) -> Result<Vec<DatasetMeta>, StoreError> {
        find_in::<Postgres, _, Dataset>(&self.pool, owner, q).await
    }

    async fn get_dataset(
        &self,
        id: DatasetId,
        owner: Option<&str>,
    ) -> Result<Option<DatasetMeta>, StoreError> {
        one_in::<Postgres, _, Dataset>(&self.pool, id, owner).await
    }

    async fn get_datasets(&self, ids: &[DatasetId]) -> Result<Vec<DatasetMeta>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        let rows: Vec<Dataset> = sqlx::query_as(concat!(
            "select ",
            dataset_columns!(),
            " from datasets where status = 'ready' and id = any($1)"
        ))
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(DatasetMeta::try_from).collect()
    }

    async fn read_dataset_block(
        &self,
        id: DatasetId,
        block: u64,
    ) -> Result<Vec<Map<String, Value>>, StoreError> {
        read_block(&self.pool, id, block).await
    }

    async fn delete_dataset(
        &self,
        id: DatasetId,
        owner: Option<&str>,
    ) -> Result<DeleteDataset, StoreError> {
        let mut tx = self.pool.begin().await?;
        // `for update` waits for a submit holding the row `for share` to commit, so the job
        // check below sees that job; a submit that comes later finds the row gone.
        let mut qb = one_query::<Postgres>("id", id, owner);
        qb.push(" for update");
        let found: Option<Uuid> = qb.build_query_scalar().fetch_optional(&mut *tx).await?;
        if found.is_none() {
            return Ok(DeleteDataset::Missing);
        }
        // Read committed: this statement sees every job committed before it started.
        let users: Vec<Uuid> = sqlx::query_scalar(
            "select id from jobs where status in ('queued', 'running', 'cancelling') \
             and seed_datasets @> jsonb_build_array($1::text) order by id",
        )
        .bind(id.to_string())
        .fetch_all(&mut *tx)
        .await?;
        let outcome = delete_unless_used::<Postgres>(&mut tx, id, users).await?;
        if outcome == DeleteDataset::Deleted {
            tx.commit().await?;
        }
        Ok(outcome)
    }

    async fn begin_dataset_import(&self, meta: &DatasetMeta) -> Result<(), StoreError> {
        sqlx::query(
            "insert into datasets (id, owner, name, format, columns, num_rows, size_bytes, \
             sha256, source, source_ref, status) \
             values ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, 'importing')",
        )
        .bind(meta.id.0)
        .bind(meta.owner.as_deref())
        .bind(&meta.name)
        .bind(meta.format.as_str())
        .bind(columns_json(&meta.columns))
        .bind(to_i64(meta.size_bytes))
        .bind(&meta.sha256)
        .bind(meta.source.as_str())
        .bind(meta.source_ref.as_deref())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn write_dataset_blocks(
        &self,
        id: DatasetId,
        first_block: u64,
        blocks: &[Vec<u8>],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        // Also locks the row, so a concurrent stale-import cleanup waits for these blocks.
        let alive = sqlx::query(
            "update datasets set updated_at = now() where id = $1 and status = 'importing'",
        )
        .bind(id.0)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if alive == 0 {
            return Ok(false);
        }
        if !blocks.is_empty() {
            let indexes: Vec<i64> = (0..blocks.len() as u64)
                .map(|i| to_i64(first_block + i))
                .collect();
            // One statement whatever the batch size: the blocks travel as two arrays.
            sqlx::query(
                "insert into dataset_blocks (dataset_id, block_index, rows) \
                 select $1, b.idx, b.rows from unnest($2::bigint[], $3::bytea[]) as b(idx, rows)",
            )
            .bind(id.0)
            .bind(&indexes)
            .bind(blocks)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn finish_dataset_import(
        &self,
        id: DatasetId,
        columns: &[DatasetColumn],
        num_rows: u64,
    ) -> Result<Option<DatasetMeta>, StoreError> {
        let row: Option<Dataset> = sqlx::query_as(concat!(
            "update datasets set status = 'ready', columns = $2, num_rows = $3, \
             updated_at = now() where id = $1 and status = 'importing' returning ",
            dataset_columns!()
        ))
        .bind(id.0)
        .bind(columns_json(columns))
        .bind(to_i64(num_rows))
        .fetch_optional(&self.pool)
        .await?;
        row.map(DatasetMeta::try_from).transpose()
    }

    async fn abort_dataset_import(&self, id: DatasetId) -> Result<(), StoreError> {
        sqlx::query("delete from datasets where id = $1 and status = 'importing'")
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn delete_stale_imports(&self, idle: Duration) -> Result<u64, StoreError> {
        let deleted = sqlx::query(
            "delete from datasets where status = 'importing' \
             and updated_at <= now() - make_interval(secs => $1)",
        )
        .bind(idle.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(deleted)
    }

    async fn dataset_usage(&self, owner: Option<&str>) -> Result<DatasetUsage, StoreError> {
        // `octet_length` of a TOASTed value reads its size from the TOAST pointer.
        let (rows, bytes): (i64, i64) = sqlx::query_as(
            "select \
               coalesce((select sum(num_rows) from datasets \
                         where owner is not distinct from $1 and status = 'ready'), 0)::bigint, \
               coalesce((select sum(octet_length(b.rows)) from dataset_blocks b \
                         join datasets d on d.id = b.dataset_id \
                         where d.owner is not distinct from $1), 0)::bigint",
        )
        .bind(owner)
        .fetch_one(&self.pool)
        .await?;
        Ok(DatasetUsage {
            rows: u64::try_from(rows).unwrap_or(0),
            bytes: u64::try_from(bytes).unwrap_or(0),
        })
    }
}
