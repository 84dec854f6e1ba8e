//! File formats of datasets: one reader per format, the column type inference they share, and
//! the Parquet writer (`parquet_writer`) that job exports and datastore files are written with.
//!
//! A reader parses a file on disk streaming (never the whole file in memory: memory is bounded
//! by `DatasetLimits::max_row_bytes` per row) and hands typed rows to a [`RowSink`], each row a
//! JSON object with every column, in column order. Readers are blocking code: the importer
//! runs them in a blocking task.
//!
//! Parquet is read once: its schema gives the column types. CSV and JSONL read the file twice: once to infer each column's type over every row (and to
//! reject a malformed file before anything is stored), once to convert and hand over the rows.
//! Reading twice costs a second sequential read of a file the page cache usually still holds,
//! and keeps every stored value exactly of its column's type (a CSV column found to be `float`
//! at its last row stores `1.0`, not `1`, in its first).

pub(crate) mod csv;
mod infer;
pub(crate) mod jsonl;
pub(crate) mod parquet;
mod parquet_guard;
pub(crate) mod parquet_writer;

use std::path::Path;

use serde_json::{Map, Value};

use super::import::ImportError;
use super::{DatasetColumn, DatasetFormat};
use crate::config::DatasetLimits;
pub(crate) use infer::{Kind, KindSet};

/// Where a reader puts the rows it parsed, in file order.
pub(crate) trait RowSink {
    /// Takes one row. An error stops the reader, which returns it.
    fn push(&mut self, row: Map<String, Value>) -> Result<(), ImportError>;
}

/// Checks a file's column names: non-empty, unique, at most `limits.max_columns`.
pub(crate) fn check_column_names(
    names: &[String],
    limits: &DatasetLimits,
) -> Result<(), ImportError> {
    if names.len() > limits.max_columns {
        return Err(ImportError::invalid(format!(
            "the file has {} columns; at most {} are allowed (datasets.max_columns)",
            names.len(),
            limits.max_columns
        )));
    }
    for (i, name) in names.iter().enumerate() {
        if name.trim().is_empty() {
            return Err(ImportError::invalid(format!(
                "column {} has an empty name; every column needs a unique, non-empty name",
                i + 1
            )));
        }
        if names[..i].contains(name) {
            return Err(ImportError::invalid(format!(
                "column name '{name}' appears twice; column names must be unique"
            )));
        }
    }
    Ok(())
}

/// Parses the file at `path` in `format`, handing every row to `sink`; returns the columns.
/// `Listing` is not a file format (listings come as rows, through `import_rows`).
pub(crate) fn read_file(
    format: DatasetFormat,
    path: &Path,
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<Vec<DatasetColumn>, ImportError> {
    match format {
        DatasetFormat::Csv => {
            let columns = csv::infer(path, limits)?;
            csv::read(path, &columns, limits, sink)?;
            Ok(columns)
        }
        DatasetFormat::Jsonl => {
            let columns = jsonl::infer(path, limits)?;
            jsonl::read(path, &columns, limits, sink)?;
            Ok(columns)
        }
        DatasetFormat::Parquet => parquet::read(path, limits, sink),
        DatasetFormat::Listing => Err(ImportError {
            code: "unsupported_dataset_format",
            message: "a listing is not a file format; listings are imported as rows".into(),
        }),
    }
}
