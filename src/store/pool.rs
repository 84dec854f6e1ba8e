//! What both backends' connection pools share: how long a request waits for a connection, and
//! what a connection must be to go back into the pool.

use std::time::Duration;

/// How long a request waits for a pooled connection before failing, unless
/// `database.acquire_timeout_sec` says otherwise.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// When a write meets a full disk (or an I/O error), SQLite rolls the transaction back by
/// itself; the rollback sqlx then sends fails ("no transaction is active"), and sqlx's count of
/// open transactions on that connection stays at one. Pooled again, every later `begin` on it
/// failed with "begin_with at non-zero transaction depth", so after one disk-full every claim
/// and write failed until a restart. The rollback of a dropped transaction is queued on the
/// connection, so a ping first lets it run; a connection that committed is not pinged.
pub(crate) fn discard_if_in_transaction<C: sqlx::Connection>(
    conn: &mut C,
    _meta: sqlx::pool::PoolConnectionMetadata,
) -> futures::future::BoxFuture<'_, Result<bool, sqlx::Error>> {
    Box::pin(async move {
        if !conn.is_in_transaction() {
            return Ok(true);
        }
        conn.ping().await?;
        let clean = !conn.is_in_transaction();
        if !clean {
            tracing::warn!(
                "closing a database connection left inside a failed transaction (a full disk or an I/O error rolled it back)"
            );
        }
        Ok(clean)
    })
}
