//! Datasets on SQLite: metadata rows and blocks of rows. See `migrations/sqlite/0006`.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use sqlx::{QueryBuilder, Sqlite};
use uuid::Uuid;

use super::{SqliteStore, now_us, push_ids};
use crate::domain::DatasetId;
use crate::domain::stored_dataset::{DatasetColumn, DatasetMeta, DatasetQuery, DeleteDataset};
use crate::store::dataset_rows::{
    DatasetDb, columns_json, dataset_columns, delete_unless_used, find_in, one_in, one_query,
    read_block, to_i64,
};
use crate::store::{DatasetStore, DatasetUsage, StoreError};

type Dataset = DatasetDb<String, i64>;

#[async_trait]
impl DatasetStore for SqliteStore {
    async fn find_datasets(
        &self,
        owner: Option<&str>,
        q: &DatasetQuery,
    ) -> Result<Vec<DatasetMeta>, StoreError> {
        find_in::<Sqlite, _, Dataset>(&self.pool, owner, q).await
    }

    async fn get_dataset(
        &self,
        id: DatasetId,
        owner: Option<&str>,
    ) -> Result<Option<DatasetMeta>, StoreError> {
        one_in::<Sqlite, _, Dataset>(&self.pool, id, owner).await
    }

    async fn get_datasets(&self, ids: &[DatasetId]) -> Result<Vec<DatasetMeta>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut qb = QueryBuilder::<Sqlite>::new(concat!(
            "select ",
            dataset_columns!(),
            " from datasets where status = 'ready' and id in "
        ));
        push_ids(&mut qb, ids.iter().map(|id| id.0));
        let rows: Vec<Dataset> = qb.build_query_as().fetch_all(&self.pool).await?;
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
        // `immediate`: holds the write lock from the check to the delete, so no job that
        // lists the dataset can be inserted in between.
        let (_write, mut tx) = self.begin_write().await?;
        let mut qb = one_query::<Sqlite>("id", id, owner);
        let found: Option<Uuid> = qb.build_query_scalar().fetch_optional(&mut *tx).await?;
        if found.is_none() {
            return Ok(DeleteDataset::Missing);
        }
        let users: Vec<Uuid> = sqlx::query_scalar(
            "select id from jobs where status in ('queued', 'running', 'cancelling') \
             and seed_datasets is not null \
             and exists (select 1 from json_each(jobs.seed_datasets) where value = $1) \
             order by id",
        )
        .bind(id.to_string())
        .fetch_all(&mut *tx)
        .await?;
        let outcome = delete_unless_used::<Sqlite>(&mut tx, id, users).await?;
        if outcome == DeleteDataset::Deleted {
            tx.commit().await?;
        }
        Ok(outcome)
    }

    async fn begin_dataset_import(&self, meta: &DatasetMeta) -> Result<(), StoreError> {
        let now = now_us();
        let _write = self.write_lock().await;
        sqlx::query(
            "insert into datasets (id, owner, name, format, columns, num_rows, size_bytes, \
             sha256, source, source_ref, status, created_at, updated_at) \
             values ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, 'importing', $10, $10)",
        )
        .bind(meta.id.0)
        .bind(meta.owner.as_deref())
        .bind(&meta.name)
        .bind(meta.format.as_str())
        .bind(columns_json(&meta.columns).to_string())
        .bind(to_i64(meta.size_bytes))
        .bind(&meta.sha256)
        .bind(meta.source.as_str())
        .bind(meta.source_ref.as_deref())
        .bind(now)
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
        let (_write, mut tx) = self.begin_write().await?;
        let alive = sqlx::query(
            "update datasets set updated_at = $2 where id = $1 and status = 'importing'",
        )
        .bind(id.0)
        .bind(now_us())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if alive == 0 {
            return Ok(false);
        }
        if !blocks.is_empty() {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "insert into dataset_blocks (dataset_id, block_index, rows) ",
            );
            qb.push_values(blocks.iter().enumerate(), |mut row, (i, bytes)| {
                row.push_bind(id.0)
                    .push_bind(to_i64(first_block + i as u64))
                    .push_bind(bytes.as_slice());
            });
            qb.build().execute(&mut *tx).await?;
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
        let _write = self.write_lock().await;
        let row: Option<Dataset> = sqlx::query_as(concat!(
            "update datasets set status = 'ready', columns = $2, num_rows = $3, \
             updated_at = $4 where id = $1 and status = 'importing' returning ",
            dataset_columns!()
        ))
        .bind(id.0)
        .bind(columns_json(columns).to_string())
        .bind(to_i64(num_rows))
        .bind(now_us())
        .fetch_optional(&self.pool)
        .await?;
        row.map(DatasetMeta::try_from).transpose()
    }

    async fn abort_dataset_import(&self, id: DatasetId) -> Result<(), StoreError> {
        let _write = self.write_lock().await;
        sqlx::query("delete from datasets where id = $1 and status = 'importing'")
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn delete_stale_imports(&self, idle: Duration) -> Result<u64, StoreError> {
        let idle_us = i64::try_from(idle.as_micros()).unwrap_or(i64::MAX);
        let cutoff = now_us().saturating_sub(idle_us);
        let _write = self.write_lock().await;
        let deleted =
            sqlx::query("delete from datasets where status = 'importing' and updated_at <= $1")
                .bind(cutoff)
                .execute(&self.pool)
                .await?
                .rows_affected();
        Ok(deleted)
    }

    async fn dataset_usage(&self, owner: Option<&str>) -> Result<DatasetUsage, StoreError> {
        // `length` of a blob reads its size from the record header, not its bytes.
        let (rows, bytes): (i64, i64) = sqlx::query_as(
            "select \
               coalesce((select sum(num_rows) from datasets \
                         where owner is $1 and status = 'ready'), 0), \
               coalesce((select sum(length(b.rows)) from dataset_blocks b \
                         join datasets d on d.id = b.dataset_id where d.owner is $1), 0)",
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
