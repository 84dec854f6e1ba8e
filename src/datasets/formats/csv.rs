//! CSV: a header row, then one row per record (the `csv` crate: RFC 4180 quoting, `\n` or
//! `\r\n`, blank lines skipped, a UTF-8 byte-order mark skipped).
//!
//! Cells are read as pandas' `read_csv` reads them by default, since DataDesigner loads seed
//! files with pandas: the pandas NA strings (an empty cell, `NA`, `null`, `NaN`, `None`, ...)
//! are null; `true`/`false` in any case are booleans; integers and decimal or exponent numbers
//! are numbers. One difference, on purpose: a null does not turn an integer column into a
//! float one (pandas would read `1,,3` as `1.0, NaN, 3.0`).

use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::rc::Rc;

use serde_json::{Map, Value};

use super::{Kind, KindSet, RowSink, check_column_names};
use crate::config::DatasetLimits;
use crate::datasets::import::ImportError;
use crate::datasets::{ColumnType, DatasetColumn};

/// pandas' default NA strings (`pandas._libs.parsers.STR_NA_VALUES`), matched exactly.
const NA_VALUES: &[&str] = &[
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
];

/// The kind of a cell's value; `None` for a null.
fn classify(cell: &str) -> Option<Kind> {
    if NA_VALUES.contains(&cell) {
        return None;
    }
    // pandas' number parser skips surrounding spaces.
    let t = cell.trim_matches(|c: char| c == ' ' || c == '\t');
    if t.parse::<i64>().is_ok() || t.parse::<u64>().is_ok() {
        Some(Kind::Integer)
    } else if is_float(t) {
        Some(Kind::Float)
    } else if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
        Some(Kind::Boolean)
    } else {
        Some(Kind::String)
    }
}

/// A finite decimal number (JSON has no infinity; `inf` stays text).
fn is_float(t: &str) -> bool {
    // Rust also parses `inf`, `infinity` and `nan`: none of them is finite.
    t.parse::<f64>().is_ok_and(f64::is_finite)
}

/// A cell as a value of its column's type (`classify` has checked it fits).
fn convert(cell: &str, ty: ColumnType) -> Value {
    if NA_VALUES.contains(&cell) {
        return Value::Null;
    }
    let t = cell.trim_matches(|c: char| c == ' ' || c == '\t');
    match ty {
        ColumnType::Integer => t
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| t.parse::<u64>().map(Value::from))
            .unwrap_or_else(|_| Value::String(cell.to_owned())),
        ColumnType::Float => t
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| Value::String(cell.to_owned()), Value::Number),
        ColumnType::Boolean => Value::Bool(t.eq_ignore_ascii_case("true")),
        ColumnType::Null => Value::Null,
        ColumnType::String | ColumnType::Timestamp | ColumnType::Object | ColumnType::Array => {
            Value::String(cell.to_owned())
        }
    }
}

/// Pass 1: checks the file and infers each column's type over every row.
pub(crate) fn infer(
    path: &Path,
    limits: &DatasetLimits,
) -> Result<Vec<DatasetColumn>, ImportError> {
    let mut kinds: Vec<KindSet> = Vec::new();
    let names = for_each_row(path, limits, |header, cells| {
        if kinds.is_empty() {
            kinds = vec![KindSet::default(); header.len()];
        }
        for (set, cell) in kinds.iter_mut().zip(cells) {
            if let Some(kind) = classify(cell) {
                set.add(kind);
            }
        }
        Ok(())
    })?;
    Ok(super::infer::columns(names, kinds))
}

/// Pass 2: hands every row to `sink`, each value converted to its column's type.
pub(crate) fn read(
    path: &Path,
    columns: &[DatasetColumn],
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<(), ImportError> {
    for_each_row(path, limits, |_, cells| {
        let row: Map<String, Value> = columns
            .iter()
            .zip(cells)
            .map(|(c, cell)| (c.name.clone(), convert(cell, c.r#type)))
            .collect();
        sink.push(row)
    })?;
    Ok(())
}

/// Reads the file, checking its structure (header, field counts, UTF-8, row size), and calls
/// `f(header, cells)` for every data row. Returns the header. A file without data rows is
/// refused.
fn for_each_row(
    path: &Path,
    limits: &DatasetLimits,
    mut f: impl FnMut(&[String], &[&str]) -> Result<(), ImportError>,
) -> Result<Vec<String>, ImportError> {
    let file = File::open(path).map_err(|e| ImportError::internal(format!("open {e}")))?;
    let mark = Rc::new(Cell::new(0u64));
    let reader = RowLimit {
        inner: file,
        read: 0,
        record_end: Rc::clone(&mark),
        max: limits.max_row_bytes as u64,
    };
    let mut csv = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_reader(reader);
    let io_err = |e: ::csv::Error, row: &str| match e.into_kind() {
        ::csv::ErrorKind::Io(e) if e.kind() == io::ErrorKind::InvalidData => {
            ImportError::invalid(format!("{row}: {e}"))
        }
        other => ImportError::internal(format!("reading the CSV file: {other:?}")),
    };
    let header = csv
        .byte_headers()
        .map_err(|e| io_err(e, "the header row"))?
        .clone();
    let names: Vec<String> = header
        .iter()
        .enumerate()
        .map(|(i, field)| {
            std::str::from_utf8(field).map(str::to_owned).map_err(|_| {
                ImportError::invalid(format!(
                    "the header row, column {}: not valid UTF-8 (only UTF-8 CSV files are read)",
                    i + 1
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    if names.is_empty() || (names.len() == 1 && names[0].is_empty()) {
        return Err(ImportError::invalid(
            "the file is empty: a CSV dataset needs a header row and at least one row",
        ));
    }
    check_column_names(&names, limits)?;
    mark.set(csv.position().byte());

    let mut record = ::csv::ByteRecord::new();
    let mut row = 0u64;
    loop {
        let more = csv
            .read_byte_record(&mut record)
            .map_err(|e| io_err(e, &format!("row {}", row + 1)))?;
        if !more {
            break;
        }
        row += 1;
        mark.set(csv.position().byte());
        if record.len() != names.len() {
            return Err(ImportError::invalid(format!(
                "row {row} has {} fields; the header has {} columns",
                record.len(),
                names.len()
            )));
        }
        let mut cells: Vec<&str> = Vec::with_capacity(names.len());
        for (i, field) in record.iter().enumerate() {
            let cell = std::str::from_utf8(field).map_err(|_| {
                ImportError::invalid(format!(
                    "row {row}, column '{}': not valid UTF-8 (only UTF-8 CSV files are read)",
                    names[i]
                ))
            })?;
            cells.push(cell);
        }
        f(&names, &cells)?;
    }
    if row == 0 {
        return Err(ImportError::invalid(
            "no rows: the file has a header row and no data rows",
        ));
    }
    Ok(names)
}

/// Fails the read once more than `max` bytes (plus the parser's buffer) were read past the
/// end of the last complete record: one row that large would otherwise be buffered whole.
struct RowLimit<R> {
    inner: R,
    /// Bytes handed to the parser so far.
    read: u64,
    /// Where the last complete record ended, set by the reading loop.
    record_end: Rc<Cell<u64>>,
    max: u64,
}

/// Slack for the CSV parser's read-ahead buffer (8 KiB by default).
const PARSER_BUFFER: u64 = 64 * 1024;

impl<R: Read> Read for RowLimit<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.read.saturating_sub(self.record_end.get()) > self.max + PARSER_BUFFER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the row is longer than {} bytes (datasets.max_row_bytes), or a quote is \
                     never closed",
                    self.max
                ),
            ));
        }
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}
