//! Dataset exports: a job's completed records as JSONL, CSV or Parquet (`crate::datasets::formats::parquet_writer`),
//! streamed one chunk of records per database round trip, so memory stays flat whatever the
//! dataset size; its failed records as an error file (JSONL); and the datasets of its
//! `schema_transform` processors, rendered from those rows as they stream (see
//! `generate::processors` for why they are rendered, not stored).
//!
//! Once a job has finished its exports cannot change, so each gets a strong ETag, and a ranged
//! read (a resumed download) is served from the export written out once to a file
//! ([`JobService::rendered`]).

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::domain::job::JobRow;
use crate::domain::record::RecordRow;
use crate::domain::{JobId, RecordStatus};
use crate::error::ApiError;
use crate::generate::ColumnType;
use crate::rendered::{RenderWriter, Rendered};
use crate::store::RecordSelect;

use crate::datasets::formats::parquet_writer::ParquetSink;

use super::{CompiledJob, JobService};

/// Records fetched per database round trip while streaming an export.
const EXPORT_CHUNK: u32 = 500;

/// The format of a dataset export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One JSON object per line.
    Jsonl,
    /// CSV with a header row; nested values as JSON text, formulas neutralized.
    Csv,
    /// Parquet, one row group per chunk; column types from the config (`ColumnType`).
    Parquet,
}

/// An export on its way: its bytes, streamed, and their validator.
pub struct Export {
    pub body: BoxStream<'static, Result<Bytes, std::io::Error>>,
    /// A strong ETag (quoted) once the job has finished and the bytes cannot change; `None`
    /// while it runs.
    pub etag: Option<String>,
}

/// Which records an export holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportRecords {
    /// The dataset: each completed record's values.
    Completed,
    /// The error file (JSONL only): each failed record's id, index, attempts, error and
    /// the values it had.
    Failed,
}

impl JobService {
    /// The dataset of a job visible to `owner`: the values of its completed records by index,
    /// streamed (or, for [`ExportRecords::Failed`], its error file); with `traces`, each LLM
    /// column's trace as `{column}__trace`. The CSV header and the Parquet schema are the
    /// job's output columns (then the trace columns, as text).
    pub async fn export(
        &self,
        id: JobId,
        owner: Option<&str>,
        format: ExportFormat,
        traces: bool,
        records: ExportRecords,
    ) -> Result<Export, ApiError> {
        let job = self.get(id, owner).await?;
        if records == ExportRecords::Failed && format != ExportFormat::Jsonl {
            return Err(ApiError::InvalidRequest(
                "status=failed exports the error file, as JSONL only (format=jsonl)".into(),
            ));
        }
        let columns = match format {
            ExportFormat::Jsonl => Vec::new(),
            ExportFormat::Csv | ExportFormat::Parquet => self
                .compiled(&job)
                .await
                .map(|c| {
                    let mut cols: Vec<(String, ColumnType)> = c
                        .plan
                        .output_columns()
                        .iter()
                        .cloned()
                        .zip(c.plan.output_column_types())
                        .collect();
                    if traces {
                        let all = c.run_config.debug_override_save_all_column_traces;
                        let trace_cols = c.plan.trace_columns(all).into_iter();
                        cols.extend(trace_cols.map(|t| (t, ColumnType::Text)));
                    }
                    cols
                })
                // A plan that no longer compiles (a seed dataset deleted after the job
                // finished, say) still has the columns kept at submit: text, untyped.
                .unwrap_or_else(|_| {
                    let kept = job.output_columns.clone().unwrap_or_default();
                    kept.into_iter().map(|c| (c, ColumnType::Text)).collect()
                }),
        };
        let etag = etag(&job, format, traces, records, &columns, None);
        let body = export(self.clone(), &job, columns, format, traces, records, None)?;
        Ok(Export { body, etag })
    }

    /// The written-out export of this ETag, if one is kept.
    pub fn rendered_now(&self, etag: &str) -> Option<Arc<Rendered>> {
        self.renders.get(&etag.to_owned())
    }

    /// `export` written out to a file, once for each ETag (the last few are kept): what a
    /// ranged read of a finished job's export is served from. `None` for a job still running.
    pub async fn rendered(&self, export: Export) -> Result<Option<Arc<Rendered>>, ApiError> {
        let Some(etag) = export.etag else {
            return Ok(None);
        };
        if let Some(done) = self.renders.get(&etag) {
            return Ok(Some(done));
        }
        let io = |e: std::io::Error| {
            ApiError::Internal(format!(
                "writing an export in {}: {e}",
                self.render_dir.display()
            ))
        };
        let mut out = RenderWriter::new(&self.render_dir).map_err(io)?;
        let mut body = export.body;
        while let Some(chunk) = body.next().await {
            out.write(&chunk.map_err(io)?).map_err(io)?;
        }
        let done = Arc::new(out.finish().map_err(io)?);
        self.renders.put(etag, done.clone());
        Ok(Some(done))
    }

    /// The dataset of processor `name` (a `schema_transform`) of a job visible to `owner`:
    /// one row per completed record, by index, rendered from the record's row. The CSV header
    /// and the Parquet schema are the template's keys (Parquet: text columns, since a
    /// rendered template's type is not fixed by the config).
    pub async fn export_output(
        &self,
        id: JobId,
        owner: Option<&str>,
        name: &str,
        format: ExportFormat,
    ) -> Result<Export, ApiError> {
        let job = self.get(id, owner).await?;
        let compiled = self.compiled(&job).await?;
        let Some(columns) = compiled.plan.output_dataset_columns(name) else {
            let known = compiled.plan.output_datasets();
            let listed = if known.is_empty() {
                "the job has no schema_transform processors".to_owned()
            } else {
                format!("its schema_transform processors: {}", known.join(", "))
            };
            return Err(ApiError::OutputNotFound(format!(
                "job {id} has no processor output '{name}'; {listed}"
            )));
        };
        let columns = match format {
            ExportFormat::Jsonl => Vec::new(),
            ExportFormat::Csv | ExportFormat::Parquet => {
                columns.into_iter().map(|c| (c, ColumnType::Text)).collect()
            }
        };
        let output = Output {
            compiled,
            name: name.to_owned(),
        };
        let records = ExportRecords::Completed;
        let etag = etag(&job, format, false, records, &columns, Some(name));
        let body = export(
            self.clone(),
            &job,
            columns,
            format,
            false,
            records,
            Some(output),
        )?;
        Ok(Export { body, etag })
    }
}

/// The strong validator of an export of a finished job (`None` while it runs): everything
/// its bytes follow from (the job and when it finished, what was asked, the columns and their
/// types as read now, this build's writers), hashed.
fn etag(
    job: &JobRow,
    format: ExportFormat,
    traces: bool,
    records: ExportRecords,
    columns: &[(String, ColumnType)],
    output: Option<&str>,
) -> Option<String> {
    if !job.status.is_terminal() {
        return None;
    }
    let identity = json!({
        "job": job.id,
        "finished_at": job.finished_at,
        "updated_at": job.updated_at,
        "format": format!("{format:?}"),
        "traces": traces,
        "records": format!("{records:?}"),
        "columns": columns.iter().map(|(c, t)| format!("{c}:{t:?}")).collect::<Vec<_>>(),
        "output": output,
        "build": env!("CARGO_PKG_VERSION"),
    });
    let hash = Sha256::digest(identity.to_string().as_bytes());
    Some(format!("\"{}\"", &hex::encode(hash)[..32]))
}

/// A processor dataset being rendered from the main rows.
struct Output {
    compiled: Arc<CompiledJob>,
    name: String,
}

struct ExportState {
    jobs: JobService,
    job: JobId,
    columns: Vec<(String, ColumnType)>,
    kind: ExportFormat,
    after: Option<u32>,
    traces: bool,
    records: ExportRecords,
    /// The records read: `records` as a store filter.
    select: RecordSelect,
    output: Option<Output>,
    header_done: bool,
    /// The Parquet file being written (`format=parquet`), until its footer is written.
    parquet: Option<ParquetSink>,
    done: bool,
}

/// Pages through completed records in index order, one chunk per database round trip, so
/// memory stays flat whatever the dataset size. A Parquet file gets one row group per chunk.
fn export(
    jobs: JobService,
    job: &JobRow,
    columns: Vec<(String, ColumnType)>,
    kind: ExportFormat,
    traces: bool,
    records: ExportRecords,
    output: Option<Output>,
) -> Result<BoxStream<'static, Result<Bytes, std::io::Error>>, ApiError> {
    let parquet = match kind {
        ExportFormat::Parquet => Some(
            ParquetSink::new(columns.clone())
                .map_err(|e| ApiError::Internal(format!("job {}: parquet schema: {e}", job.id)))?,
        ),
        ExportFormat::Jsonl | ExportFormat::Csv => None,
    };
    // The dataset is a `record_selection` job's accepted records; its error file, the failed
    // candidates.
    let select = match records {
        ExportRecords::Completed => RecordSelect::dataset(job),
        ExportRecords::Failed => RecordSelect::status(Some(RecordStatus::Failed)),
    };
    let st = ExportState {
        jobs,
        job: job.id,
        select,
        columns,
        kind,
        after: None,
        traces,
        records,
        output,
        header_done: false,
        parquet,
        done: false,
    };
    Ok(futures::stream::unfold(st, |mut st| async move {
        if st.done {
            return None;
        }
        let mut out = Vec::new();
        if let (ExportFormat::Csv, false) = (st.kind, st.header_done) {
            st.header_done = true;
            let header: Vec<String> = st
                .columns
                .iter()
                .map(|(c, _)| neutralize_formula(c))
                .collect();
            if let Err(e) = write_csv_row(&mut out, header.iter().map(String::as_str)) {
                return Some((Err(e), st));
            }
        }
        let rows = match st
            .jobs
            .store
            .list_records(st.job, st.after, st.select, EXPORT_CHUNK)
            .await
        {
            Ok(mut rows) if st.traces => match st.jobs.attach_traces(&mut rows).await {
                Ok(()) => rows,
                Err(e) => {
                    tracing::error!(job.id = %st.job, error = %e, "export failed mid-stream");
                    st.done = true;
                    return Some((Err(std::io::Error::other("export interrupted")), st));
                }
            },
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(job.id = %st.job, error = %e, "export failed mid-stream");
                st.done = true;
                return Some((Err(std::io::Error::other("export interrupted")), st));
            }
        };
        if rows.len() < EXPORT_CHUNK as usize {
            st.done = true;
        }
        st.after = rows.last().map(|r| r.index).or(st.after);
        let rows: Vec<Value> = match st.records {
            ExportRecords::Completed => rows
                .into_iter()
                .map(|r| r.values.unwrap_or(Value::Null))
                .collect(),
            ExportRecords::Failed => rows.into_iter().map(error_line).collect(),
        };
        let rows = match &st.output {
            None => rows,
            Some(o) => {
                let rendered = st.jobs.cpu.run(|| render_rows(o, rows)).await;
                match rendered {
                    Ok(rows) => rows,
                    Err(e) => {
                        tracing::warn!(job.id = %st.job, processor = %o.name, error = %e, "processor output failed to render; export stopped");
                        st.done = true;
                        return Some((Err(std::io::Error::other("export interrupted")), st));
                    }
                }
            }
        };
        if let Some(sink) = st.parquet.as_mut() {
            let written = st.jobs.cpu.run(|| sink.write(&rows)).await;
            let written = match (written, st.done, st.parquet.take()) {
                (Ok(mut bytes), true, Some(sink)) => sink.finish().map(|footer| {
                    bytes.extend(footer);
                    bytes
                }),
                (written, _, sink) => {
                    st.parquet = sink;
                    written
                }
            };
            return match written {
                Ok(bytes) => Some((Ok(Bytes::from(bytes)), st)),
                Err(e) => {
                    tracing::error!(job.id = %st.job, error = %e, "parquet export failed mid-stream");
                    st.done = true;
                    Some((Err(std::io::Error::other("export interrupted")), st))
                }
            };
        }
        for values in rows {
            let res = match st.kind {
                ExportFormat::Jsonl => serde_json::to_writer(&mut out, &values)
                    .map(|()| out.push(b'\n'))
                    .map_err(std::io::Error::other),
                ExportFormat::Csv => {
                    let cells: Vec<String> = st
                        .columns
                        .iter()
                        .map(|(c, _)| csv_cell(values.get(c)))
                        .collect();
                    write_csv_row(&mut out, cells.iter().map(String::as_str))
                }
                // Written above, a row group per chunk.
                ExportFormat::Parquet => Ok(()),
            };
            if let Err(e) = res {
                st.done = true;
                return Some((Err(e), st));
            }
        }
        Some((Ok(Bytes::from(out)), st))
    })
    .boxed())
}

/// A line of the error file: which record, why it failed, and what it had.
fn error_line(r: RecordRow) -> Value {
    json!({
        "id": r.id,
        "index": r.index,
        "attempts": r.attempts,
        "error": r.error,
        "values": r.values,
    })
}

/// Renders the processor rows of one chunk of main rows.
fn render_rows(o: &Output, rows: Vec<Value>) -> Result<Vec<Value>, String> {
    rows.iter()
        .map(|row| {
            o.compiled
                .plan
                .render_output(&o.name, row)
                .unwrap_or_else(|| Err(format!("no processor output '{}'", o.name)))
        })
        .collect()
}

fn write_csv_row<'a>(
    out: &mut Vec<u8>,
    cells: impl Iterator<Item = &'a str>,
) -> Result<(), std::io::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(cells).map_err(std::io::Error::other)?;
    w.flush()
}

/// Strings as they are, null and missing as empty, numbers and booleans as text, nested values
/// as JSON; then [`neutralize_formula`], since a CSV export is made to be opened in a
/// spreadsheet.
fn csv_cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => neutralize_formula(s),
        Some(other) => neutralize_formula(&other.to_string()),
    }
}

/// First characters that make a spreadsheet read a cell as a formula: OWASP's list (`=`, `+`,
/// `-`, `@`, tab, carriage return), NUL (ASVS 1.2.10), and the full-width forms of the four
/// signs, which spreadsheets in CJK locales treat like the ASCII ones.
const FORMULA_LEADS: &[char] = &[
    '=', '+', '-', '@', '\t', '\r', '\0', '\u{FF1D}', '\u{FF0B}', '\u{FF0D}', '\u{FF20}',
];

/// CSV formula neutralization, for values and column names alike: a cell that starts with one
/// of [`FORMULA_LEADS`] gets a single quote in front (OWASP's recommendation; spreadsheets then
/// show it as text). A plain number such as `-3.5` or `+1e5` is left as it is: a spreadsheet
/// reads it as a number, not a formula, and prefixing it would turn numeric columns into text.
/// `-1+2` is not a plain number, so it is prefixed. Leading blanks do not hide a formula
/// (` =1+1`, `\n=1+1`, an ideographic space), nor do invisible format characters that are not
/// Unicode whitespace (a zero-width space `\u{200B}=`, a byte order mark `\u{FEFF}=`, a word
/// joiner): spreadsheets skip them, so the first character after them counts too. JSONL
/// exports carry values unchanged.
fn neutralize_formula(cell: &str) -> String {
    let formula = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| FORMULA_LEADS.contains(&c) && !is_plain_number(s))
    };
    let invisible = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}'
            )
    };
    if formula(cell) || formula(cell.trim_start_matches(invisible)) {
        format!("'{cell}")
    } else {
        cell.to_owned()
    }
}

/// An optional sign, digits with at most one decimal point (at least one digit), and an
/// optional exponent: the numbers a spreadsheet parses as numbers. Nothing else (no `inf`, no
/// spaces, no operators).
fn is_plain_number(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (int.is_empty() || digits(int))
                && (frac.is_empty() || digits(frac))
                && !(int.is_empty() && frac.is_empty())
        }
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn csv_cells_and_quoting() {
        assert_eq!(csv_cell(Some(&json!("a,b"))), "a,b");
        assert_eq!(csv_cell(Some(&json!({"k": 1}))), "{\"k\":1}");
        assert_eq!(csv_cell(None), "");
        let mut out = Vec::new();
        write_csv_row(&mut out, ["a,b", "say \"hi\"", "x"].into_iter()).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a,b\",\"say \"\"hi\"\"\",x\n"
        );
    }

    #[test]
    fn csv_formulas_are_neutralized_and_numbers_kept() {
        for formula in [
            "=1+1",
            "+1+1",
            "-1+2",
            "@SUM(A1)",
            "\tx",
            "\rx",
            "\0x",
            "=HYPERLINK(\"http://x\")",
            "\u{FF1D}1+1",
            "-",
            "+",
            "-inf",
            "- 3",
            "-3.5.1",
            "1e5",
            " =1+1",
            "\n=1+1",
            "\u{3000}=1+1",
            "  \t @SUM(A1)",
        ] {
            let cell = csv_cell(Some(&json!(formula)));
            if formula == "1e5" {
                assert_eq!(cell, "1e5", "digits first: not a formula");
            } else {
                assert_eq!(cell, format!("'{formula}"), "{formula:?}");
            }
        }
        for number in ["-3.5", "+1", "-1e5", "-.5", "-2.", "+1E-3", "-0"] {
            assert_eq!(csv_cell(Some(&json!(number))), number, "{number:?}");
        }
        assert_eq!(csv_cell(Some(&json!(-3.5))), "-3.5");
        assert_eq!(csv_cell(Some(&json!(-7))), "-7");
        assert_eq!(csv_cell(Some(&json!(["=1"]))), "[\"=1\"]");
        assert_eq!(csv_cell(Some(&json!("a=b"))), "a=b");
        assert_eq!(csv_cell(Some(&json!(" -3.5"))), " -3.5");
        assert_eq!(csv_cell(Some(&json!("  text"))), "  text");
        assert_eq!(csv_cell(Some(&json!("'=x"))), "'=x");
        assert_eq!(
            neutralize_formula("=cmd|' /C calc'!A0"),
            "'=cmd|' /C calc'!A0"
        );
        assert_eq!(neutralize_formula(""), "");
        // Round 3: format characters that are not whitespace hid the formula.
        assert_eq!(neutralize_formula("\u{200b}=1+1"), "'\u{200b}=1+1");
        assert_eq!(neutralize_formula("\u{feff}=1+1"), "'\u{feff}=1+1");
        assert_eq!(neutralize_formula("\u{2060}@SUM(A1)"), "'\u{2060}@SUM(A1)");
        assert_eq!(neutralize_formula("\u{200b}-3"), "\u{200b}-3");
    }
}
