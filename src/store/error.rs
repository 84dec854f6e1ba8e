//! [`StoreError`], and how callers tell its kinds apart: data the database refused, a
//! transaction to run again, a full disk.

/// Errors from the store. Callers map them to HTTP 500/503 or retry.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or answered with an error.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// Applying migrations failed at start-up.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value could not be decoded (a bug or a hand-edited row).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// A stored dataset's rows cannot be decoded again: stored by an earlier build that
    /// accepted values nested deeper than serde_json reads back. Refused as bad data (422),
    /// not as a server failure.
    #[error(
        "the stored rows of dataset {dataset} cannot be read ({reason}); they were stored by an \
         earlier version of the service that accepted values nested deeper than it reads back: \
         delete the dataset and import its file again"
    )]
    UnreadableDataset {
        /// The dataset.
        dataset: crate::domain::DatasetId,
        /// serde_json's error.
        reason: String,
    },
}

impl StoreError {
    /// Whether the database refused a value it was given (Postgres SQLSTATE classes 22, data
    /// exception, and 54, program limit exceeded; SQLite's "string or blob too big"), rather
    /// than being away or failing: retrying the same write can never succeed.
    pub fn is_data_error(&self) -> bool {
        match self {
            Self::Db(sqlx::Error::Encode(_)) => true,
            Self::Db(sqlx::Error::Database(e)) => {
                let code = e.code();
                let code = code.as_deref().unwrap_or_default();
                match e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                    Some(_) => code.starts_with("22") || code.starts_with("54"),
                    // SQLITE_TOOBIG.
                    None => code == "18",
                }
            }
            Self::Db(_) | Self::Migrate(_) | Self::Corrupt(_) | Self::UnreadableDataset { .. } => {
                false
            }
        }
    }

    /// Whether the database's disk is full (SQLite's `SQLITE_FULL`, Postgres's SQLSTATE 53100):
    /// the write was rolled back, and retrying helps only once space is freed.
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::Db(sqlx::Error::Database(e)) => {
                let code = e.code();
                let code = code.as_deref().unwrap_or_default();
                match e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                    Some(_) => code == "53100",
                    // SQLITE_FULL, or one of its extended codes (the low byte is 13).
                    None => code.parse::<i32>().is_ok_and(|c| c & 0xff == 13),
                }
            }
            _ => false,
        }
    }

    /// Whether Postgres rolled the transaction back to break a deadlock (SQLSTATE 40P01) or a
    /// serialization failure (40001): nothing of it was applied, and running it again is what
    /// Postgres advises for these codes.
    pub fn is_rerunnable(&self) -> bool {
        match self {
            Self::Db(sqlx::Error::Database(e)) => {
                e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some()
                    && matches!(e.code().as_deref(), Some("40P01" | "40001"))
            }
            Self::Db(_) | Self::Migrate(_) | Self::Corrupt(_) | Self::UnreadableDataset { .. } => {
                false
            }
        }
    }
}
