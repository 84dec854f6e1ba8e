//! Id newtypes. Ids are UUIDv7, so they sort by creation time and index well.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! id_newtype {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new time-ordered id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }

        impl $name {
            /// The least id of those made at `t`'s millisecond or later: ids compare as their
            /// creation times do, so `id >= first_at(t)` keeps what was made from `t` on.
            pub fn first_at(t: chrono::DateTime<chrono::Utc>) -> Uuid {
                let ms = u64::try_from(t.timestamp_millis()).unwrap_or(0).min((1 << 48) - 1);
                uuid::Builder::from_unix_timestamp_millis(ms, &[0; 10]).into_uuid()
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(u: Uuid) -> Self {
                Self(u)
            }
        }
    };
}

id_newtype!(
    /// Identifies a generation job.
    JobId
);
id_newtype!(
    /// Identifies one record (row) of a job's dataset.
    RecordId
);
id_newtype!(
    /// Identifies a stored dataset (a seed file imported into the database).
    DatasetId
);
