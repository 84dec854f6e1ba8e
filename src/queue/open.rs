//! Picks and opens the backend named by the configured database URL.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{Database, StoreError};
use crate::store::postgres::{self, PgStore};
use crate::store::sqlite::{self, SqliteStore};

/// Opens the database (its store and its queue) for `database_url` and applies its migrations, with a pool of
/// `max_connections` (`None`: the backend's default) whose waits for a connection fail after
/// `acquire_timeout`:
///
/// * `None`: the SQLite file at `default_sqlite_path` (created with its directory if missing);
/// * `sqlite:PATH`, `sqlite://PATH`, `sqlite::memory:`: SQLite;
/// * `postgres://...`, `postgresql://...`: Postgres.
///
/// Any other URL is a configuration error that names only its scheme, never the whole URL
/// (which may hold a password).
pub async fn open(
    database_url: Option<&str>,
    default_sqlite_path: &Path,
    max_connections: Option<u32>,
    acquire_timeout: Duration,
) -> Result<Arc<dyn Database>, StoreError> {
    let sqlite_pool = || max_connections.unwrap_or_else(sqlite::default_pool_size);
    let Some(url) = database_url else {
        return Ok(Arc::new(
            SqliteStore::open_path(default_sqlite_path, sqlite_pool(), acquire_timeout).await?,
        ));
    };
    match Backend::of(url) {
        Some(Backend::Sqlite) => Ok(Arc::new(
            SqliteStore::open(url, sqlite_pool(), acquire_timeout).await?,
        )),
        Some(Backend::Postgres) => Ok(Arc::new(
            PgStore::connect(
                url,
                max_connections.unwrap_or(postgres::DEFAULT_POOL_SIZE),
                acquire_timeout,
            )
            .await?,
        )),
        None => {
            let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
            Err(StoreError::Db(sqlx::Error::Configuration(
                format!(
                    "unsupported database URL scheme {scheme:?}: expected sqlite:PATH, \
                     postgres://... or postgresql://..."
                )
                .into(),
            )))
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend a URL names; schemes are case-insensitive.
    fn of(url: &str) -> Option<Self> {
        let lower = url.get(..13).unwrap_or(url).to_ascii_lowercase();
        if lower.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            Some(Self::Postgres)
        } else {
            None
        }
    }
}

/// The pools' `after_release` check: a connection that comes back still inside a transaction
/// after the transaction's rollback ran is closed instead of pooled.
///
#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::DEFAULT_ACQUIRE_TIMEOUT;

    #[test]
    fn backend_from_scheme() {
        assert_eq!(Backend::of("sqlite:data/x.db"), Some(Backend::Sqlite));
        assert_eq!(Backend::of("sqlite://data/x.db"), Some(Backend::Sqlite));
        assert_eq!(Backend::of("sqlite::memory:"), Some(Backend::Sqlite));
        assert_eq!(Backend::of("postgres://u:p@h/db"), Some(Backend::Postgres));
        assert_eq!(Backend::of("PostgreSQL://u@h/db"), Some(Backend::Postgres));
        assert_eq!(Backend::of("mysql://u:p@h/db"), None);
        assert_eq!(Backend::of("data/x.db"), None);
    }

    #[tokio::test]
    async fn unknown_scheme_names_only_the_scheme() {
        let err = open(
            Some("mysql://user:hunter2@db/x"),
            Path::new("unused"),
            Some(1),
            DEFAULT_ACQUIRE_TIMEOUT,
        )
        .await
        .err()
        .expect("an error");
        let msg = err.to_string();
        assert!(msg.contains("\"mysql\""), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
    }
}
