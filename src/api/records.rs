//! Record endpoints: a job's records (paged JSON, or the whole dataset streamed as JSONL/CSV)
//! and one record by id.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::Stream;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::{
    ColumnTrace, ListRecordsQuery, RecordListResponse, RecordResponse, RecordsFormat, TraceQuery,
    TraceResponse,
};
use super::extract::{self, ApiPath, ApiQuery};
use super::jobs::page_limit;
use crate::auth::Caller;
use crate::domain::{JobId, RecordStatus};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use crate::store::Store;

/// Records fetched per database round trip while streaming an export.
const EXPORT_CHUNK: u32 = 500;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_job_records))
        .routes(routes!(get_record))
        .routes(routes!(get_record_trace))
}

/// The streaming routes, kept apart so the request timeout does not cut long downloads.
pub(super) fn is_streaming(path: &str, query: Option<&str>) -> bool {
    path.ends_with("/events")
        || (path.ends_with("/records")
            && query.is_some_and(|q| q.contains("format=jsonl") || q.contains("format=csv")))
}

/// List a job's records, or export its dataset
///
/// `format=json` (default) returns a page of records with status, values and errors, ordered by
/// index. `format=jsonl` and `format=csv` stream the whole dataset (the values of completed
/// records, by index) without buffering it.
#[utoipa::path(
    get, path = "/v1/jobs/{id}/records", tag = "records",
    params(("id" = uuid::Uuid, Path, description = "Job id"), ListRecordsQuery),
    responses(
        (status = 200, description = "A page of records (json), or the dataset (jsonl, csv)",
            content(
                (RecordListResponse = "application/json"),
                (String = "application/x-ndjson"),
                (String = "text/csv"),
            )),
        (status = 400, description = "Bad id or cursor (`invalid_id`, `invalid_cursor`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
        (status = 422, description = "Bad query parameter (`invalid_request`)", body = ErrorBody),
    )
)]
pub async fn list_job_records(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<ListRecordsQuery>,
) -> Result<Response, ApiError> {
    let id = extract::job_id(&id)?;
    let job = state.jobs.get(id, caller.owner()).await?;
    let format = q.format.unwrap_or_default();
    let traces = q.include_traces == Some(true);
    if format != RecordsFormat::Json
        && (q.cursor.is_some() || q.limit.is_some() || q.status.is_some())
    {
        return Err(ApiError::InvalidRequest(
            "'cursor', 'limit' and 'status' apply to format=json only; exports stream every completed record".into(),
        ));
    }
    match format {
        RecordsFormat::Json => {
            let limit = page_limit(q.limit, 100, state.config.limits.max_page_size)?;
            let after = match &q.cursor {
                Some(c) => Some(extract::decode_cursor("rec", c)?.parse::<u32>().map_err(
                    |_| ApiError::InvalidCursor(format!("'{c}' was not issued by this endpoint")),
                )?),
                None => None,
            };
            let mut rows = state
                .store
                .list_records(id, after, q.status, limit + 1)
                .await?;
            let more = rows.len() > limit as usize;
            rows.truncate(limit as usize);
            let next_cursor = more
                .then(|| {
                    rows.last()
                        .map(|r| extract::encode_cursor("rec", &r.index.to_string()))
                })
                .flatten();
            if q.include_traces == Some(true) {
                attach_traces(state.store.as_ref(), &mut rows).await?;
            }
            let records = rows.into_iter().map(RecordResponse::from).collect();
            Ok(Json(RecordListResponse {
                records,
                next_cursor,
            })
            .into_response())
        }
        RecordsFormat::Jsonl => Ok(stream_response(
            "application/x-ndjson",
            export(
                state.store.clone(),
                id,
                Vec::new(),
                ExportKind::Jsonl,
                traces,
            ),
            &format!("{id}.jsonl"),
        )),
        RecordsFormat::Csv => {
            let columns = state
                .jobs
                .compiled(&job)
                .await
                .map(|c| {
                    let mut cols = c.plan.output_columns().to_vec();
                    if traces {
                        let all = c.run_config.debug_override_save_all_column_traces;
                        cols.extend(c.plan.trace_columns(all));
                    }
                    cols
                })
                .unwrap_or_default();
            Ok(stream_response(
                "text/csv; charset=utf-8",
                export(state.store.clone(), id, columns, ExportKind::Csv, traces),
                &format!("{id}.csv"),
            ))
        }
    }
}

/// Get a record
///
/// Its values, status, attempts, and error if it failed.
#[utoipa::path(
    get, path = "/v1/records/{id}", tag = "records",
    params(("id" = uuid::Uuid, Path, description = "Record id")),
    responses(
        (status = 200, description = "The record", body = RecordResponse),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such record (`record_not_found`)", body = ErrorBody),
    )
)]
pub async fn get_record(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RecordResponse>, ApiError> {
    let id = extract::record_id(&id)?;
    Ok(Json(load_record(&state, &caller, id).await?.into()))
}

/// A record visible to the caller, or `record_not_found`.
async fn load_record(
    state: &AppState,
    caller: &Caller,
    id: crate::domain::RecordId,
) -> Result<crate::store::RecordRow, ApiError> {
    state
        .store
        .get_record(id, caller.owner())
        .await?
        .ok_or_else(|| ApiError::RecordNotFound(id.to_string()))
}

/// Get a record's message traces
///
/// The ordered messages of each LLM column's final attempt (`system`, `user`, `assistant` with
/// `tool_calls`/`reasoning_content`, `tool` with `tool_call_id`), for columns with `with_trace`
/// or jobs with `run_config.debug_override_save_all_column_traces`. `?column=` selects one.
#[utoipa::path(
    get, path = "/v1/records/{id}/trace", tag = "records",
    params(("id" = uuid::Uuid, Path, description = "Record id"), TraceQuery),
    responses(
        (status = 200, description = "The traces, by column", body = TraceResponse),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such record (`record_not_found`), or no trace for that column (`trace_not_found`)", body = ErrorBody),
        (status = 422, description = "Bad query parameter (`invalid_request`)", body = ErrorBody),
    )
)]
pub async fn get_record_trace(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<TraceQuery>,
) -> Result<Json<TraceResponse>, ApiError> {
    let id = extract::record_id(&id)?;
    load_record(&state, &caller, id).await?;
    let rows = state.store.get_traces(id, q.column.as_deref()).await?;
    if let Some(column) = &q.column
        && rows.is_empty()
    {
        return Err(ApiError::TraceNotFound(format!(
            "record {id} has no trace for column '{column}'"
        )));
    }
    Ok(Json(TraceResponse {
        record_id: id,
        traces: rows
            .into_iter()
            .map(|t| ColumnTrace {
                column: t.column,
                messages: t.messages,
            })
            .collect(),
    }))
}

fn stream_response(
    content_type: &'static str,
    body: impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
    filename: &str,
) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

#[derive(Clone, Copy)]
enum ExportKind {
    Jsonl,
    Csv,
}

struct ExportState {
    store: Arc<dyn Store>,
    job: JobId,
    columns: Vec<String>,
    kind: ExportKind,
    after: Option<u32>,
    traces: bool,
    header_done: bool,
    done: bool,
}

/// Pages through completed records in index order, one chunk per database round trip, so
/// memory stays flat whatever the dataset size.
fn export(
    store: Arc<dyn Store>,
    job: JobId,
    columns: Vec<String>,
    kind: ExportKind,
    traces: bool,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let st = ExportState {
        store,
        job,
        columns,
        kind,
        after: None,
        traces,
        header_done: false,
        done: false,
    };
    futures::stream::unfold(st, |mut st| async move {
        if st.done {
            return None;
        }
        let mut out = Vec::new();
        if let (ExportKind::Csv, false) = (st.kind, st.header_done) {
            st.header_done = true;
            let header: Vec<String> = st.columns.iter().map(|c| neutralize_formula(c)).collect();
            if let Err(e) = write_csv_row(&mut out, header.iter().map(String::as_str)) {
                return Some((Err(e), st));
            }
        }
        let rows = match st
            .store
            .list_records(
                st.job,
                st.after,
                Some(RecordStatus::Completed),
                EXPORT_CHUNK,
            )
            .await
        {
            Ok(mut rows) if st.traces => match attach_traces(st.store.as_ref(), &mut rows).await {
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
        for row in rows {
            let values = row.values.unwrap_or(Value::Null);
            let res = match st.kind {
                ExportKind::Jsonl => serde_json::to_writer(&mut out, &values)
                    .map(|()| out.push(b'\n'))
                    .map_err(std::io::Error::other),
                ExportKind::Csv => {
                    let cells: Vec<String> =
                        st.columns.iter().map(|c| csv_cell(values.get(c))).collect();
                    write_csv_row(&mut out, cells.iter().map(String::as_str))
                }
            };
            if let Err(e) = res {
                st.done = true;
                return Some((Err(e), st));
            }
        }
        Some((Ok(Bytes::from(out)), st))
    })
}

/// Adds each record's traces to its values as `{column}__trace`.
async fn attach_traces(
    store: &dyn Store,
    rows: &mut [crate::store::RecordRow],
) -> Result<(), ApiError> {
    let ids: Vec<_> = rows.iter().map(|r| r.id).collect();
    let mut by_record: std::collections::HashMap<_, Vec<_>> = std::collections::HashMap::new();
    for t in store.traces_for(&ids).await? {
        by_record.entry(t.record_id).or_default().push(t);
    }
    for row in rows {
        let (Some(traces), Some(Value::Object(values))) =
            (by_record.remove(&row.id), row.values.as_mut())
        else {
            continue;
        };
        for t in traces {
            let key = format!("{}{}", t.column, crate::domain::dataset::TRACE_POSTFIX);
            values.insert(key, t.messages);
        }
    }
    Ok(())
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
/// `-1+2` is not a plain number, so it is prefixed. JSONL exports carry values unchanged.
fn neutralize_formula(cell: &str) -> String {
    match cell.chars().next() {
        Some(c) if FORMULA_LEADS.contains(&c) && !is_plain_number(cell) => format!("'{cell}"),
        _ => cell.to_owned(),
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
        assert_eq!(csv_cell(Some(&json!("'=x"))), "'=x");
        assert_eq!(
            neutralize_formula("=cmd|' /C calc'!A0"),
            "'=cmd|' /C calc'!A0"
        );
        assert_eq!(neutralize_formula(""), "");
    }

    #[test]
    fn streaming_routes_are_recognized() {
        assert!(is_streaming("/v1/jobs/x/events", None));
        assert!(is_streaming("/v1/jobs/x/records", Some("format=csv")));
        assert!(!is_streaming("/v1/jobs/x/records", Some("limit=5")));
    }
}
