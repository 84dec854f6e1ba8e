//! JSON Lines: one JSON object per line (`\n` or `\r\n`), blank lines skipped, a UTF-8
//! byte-order mark skipped. Values are stored as they are; a column's type comes from the
//! values (integers mixed with floats make `float`, other mixes `string`). The columns are the
//! union of the objects' keys, in first-seen order; an object without a column gets null.
//! Errors name the line (1-based, counting blank lines, as an editor shows it).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::{Map, Value};

use super::{KindSet, RowSink, check_column_names};
use crate::config::DatasetLimits;
use crate::datasets::DatasetColumn;
use crate::datasets::import::{ImportError, json_kind};

/// Pass 1: checks every line and infers the columns and their types.
pub(crate) fn infer(
    path: &Path,
    limits: &DatasetLimits,
) -> Result<Vec<DatasetColumn>, ImportError> {
    let mut names: Vec<String> = Vec::new();
    let mut kinds: Vec<KindSet> = Vec::new();
    let rows = for_each_object(path, limits, |line, object| {
        for (key, value) in object {
            let i = match names.iter().position(|n| n == &key) {
                Some(i) => i,
                None => {
                    if key.trim().is_empty() {
                        return Err(ImportError::invalid(format!(
                            "line {line}: a key is empty; every column needs a non-empty name"
                        )));
                    }
                    if names.len() >= limits.max_columns {
                        return Err(ImportError::invalid(format!(
                            "line {line}, column '{key}': more than {} columns \
                             (datasets.max_columns)",
                            limits.max_columns
                        )));
                    }
                    names.push(key);
                    kinds.push(KindSet::default());
                    names.len() - 1
                }
            };
            if let Some(kind) = json_kind(&value) {
                kinds[i].add(kind);
            }
        }
        Ok(())
    })?;
    if rows == 0 {
        return Err(ImportError::invalid(
            "no rows: the file holds no JSON objects",
        ));
    }
    check_column_names(&names, limits)?;
    Ok(super::infer::columns(names, kinds))
}

/// Pass 2: hands every object to `sink` with every column, in column order.
pub(crate) fn read(
    path: &Path,
    columns: &[DatasetColumn],
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<(), ImportError> {
    for_each_object(path, limits, |_, mut object| {
        let row: Map<String, Value> = columns
            .iter()
            .map(|c| {
                let value = object.remove(&c.name).unwrap_or(Value::Null);
                (c.name.clone(), value)
            })
            .collect();
        sink.push(row)
    })?;
    Ok(())
}

/// Calls `f(line_number, object)` for every non-blank line; returns how many there were.
fn for_each_object(
    path: &Path,
    limits: &DatasetLimits,
    mut f: impl FnMut(u64, Map<String, Value>) -> Result<(), ImportError>,
) -> Result<u64, ImportError> {
    let file = File::open(path).map_err(|e| ImportError::internal(format!("open {e}")))?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut buf: Vec<u8> = Vec::new();
    let mut line = 0u64;
    let mut objects = 0u64;
    let max = limits.max_row_bytes;
    loop {
        buf.clear();
        // At most one byte past the limit is read, so a huge line is never buffered whole.
        let n = (&mut reader)
            .take(max as u64 + 2)
            .read_until(b'\n', &mut buf)
            .map_err(|e| ImportError::internal(format!("reading the JSONL file: {e}")))?;
        if n == 0 {
            break;
        }
        line += 1;
        if buf.last() != Some(&b'\n') && buf.len() > max {
            return Err(ImportError::invalid(format!(
                "line {line} is longer than {max} bytes (datasets.max_row_bytes)"
            )));
        }
        let mut bytes = buf.as_slice();
        if line == 1 {
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| {
            ImportError::invalid(format!(
                "line {line}: not valid UTF-8 (only UTF-8 JSONL files are read)"
            ))
        })?;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        // Strictly: a row with a key twice is refused (a plain parse kept the last value).
        let object = match crate::decode::json(text.as_bytes()) {
            Ok(Value::Object(object)) => object,
            Ok(other) => {
                return Err(ImportError::invalid(format!(
                    "line {line}: expected a JSON object, found {}",
                    crate::decode::kind(&other)
                )));
            }
            Err(crate::decode::DecodeError::Syntax(e)) => {
                return Err(ImportError::invalid(format!(
                    "line {line}: invalid JSON: {e}"
                )));
            }
            Err(crate::decode::DecodeError::DuplicateKey(e)) => {
                return Err(ImportError::invalid(format!("line {line}: {e}")));
            }
        };
        objects += 1;
        f(line, object)?;
    }
    Ok(objects)
}
