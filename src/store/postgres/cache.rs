//! The response cache on Postgres ([`CacheStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::PgStore;
use crate::store::{CacheStore, StoreError};

#[async_trait]
impl CacheStore for PgStore {
    async fn cache_get(&self, owner: &str, key: &[u8]) -> Result<Option<Value>, StoreError> {
        Ok(
            sqlx::query_scalar("select response from llm_cache where owner = $1 and key = $2")
                .bind(owner)
                .bind(key)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn cache_put(&self, owner: &str, key: &[u8], response: &Value) -> Result<(), StoreError> {
        let bytes = response.to_string().len();
        sqlx::query(
            "insert into llm_cache (owner, key, response, bytes) values ($1, $2, $3, $4) \
             on conflict (owner, key) do update set response = excluded.response, \
               bytes = excluded.bytes, created_at = now()",
        )
        .bind(owner)
        .bind(key)
        .bind(response)
        .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn cache_sweep(&self, before: DateTime<Utc>, max_bytes: u64) -> Result<u64, StoreError> {
        let old = sqlx::query("delete from llm_cache where created_at < $1")
            .bind(before)
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
