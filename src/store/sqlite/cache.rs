//! The response cache on SQLite ([`CacheStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{SqliteStore, now_us};
use crate::store::{CacheStore, StoreError};

#[async_trait]
impl CacheStore for SqliteStore {
    async fn cache_get(&self, owner: &str, key: &[u8]) -> Result<Option<Value>, StoreError> {
        let text: Option<String> =
            sqlx::query_scalar("select response from llm_cache where owner = $1 and key = $2")
                .bind(owner)
                .bind(key)
                .fetch_optional(&self.pool)
                .await?;
        text.map(|t| {
            serde_json::from_str(&t)
                .map_err(|e| StoreError::Corrupt(format!("llm_cache.response: {e}")))
        })
        .transpose()
    }

    async fn cache_put(&self, owner: &str, key: &[u8], response: &Value) -> Result<(), StoreError> {
        let text = response.to_string();
        let _write = self.write_lock().await;
        sqlx::query(
            "insert into llm_cache (owner, key, response, bytes, created_at) \
             values ($1, $2, $3, $4, $5) \
             on conflict (owner, key) do update set response = excluded.response, \
               bytes = excluded.bytes, created_at = excluded.created_at",
        )
        .bind(owner)
        .bind(key)
        .bind(&text)
        .bind(i64::try_from(text.len()).unwrap_or(i64::MAX))
        .bind(now_us())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn cache_sweep(&self, before: DateTime<Utc>, max_bytes: u64) -> Result<u64, StoreError> {
        let _write = self.write_lock().await;
        let old = sqlx::query("delete from llm_cache where created_at < $1")
            .bind(before.timestamp_micros())
            .execute(&self.pool)
            .await?
            .rows_affected();
        let over = sqlx::query(super::super::cache_sql::OVER_SIZE)
            .bind(i64::try_from(max_bytes).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(old + over)
    }
}
