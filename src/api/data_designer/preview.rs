//! `POST /v1/data-designer/preview`: the client's `preview(builder, num_records)`.
//!
//! The request is checked in full first (the config as a submit checks it, the key's
//! aliases, the tools' providers), so a bad config is a `422` with our envelope, which the
//! client raises as `DataDesignerConfigValidationError` showing our code and message. Then
//! the answer is a stream of JSON Lines, one `PreviewMessage` a line, as the client reads
//! them: `log` messages (each with `extra.level`, which the client requires) while records
//! finish and for each failed record, a `heartbeat` every [`HEARTBEAT`] so the client's
//! per-read timeout does not fire while models think, and at the end one `dataset` message:
//! the completed records as `{column: [values]}`, encoded as a JSON string in `message`,
//! which the client turns into a DataFrame, then one `analysis` message, the records'
//! statistics as the client's `DatasetProfilerResults` (see [`super::analysis`]). Every line
//! ends in `\n`, none is blank (the client's decoder fails on a blank line).
//!
//! A client that goes away drops the stream, which stops the preview's generation: the
//! preview runs inside the response body's stream, not on a task of its own.

use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use utoipa::ToSchema;

use crate::api::extract::{self, BodyFormat};
use crate::auth::Caller;
use crate::domain::record::RecordOutcome;
use crate::error::{ApiError, ErrorBody};
use crate::jobs::{Preview, SubmitRequest};
use crate::state::AppState;

/// How often a heartbeat goes out while records are generated. The client reads with a
/// timeout of 120 s by default (its `timeout=`); a line well inside that keeps it reading.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// Records when the client sends `num_records: null` (its own default, which it does not
/// send, is 10).
const DEFAULT_RECORDS: i64 = 10;

/// The client's `DataDesignerPreviewParams`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// A Data Designer config (`DataDesignerConfig`).
    #[schema(value_type = Object)]
    pub config: Value,
    /// Records to generate, at most 10; `null` for 10.
    pub num_records: Option<i64>,
}

/// Data Designer preview
///
/// Checks the config as `POST /v1/preview` does, then streams JSON Lines of `PreviewMessage`s
/// (`log`, `heartbeat`, then one `dataset` and one `analysis`) while up to 10 records are
/// generated. Nothing is stored.
#[utoipa::path(post, path = "/v1/data-designer/preview", tag = "data-designer",
    request_body = PreviewRequest,
    responses(
        (status = 200, description = "JSON Lines of preview messages", content_type = "application/jsonl", body = String),
        (status = 400, description = "Malformed JSON (`invalid_json`, `duplicate_key`)", body = ErrorBody),
        (status = 403, description = "The key may not use a model or tool alias the config names (`alias_not_allowed`)", body = ErrorBody),
        (status = 413, description = "Body too large (`payload_too_large`)", body = ErrorBody),
        (status = 422, description = "Invalid request or config (`num_records_out_of_range` above 10, config codes)", body = ErrorBody),
        (status = 503, description = "An MCP provider the tools need is unreachable (`mcp_unavailable`)", body = ErrorBody),
    ))]
pub async fn preview(
    State(state): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    let value = state
        .jobs
        .cpu()
        .run(|| extract::decode_body(BodyFormat::Json, &body))
        .await?;
    let req: PreviewRequest = extract::from_value(value)?;
    let submit = SubmitRequest::of(
        super::client_config(req.config),
        req.num_records.unwrap_or(DEFAULT_RECORDS),
    );
    let prepared = state
        .jobs
        .prepare_preview(submit, &caller)
        .await?
        .with_profile();
    let total = prepared.num_records();

    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let jobs = state.jobs.clone();
    let producer = async move {
        let _ = tx
            .send(log(
                "info",
                &format!("🚀 Generating {total} preview records"),
            ))
            .await;
        let progress = tx.clone();
        let on_record = move |done: u32, total: u32| {
            // Progress is best effort: a full channel (a slow reader) skips a line.
            let _ = progress.try_send(log("info", &format!("✅ {done} of {total} records done")));
        };
        let beat = tx.clone();
        let heartbeats = async move {
            loop {
                tokio::time::sleep(HEARTBEAT).await;
                if beat.send(line("heartbeat", "", None)).await.is_err() {
                    return;
                }
            }
        };
        let outcome = tokio::select! {
            out = jobs.run_preview(prepared, &on_record) => out,
            () = heartbeats => return,
        };
        match outcome {
            Ok(preview) => {
                for message in finish(&preview) {
                    if tx.send(message).await.is_err() {
                        return;
                    }
                }
            }
            Err(e) => {
                let _ = tx
                    .send(log("error", &format!("🛑 {}: {e}", e.code())))
                    .await;
            }
        }
    };
    // The preview runs as the response body is read, inside the body's stream: when the
    // client goes away the body is dropped, and the preview's generation with it. The lines
    // end once the producer is done and its senders are gone.
    let driver = futures::stream::once(producer).filter_map(|()| async { None::<Bytes> });
    let lines = tokio_stream::wrappers::ReceiverStream::new(rx);
    let stream = futures::stream::select(lines, driver).map(Ok::<_, std::convert::Infallible>);
    let mut resp = Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jsonl"),
    );
    Ok(resp)
}

/// The messages after the last record: a warning per failed record, the dataset, its
/// analysis, the end.
fn finish(preview: &Preview) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut columns: Map<String, Value> = preview
        .columns
        .iter()
        .map(|c| (c.clone(), Value::Array(Vec::new())))
        .collect();
    let mut failed = 0;
    for (i, record) in preview.records.iter().enumerate() {
        match &record.outcome {
            RecordOutcome::Completed { values } => {
                for (name, cells) in &mut columns {
                    if let Value::Array(cells) = cells {
                        cells.push(values.get(name).cloned().unwrap_or(Value::Null));
                    }
                }
            }
            RecordOutcome::Failed { error, .. } => {
                failed += 1;
                let column = error
                    .column
                    .as_deref()
                    .map(|c| format!(" (column '{c}')"))
                    .unwrap_or_default();
                out.push(log(
                    "warning",
                    &format!(
                        "⚠️ record {i} failed{column}: {}: {}",
                        error.code.as_str(),
                        error.message
                    ),
                ));
            }
        }
    }
    out.push(line("dataset", &Value::Object(columns).to_string(), None));
    if let Some(profile) = &preview.profile {
        let analysis = super::analysis::profiler_results(profile).to_string();
        out.push(line("analysis", &analysis, None));
    }
    if let Some(s) = &preview.selection {
        let (level, head) = if s.exhausted() {
            ("warning", "⚠️ Record selection ran out of candidates")
        } else {
            ("info", "🎯 Record selection")
        };
        out.push(log(
            level,
            &format!(
                "{head}: {} of {} records accepted from {} candidates ({} rejected, {} null \
                 predicate, {} failed, {} trimmed)",
                s.accepted,
                s.target,
                s.candidates(),
                s.rejected,
                s.null_predicate,
                s.failed_generation,
                s.trimmed
            ),
        ));
    }
    let done = preview.records.len() - failed;
    out.push(log(
        "info",
        &format!(
            "🏁 Preview done: {done} of {} records generated",
            preview.records.len()
        ),
    ));
    out
}

/// A `log` message at `level` (`info`, `warning`, `error`).
fn log(level: &str, message: &str) -> Bytes {
    line("log", message, Some(level))
}

/// One `PreviewMessage` as a line.
fn line(message_type: &str, message: &str, level: Option<&str>) -> Bytes {
    let mut m = json!({"message": message, "message_type": message_type});
    if let Some(level) = level {
        m["extra"] = json!({"level": level});
    }
    let mut text = m.to_string();
    text.push('\n');
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::record::{RecordError, RecordErrorCode};
    use crate::generate::Generated;

    fn completed(values: Value) -> Generated {
        let mut g = Generated::failed(RecordError::new(
            RecordErrorCode::InternalError,
            None,
            String::new(),
        ));
        g.outcome = RecordOutcome::Completed { values };
        g
    }

    #[test]
    fn the_dataset_is_columns_of_completed_records_and_failures_are_warnings() {
        let preview = Preview {
            columns: vec!["a".into(), "b".into()],
            seed: 1,
            records: vec![
                completed(json!({"a": 1, "b": "x"})),
                Generated::failed(RecordError::new(
                    RecordErrorCode::LlmOutputInvalid,
                    Some("b".into()),
                    "no JSON",
                )),
                completed(json!({"a": 2, "b": null})),
            ],
            profile: None,
            selection: None,
        };
        let lines: Vec<Value> = finish(&preview)
            .iter()
            .map(|b| {
                assert!(b.ends_with(b"\n"));
                serde_json::from_slice(b).unwrap()
            })
            .collect();
        assert_eq!(lines[0]["message_type"], "log");
        assert_eq!(lines[0]["extra"]["level"], "warning");
        let text = lines[0]["message"].as_str().unwrap();
        assert!(text.contains("record 1 failed (column 'b'): llm_output_invalid: no JSON"));
        assert_eq!(lines[1]["message_type"], "dataset");
        let dataset: Value = serde_json::from_str(lines[1]["message"].as_str().unwrap()).unwrap();
        assert_eq!(dataset, json!({"a": [1, 2], "b": ["x", null]}));
        assert_eq!(lines[2]["extra"]["level"], "info");
    }
}
