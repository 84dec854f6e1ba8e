//! `POST .../workspaces/{workspace}/preview`: the client's `preview(builder, num_records)`.
//!
//! Every check a job gets runs before the answer starts (the config, the key's aliases, the
//! tools' providers, the seeds), so a bad config or model is a `422` with the client's
//! `detail`, which it raises as `DataDesignerConfigValidationError`; no `200` is followed by
//! an error. Then the answer is NDJSON, one frame a line, each tagged by `kind`: `log` frames
//! while records finish and for each failed record, a `heartbeat` every [`HEARTBEAT`] of
//! silence (the client reads with a 60 s timeout), and at the end `dataset_metadata`,
//! `dataset` (the completed records, row by row), `analysis` (the first door's
//! `DatasetProfilerResults`) and `done`. When no record completed, an `error` frame says why
//! instead: the client would refuse an empty dataset without saying why.
//!
//! A client that goes away drops the stream, which stops the preview's generation: the
//! preview runs inside the response body's stream.

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

use super::errors::PlatformErrorBody;
use super::views::check_name;
use crate::api::data_designer::analysis::profiler_results;
use crate::api::extract::{self, ApiPath, BodyFormat};
use crate::auth::Caller;
use crate::domain::record::RecordOutcome;
use crate::error::ApiError;
use crate::jobs::{Preview, SubmitRequest};
use crate::state::AppState;

/// How long the stream may be silent before a heartbeat (NVIDIA's service: 5 s).
const HEARTBEAT: Duration = Duration::from_secs(5);

/// Records when the request names none (the platform's default, and its most).
const DEFAULT_RECORDS: i64 = 10;

/// The platform's `PreviewSpec`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlatformPreviewRequest {
    /// A Data Designer config (`DataDesignerConfig`).
    #[schema(value_type = Object)]
    pub config: Value,
    /// Records to generate, at most 10 (default 10).
    pub num_records: Option<i64>,
}

/// Preview a config
///
/// Checks the config as a job submit does, then streams NDJSON frames (`log`, `heartbeat`,
/// then `dataset_metadata`, `dataset`, `analysis` and `done`, or `error`) while up to 10
/// records are generated. Nothing is stored.
#[utoipa::path(post, path = "/apis/data-designer/v2/workspaces/{workspace}/preview",
    operation_id = "platform_preview", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace")),
    request_body = PlatformPreviewRequest,
    responses(
        (status = 200, description = "NDJSON frames", content_type = "application/x-ndjson", body = String),
        (status = 400, description = "Malformed JSON (`invalid_json`, `duplicate_key`)", body = PlatformErrorBody),
        (status = 403, description = "The key may not use a model or tool alias the config names (`alias_not_allowed`)", body = PlatformErrorBody),
        (status = 413, description = "Body too large (`payload_too_large`)", body = PlatformErrorBody),
        (status = 422, description = "Invalid request, workspace or config, an unknown model or provider (`num_records_out_of_range` above 10, config codes)", body = PlatformErrorBody),
        (status = 503, description = "An MCP provider the tools need is unreachable (`mcp_unavailable`)", body = PlatformErrorBody),
    ))]
pub async fn preview(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(workspace): ApiPath<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_name("workspace", &workspace)?;
    let value = state
        .jobs
        .cpu()
        .run(|| extract::decode_body(BodyFormat::Json, &body))
        .await?;
    let req: PlatformPreviewRequest = extract::from_value(value)?;
    let submit = SubmitRequest::of(
        super::platform_config(req.config, &workspace),
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
        let outcome = jobs.run_preview(prepared, &on_record);
        let frames = match outcome.await {
            Ok(preview) => finish(&preview),
            Err(e) => failure(e.code(), &e.to_string()),
        };
        for frame in frames {
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    };
    // The preview runs as the response body is read (see the module docs); the frames end
    // once the producer is done and its senders are gone.
    let driver = futures::stream::once(producer).filter_map(|()| async { None::<Bytes> });
    let frames = futures::stream::select(tokio_stream::wrappers::ReceiverStream::new(rx), driver);
    let stream = with_heartbeats(frames).map(Ok::<_, std::convert::Infallible>);
    let mut resp = Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(resp)
}

/// `frames`, with a heartbeat after each [`HEARTBEAT`] of silence.
fn with_heartbeats(
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
) -> impl futures::Stream<Item = Bytes> + Send + 'static {
    let frames = Box::pin(frames);
    futures::stream::unfold(frames, |mut frames| async move {
        match tokio::time::timeout(HEARTBEAT, frames.next()).await {
            Ok(Some(next)) => Some((next, frames)),
            Ok(None) => None,
            Err(_) => Some((frame(json!({"kind": "heartbeat"})), frames)),
        }
    })
}

/// The frames after the last record: a warning per failed record, then the dataset and its
/// analysis, or an `error` when no record completed.
fn finish(preview: &Preview) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut rows = Vec::new();
    let mut first_failure = None;
    for (i, record) in preview.records.iter().enumerate() {
        match &record.outcome {
            RecordOutcome::Completed { values } => {
                let row: Map<String, Value> = preview
                    .columns
                    .iter()
                    .map(|c| (c.clone(), values.get(c).cloned().unwrap_or(Value::Null)))
                    .collect();
                rows.push(Value::Object(row));
            }
            RecordOutcome::Failed { error, .. } => {
                let column = error
                    .column
                    .as_deref()
                    .map(|c| format!(" (column '{c}')"))
                    .unwrap_or_default();
                let text = format!(
                    "record {i} failed{column}: {}: {}",
                    error.code.as_str(),
                    error.message
                );
                out.push(log("warning", &format!("⚠️ {text}")));
                first_failure.get_or_insert((error.code.as_str(), text));
            }
        }
    }
    if rows.is_empty() {
        let (code, why) = first_failure.unwrap_or(("no_records", "no record was generated".into()));
        out.extend(failure(
            code,
            &format!("no preview record completed; {why}"),
        ));
        return out;
    }
    let done = rows.len();
    let analysis = preview.profile.as_ref().map(profiler_results);
    let seed_columns: Vec<&str> = preview
        .profile
        .iter()
        .flat_map(|p| &p.column_statistics)
        .filter(|c| c.column_type == "seed-dataset")
        .map(|c| c.column_name.as_str())
        .collect();
    out.push(frame(json!({"kind": "dataset_metadata",
        "metadata": {"seed_column_names": seed_columns}})));
    out.push(frame(json!({"kind": "dataset", "records": rows})));
    if let Some(analysis) = analysis {
        out.push(frame(json!({"kind": "analysis", "analysis": analysis})));
    }
    out.push(log(
        "info",
        &format!(
            "🏁 Preview done: {done} of {} records generated",
            preview.records.len()
        ),
    ));
    out.push(frame(json!({"kind": "done"})));
    out
}

/// An error log and the `error` frame that ends the stream (the client raises it).
fn failure(code: &str, message: &str) -> Vec<Bytes> {
    vec![
        log("error", &format!("🛑 {code}: {message}")),
        frame(
            json!({"kind": "error", "message": format!("{code}: {message}"),
            "details": {"type": code}}),
        ),
    ]
}

/// A `log` frame at `level` (`debug`, `info`, `warning`, `error`).
fn log(level: &str, message: &str) -> Bytes {
    frame(json!({"kind": "log", "level": level, "message": message}))
}

/// One frame as a line.
fn frame(v: Value) -> Bytes {
    let mut text = v.to_string();
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

    fn frames(preview: &Preview) -> Vec<Value> {
        finish(preview)
            .iter()
            .map(|b| {
                assert!(b.ends_with(b"\n") && !b[..b.len() - 1].contains(&b'\n'));
                serde_json::from_slice(b).unwrap()
            })
            .collect()
    }

    #[test]
    fn the_dataset_is_rows_and_failures_are_warnings() {
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
                completed(json!({"a": 2})),
            ],
            profile: None,
            selection: None,
        };
        let f = frames(&preview);
        let kinds: Vec<&str> = f.iter().map(|v| v["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["log", "dataset_metadata", "dataset", "log", "done"]);
        assert_eq!(f[0]["level"], "warning");
        assert!(
            f[0]["message"]
                .as_str()
                .unwrap()
                .contains("record 1 failed (column 'b'): llm_output_invalid: no JSON")
        );
        assert_eq!(f[1]["metadata"], json!({"seed_column_names": []}));
        assert_eq!(
            f[2]["records"],
            json!([{"a": 1, "b": "x"}, {"a": 2, "b": null}])
        );
    }

    #[test]
    fn no_completed_record_is_an_error_frame_that_says_why() {
        let preview = Preview {
            columns: vec!["a".into()],
            seed: 1,
            records: vec![Generated::failed(RecordError::new(
                RecordErrorCode::LlmOutputInvalid,
                Some("a".into()),
                "no JSON",
            ))],
            profile: None,
            selection: None,
        };
        let f = frames(&preview);
        let last = f.last().unwrap();
        assert_eq!(last["kind"], "error");
        assert_eq!(last["details"]["type"], "llm_output_invalid");
        assert!(
            last["message"]
                .as_str()
                .unwrap()
                .contains("record 0 failed (column 'a')")
        );
        assert!(f.iter().all(|v| v["kind"] != "dataset"));
    }

    #[tokio::test(start_paused = true)]
    async fn silence_is_broken_by_heartbeats() {
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        let mut s = Box::pin(with_heartbeats(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ));
        tx.send(frame(json!({"kind": "log"}))).await.unwrap();
        assert_eq!(s.next().await.unwrap(), frame(json!({"kind": "log"})));
        // Nothing for longer than a heartbeat: the paused clock advances to it.
        assert_eq!(s.next().await.unwrap(), frame(json!({"kind": "heartbeat"})));
        drop(tx);
        assert!(s.next().await.is_none());
    }
}
