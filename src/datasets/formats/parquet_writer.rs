//! Parquet exports: a dataset written one row group per chunk of rows, each row group's bytes
//! handed on as soon as it is written, so memory holds one chunk whatever the dataset size.
//! Owns the mapping of [`ColumnType`] to Parquet types and of JSON values to Parquet values.
//!
//! Written with the `parquet` crate's low-level writer (already a dependency for reading person
//! datasets) rather than arrow: the rows arrive as JSON objects, so arrow's arrays would only
//! be an extra copy, and the arrow crates are a large build on a small machine.

use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde_json::Value;

use crate::generate::ColumnType;

/// Why a chunk could not be written: a value that does not fit its column's type (the config
/// fixed the type, the stored value disagrees), or the writer failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParquetError {
    #[error("column '{column}' is {expected:?} but a record holds {found}")]
    Mismatch {
        column: String,
        expected: ColumnType,
        found: String,
    },
    #[error(transparent)]
    Writer(#[from] parquet::errors::ParquetError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A Parquet file being written: the magic bytes, then one row group per [`Self::write`],
/// then the footer on [`Self::finish`]. Each call returns the bytes it produced.
pub(crate) struct ParquetSink {
    writer: SerializedFileWriter<Vec<u8>>,
    columns: Vec<(String, ColumnType)>,
}

impl ParquetSink {
    /// A file with `columns`, every one optional (nullable), in order.
    pub(crate) fn new(columns: Vec<(String, ColumnType)>) -> Result<Self, ParquetError> {
        let fields = columns
            .iter()
            .map(|(name, ty)| column_schema(name, *ty).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let schema = Type::group_type_builder("schema")
            .with_fields(fields)
            .build()?;
        // Snappy: the codec the crate is built with, and pyarrow's and pandas' default.
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let writer = SerializedFileWriter::new(Vec::new(), Arc::new(schema), Arc::new(props))?;
        Ok(Self { writer, columns })
    }

    /// Writes `rows` (JSON objects; a missing key is null) as one row group and returns the
    /// bytes written so far and not yet returned. No rows, no row group.
    pub(crate) fn write(&mut self, rows: &[Value]) -> Result<Vec<u8>, ParquetError> {
        if !rows.is_empty() {
            let mut group = self.writer.next_row_group()?;
            for (name, ty) in &self.columns {
                let Some(mut col) = group.next_column()? else {
                    break;
                };
                let cells = rows.iter().map(|r| r.get(name).filter(|v| !v.is_null()));
                let defs: Vec<i16> = cells.clone().map(|c| i16::from(c.is_some())).collect();
                let present = cells.flatten();
                match ty {
                    ColumnType::Int => {
                        let vals = present
                            .map(|v| as_int(v).ok_or_else(|| mismatch(name, *ty, v)))
                            .collect::<Result<Vec<_>, _>>()?;
                        col.typed::<Int64Type>()
                            .write_batch(&vals, Some(&defs), None)?;
                    }
                    ColumnType::Float => {
                        let vals = present
                            .map(|v| v.as_f64().ok_or_else(|| mismatch(name, *ty, v)))
                            .collect::<Result<Vec<_>, _>>()?;
                        col.typed::<DoubleType>()
                            .write_batch(&vals, Some(&defs), None)?;
                    }
                    ColumnType::Bool => {
                        let vals = present
                            .map(|v| v.as_bool().ok_or_else(|| mismatch(name, *ty, v)))
                            .collect::<Result<Vec<_>, _>>()?;
                        col.typed::<BoolType>()
                            .write_batch(&vals, Some(&defs), None)?;
                    }
                    ColumnType::Text => {
                        let vals: Vec<ByteArray> = present.map(|v| text(v).into()).collect();
                        col.typed::<ByteArrayType>()
                            .write_batch(&vals, Some(&defs), None)?;
                    }
                }
                col.close()?;
            }
            group.close()?;
        }
        self.writer.flush()?;
        Ok(std::mem::take(self.writer.inner_mut()))
    }

    /// Writes the footer and returns the last bytes of the file.
    pub(crate) fn finish(self) -> Result<Vec<u8>, ParquetError> {
        Ok(self.writer.into_inner()?)
    }
}

/// The Parquet type of a column: INT64, DOUBLE, BOOLEAN, or UTF8 (`STRING`) byte arrays.
fn column_schema(name: &str, ty: ColumnType) -> Result<Type, ParquetError> {
    let builder = match ty {
        ColumnType::Int => Type::primitive_type_builder(name, PhysicalType::INT64),
        ColumnType::Float => Type::primitive_type_builder(name, PhysicalType::DOUBLE),
        ColumnType::Bool => Type::primitive_type_builder(name, PhysicalType::BOOLEAN),
        ColumnType::Text => Type::primitive_type_builder(name, PhysicalType::BYTE_ARRAY)
            .with_logical_type(Some(LogicalType::String)),
    };
    Ok(builder.with_repetition(Repetition::OPTIONAL).build()?)
}

/// An integer, or a float with no fractional part that fits (a value that went through a
/// float on its way, such as `int(float(x))`).
fn as_int(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e18)
            .map(|f| f as i64)
    })
}

/// A text cell: a string as it is, anything else as its JSON text (as the CSV export does,
/// without the formula neutralization: Parquet is not opened by spreadsheets).
fn text(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        other => other.to_string().into_bytes(),
    }
}

fn mismatch(column: &str, expected: ColumnType, v: &Value) -> ParquetError {
    let found = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    ParquetError::Mismatch {
        column: column.to_owned(),
        expected,
        found: found.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use serde_json::json;

    #[test]
    fn row_groups_stream_and_read_back() {
        let cols = vec![
            ("n".to_owned(), ColumnType::Int),
            ("x".to_owned(), ColumnType::Float),
            ("b".to_owned(), ColumnType::Bool),
            ("s".to_owned(), ColumnType::Text),
        ];
        let mut sink = ParquetSink::new(cols).unwrap();
        let mut file = sink
            .write(&[json!({"n": 1, "x": 0.5, "b": true, "s": "hi"})])
            .unwrap();
        let first = file.len();
        assert!(first > 4, "the first row group is handed on at once");
        file.extend(
            sink.write(&[json!({"n": 2.0, "x": 3, "s": {"k": [1]}}), json!({})])
                .unwrap(),
        );
        file.extend(sink.finish().unwrap());
        let reader = SerializedFileReader::new(bytes::Bytes::from(file)).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 2);
        let rows: Vec<String> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap().to_string())
            .collect();
        assert_eq!(
            rows,
            [
                "{n: 1, x: 0.5, b: true, s: \"hi\"}",
                r#"{n: 2, x: 3.0, b: null, s: "{"k":[1]}"}"#,
                "{n: null, x: null, b: null, s: null}",
            ]
        );
    }

    #[test]
    fn a_value_of_another_type_is_refused() {
        let mut sink = ParquetSink::new(vec![("n".to_owned(), ColumnType::Int)]).unwrap();
        let err = sink.write(&[json!({"n": 1.5})]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "column 'n' is Int but a record holds a number"
        );
        let mut sink = ParquetSink::new(vec![("n".to_owned(), ColumnType::Int)]).unwrap();
        let err = sink.write(&[json!({"n": "7"})]).unwrap_err();
        assert!(err.to_string().contains("a string"), "{err}");
    }
}
