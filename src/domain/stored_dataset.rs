//! Stored datasets as plain data: their metadata, column types, formats and sources, and what
//! the store is asked about them. The service that imports and reads them is
//! [`crate::datasets`]; the store persists these types and knows nothing above them.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::DatasetId;

/// Rows per stored block. Part of the storage format: changing it needs a migration.
pub const BLOCK_ROWS: u64 = 256;

/// Defines a string enum stored and served as snake_case text, with `as_str` and `parse`.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// The stored and served name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            /// The value named `s`, if any.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum!(
    /// The format of a dataset's source.
    DatasetFormat {
        /// Comma-separated values with a header row.
        Csv => "csv",
        /// One JSON object per line.
        Jsonl => "jsonl",
        /// Apache Parquet.
        Parquet => "parquet",
        /// Rows built by the server from a directory (`directory`, `file_contents` seeds).
        Listing => "listing",
    }
);

impl DatasetFormat {
    /// The format a file name's extension names (`.csv`, `.jsonl`/`.ndjson`, `.parquet`;
    /// case-insensitive), if any.
    pub fn from_file_name(name: &str) -> Option<Self> {
        let (_, ext) = name.rsplit_once('.')?;
        match ext.to_ascii_lowercase().as_str() {
            "csv" => Some(Self::Csv),
            "jsonl" | "ndjson" => Some(Self::Jsonl),
            "parquet" => Some(Self::Parquet),
            _ => None,
        }
    }
}

text_enum!(
    /// Where a dataset came from.
    DatasetSourceKind {
        /// Uploaded by a client (`POST /v1/datasets`).
        Upload => "upload",
        /// A file in one of the server's allow-listed directories.
        ServerFile => "server_file",
        /// A file on the Hugging Face Hub.
        Hf => "hf",
        /// A `directory` seed's listing of files.
        Directory => "directory",
        /// A `file_contents` seed's files with their contents.
        FileContents => "file_contents",
    }
);

text_enum!(
    /// The type of a dataset column, inferred over every row of the file (Parquet: from the
    /// file's schema). Null values never change a column's type.
    ColumnType {
        /// Whole numbers (JSON integers).
        Integer => "integer",
        /// Numbers with a fraction or exponent (JSON numbers).
        Float => "float",
        /// `true`/`false`.
        Boolean => "boolean",
        /// Text; also a column whose values mix types.
        String => "string",
        /// Dates and times, stored as ISO 8601 strings.
        Timestamp => "timestamp",
        /// JSON objects (Parquet structs and maps).
        Object => "object",
        /// JSON arrays (Parquet lists).
        Array => "array",
        /// Every value is null.
        Null => "null",
    }
);

/// One column of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DatasetColumn {
    /// The column's name (unique and non-empty within a dataset).
    pub name: String,
    /// The column's type.
    pub r#type: ColumnType,
}

/// A stored dataset's metadata. Only `ready` datasets are ever returned as one.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetMeta {
    pub id: DatasetId,
    /// Name of the owning API key; `None` when auth is off.
    pub owner: Option<String>,
    /// The file name, without directories.
    pub name: String,
    pub format: DatasetFormat,
    /// In column order: the key order of every stored row.
    pub columns: Vec<DatasetColumn>,
    pub num_rows: u64,
    /// Bytes of the source file.
    pub size_bytes: u64,
    /// Hex sha256 of the source file's bytes.
    pub sha256: String,
    pub source: DatasetSourceKind,
    /// Where a server-side source came from; a cache key for re-imports.
    pub source_ref: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl DatasetMeta {
    /// How many blocks hold the rows.
    pub fn num_blocks(&self) -> u64 {
        self.num_rows.div_ceil(BLOCK_ROWS)
    }
}

/// Which datasets [`DatasetStore::find_datasets`](crate::store::DatasetStore::find_datasets)
/// returns: `ready` ones matching every filter given, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatasetQuery {
    /// Exactly this name.
    pub name: Option<String>,
    /// Exactly this hex sha256 (lowercase).
    pub sha256: Option<String>,
    /// Exactly this source reference.
    pub source_ref: Option<String>,
    /// Strictly older than this dataset (a page cursor).
    pub before: Option<DatasetId>,
    /// At most this many.
    pub limit: u32,
}

/// The result of [`DatasetStore::delete_dataset`](crate::store::DatasetStore::delete_dataset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteDataset {
    /// The dataset and its rows are gone.
    Deleted,
    /// No such ready dataset visible to the caller.
    Missing,
    /// Queued, running or cancelling jobs read it; nothing was deleted.
    InUse(Vec<crate::domain::JobId>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_from_extension() {
        assert_eq!(
            DatasetFormat::from_file_name("a.CSV"),
            Some(DatasetFormat::Csv)
        );
        assert_eq!(
            DatasetFormat::from_file_name("x.y.ndjson"),
            Some(DatasetFormat::Jsonl)
        );
        assert_eq!(
            DatasetFormat::from_file_name("p.parquet"),
            Some(DatasetFormat::Parquet)
        );
        assert_eq!(DatasetFormat::from_file_name("p.txt"), None);
        assert_eq!(DatasetFormat::from_file_name("csv"), None);
    }

    #[test]
    fn enums_round_trip_their_text() {
        for t in [
            ColumnType::Integer,
            ColumnType::Float,
            ColumnType::Boolean,
            ColumnType::String,
            ColumnType::Timestamp,
            ColumnType::Object,
            ColumnType::Array,
            ColumnType::Null,
        ] {
            assert_eq!(ColumnType::parse(t.as_str()), Some(t));
            assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
        }
        assert_eq!(
            DatasetSourceKind::parse("server_file"),
            Some(DatasetSourceKind::ServerFile)
        );
    }
}
