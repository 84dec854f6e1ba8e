//! Parquet, read with the `parquet` crate's record API one row group at a time (no Arrow:
//! rows are read once, into JSON). Column types come from the file's schema; values from the
//! rows. Codecs: Snappy (pyarrow's and pandas' default), gzip and uncompressed; a file in
//! another codec (zstd, lz4, brotli) is refused with a message saying so.
//!
//! Timestamps and dates become ISO 8601 strings (`2024-05-01T12:00:00Z`, `2024-05-01`);
//! decimals and binary values become strings (binary as base64), as the record API renders
//! them. pandas' index columns (`__index_level_0__`), which pandas restores as the index and
//! not as a column, are left out.
//!
//! The file's schema depth and page sizes are checked first (`parquet_guard`): the reader
//! recurses per level of nesting and allocates what a page header claims.

use std::fs::File;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use chrono::{DateTime, SecondsFormat};
use parquet::basic::{ConvertedType, LogicalType, Repetition, TimeUnit, Type as PhysicalType};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use parquet::schema::types::Type;
use serde_json::{Map, Value};

use super::{RowSink, check_column_names, parquet_guard};
use crate::config::DatasetLimits;
use crate::datasets::import::ImportError;
use crate::datasets::{ColumnType, DatasetColumn};

/// Longest piece of a reader error put in a message: the crate's errors may quote a whole
/// value's bytes.
const MAX_ERROR_CHARS: usize = 300;

/// Reads the file, handing every row to `sink`; returns the columns. A panic in the reader (a
/// crafted file) is an invalid file, not a crashed import.
pub(crate) fn read(
    path: &Path,
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<Vec<DatasetColumn>, ImportError> {
    match catch_unwind(AssertUnwindSafe(|| read_inner(path, limits, sink))) {
        Ok(result) => result,
        Err(_) => Err(ImportError::invalid(
            "the Parquet file could not be read (its reader failed on malformed data)",
        )),
    }
}

fn read_inner(
    path: &Path,
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<Vec<DatasetColumn>, ImportError> {
    let mut file = File::open(path).map_err(|e| ImportError::internal(format!("open {e}")))?;
    // Before the crate reads the footer (its schema decoding recurses per level) and the pages
    // (it allocates what a page header claims): see `parquet_guard`.
    parquet_guard::check_footer(&mut file)?;
    let pages = file
        .try_clone()
        .map_err(|e| ImportError::internal(format!("open {e}")))?;
    let reader = SerializedFileReader::new(file)
        .map_err(|e| ImportError::invalid(format!("not a readable Parquet file: {}", short(&e))))?;
    parquet_guard::check_pages(&pages, reader.metadata())?;
    let meta = reader.metadata().file_metadata();
    let fields = meta.schema_descr().root_schema().get_fields().to_vec();
    // (position in the row, column) of every column kept.
    let kept: Vec<(usize, DatasetColumn, Option<TimeUnit>)> = fields
        .iter()
        .enumerate()
        .filter(|(_, f)| !is_pandas_index(f.name()))
        .map(|(i, f)| {
            let column = DatasetColumn {
                name: f.name().to_owned(),
                r#type: column_type(f),
            };
            (i, column, nanos_timestamp(f))
        })
        .collect();
    let names: Vec<String> = kept.iter().map(|(_, c, _)| c.name.clone()).collect();
    check_column_names(&names, limits)?;
    if meta.num_rows() <= 0 {
        return Err(ImportError::invalid(
            "no rows: the Parquet file holds no rows",
        ));
    }
    let rows = reader.get_row_iter(None).map_err(|e| {
        ImportError::invalid(format!("the Parquet file cannot be read: {}", short(&e)))
    })?;
    for (n, row) in rows.enumerate() {
        let row = row.map_err(|e| ImportError::invalid(format!("row {}: {}", n + 1, short(&e))))?;
        let fields = row.into_columns();
        let mut out = Map::with_capacity(kept.len());
        for (i, column, unit) in &kept {
            let value = match fields.get(*i) {
                Some((_, field)) => match (unit, field) {
                    (Some(unit), Field::Long(v)) => timestamp_string(*v, *unit),
                    _ => to_json(field),
                },
                None => Value::Null,
            };
            out.insert(column.name.clone(), value);
        }
        sink.push(out)?;
    }
    Ok(kept.into_iter().map(|(_, c, _)| c).collect())
}

/// pandas writes a non-default index as `__index_level_N__` columns and reads them back as the
/// index.
fn is_pandas_index(name: &str) -> bool {
    name.strip_prefix("__index_level_")
        .and_then(|rest| rest.strip_suffix("__"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The unit of a top-level timestamp column that the record API hands over as a plain
/// integer (nanoseconds: it converts only millis and micros).
fn nanos_timestamp(t: &Type) -> Option<TimeUnit> {
    match t.get_basic_info().logical_type_ref() {
        Some(LogicalType::Timestamp(ts)) if matches!(ts.unit, TimeUnit::NANOS) && !t.is_group() => {
            Some(ts.unit)
        }
        _ => None,
    }
}

/// A column's type from its schema.
fn column_type(t: &Type) -> ColumnType {
    let info = t.get_basic_info();
    if info.has_repetition() && info.repetition() == Repetition::REPEATED {
        // A bare repeated field (the legacy list form) is a list.
        return ColumnType::Array;
    }
    if t.is_group() {
        return match (info.logical_type_ref(), info.converted_type()) {
            (Some(LogicalType::List), _) | (_, ConvertedType::LIST) => ColumnType::Array,
            _ => ColumnType::Object,
        };
    }
    match info.logical_type_ref() {
        Some(LogicalType::Timestamp(_) | LogicalType::Date) => return ColumnType::Timestamp,
        Some(LogicalType::Unknown) => return ColumnType::Null,
        Some(LogicalType::Float16) => return ColumnType::Float,
        Some(LogicalType::Decimal(_) | LogicalType::Time(_)) => return ColumnType::String,
        _ => {}
    }
    match info.converted_type() {
        ConvertedType::TIMESTAMP_MILLIS | ConvertedType::TIMESTAMP_MICROS | ConvertedType::DATE => {
            return ColumnType::Timestamp;
        }
        ConvertedType::DECIMAL | ConvertedType::TIME_MILLIS | ConvertedType::TIME_MICROS => {
            return ColumnType::String;
        }
        _ => {}
    }
    match t.get_physical_type() {
        PhysicalType::BOOLEAN => ColumnType::Boolean,
        PhysicalType::INT32 | PhysicalType::INT64 => ColumnType::Integer,
        PhysicalType::INT96 => ColumnType::Timestamp,
        PhysicalType::FLOAT | PhysicalType::DOUBLE => ColumnType::Float,
        PhysicalType::BYTE_ARRAY | PhysicalType::FIXED_LEN_BYTE_ARRAY => ColumnType::String,
    }
}

/// A value as JSON, timestamps and dates as ISO 8601.
fn to_json(field: &Field) -> Value {
    match field {
        Field::TimestampMillis(ms) => DateTime::from_timestamp_millis(*ms)
            .map_or(Value::Null, |t| {
                Value::String(t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
            }),
        Field::TimestampMicros(us) => timestamp_string(*us, TimeUnit::MICROS),
        Field::Group(row) => Value::Object(
            row.get_column_iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
        Field::ListInternal(list) => Value::Array(list.elements().iter().map(to_json).collect()),
        // Dates, map keys and everything else as the record API renders them (a date is
        // already `YYYY-MM-DD`).
        other => other.to_json_value(),
    }
}

fn timestamp_string(v: i64, unit: TimeUnit) -> Value {
    let t = match unit {
        TimeUnit::MILLIS => DateTime::from_timestamp_millis(v),
        TimeUnit::MICROS => DateTime::from_timestamp_micros(v),
        TimeUnit::NANOS => Some(DateTime::from_timestamp_nanos(v)),
    };
    t.map_or(Value::Null, |t| {
        Value::String(t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    })
}

/// An error's text, cut to [`MAX_ERROR_CHARS`].
fn short(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    match text.char_indices().nth(MAX_ERROR_CHARS) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pandas_index_columns() {
        assert!(is_pandas_index("__index_level_0__"));
        assert!(is_pandas_index("__index_level_12__"));
        assert!(!is_pandas_index("__index_level___"));
        assert!(!is_pandas_index("index_level_0"));
    }
}
