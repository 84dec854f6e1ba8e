//! What the client reads from the server: the job object, and the Server-Sent Events of
//! `GET /v1/jobs/{id}/events` decoded into [`JobEvent`].
//!
//! These are the client's own lenient views, not the server's types: unknown fields are
//! ignored and statuses stay strings, so an older CLI keeps working against a newer server.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use sse_stream::Sse;

/// Record counts of a job, as in the job object and `progress` events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct Counts {
    pub total: u64,
    pub pending: u64,
    pub in_progress: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
}

impl Counts {
    /// Records that reached a final state.
    pub(crate) fn finished(&self) -> u64 {
        self.completed + self.failed + self.cancelled
    }
}

/// `{"code", "message"}`, as in a job's `error`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct ErrorInfo {
    pub code: String,
    pub message: String,
}

/// The parts of the server's job object the client uses.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct JobView {
    pub id: String,
    pub status: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub num_records: Option<u64>,
    #[serde(default)]
    pub counts: Counts,
    #[serde(default)]
    pub error: Option<ErrorInfo>,
    #[serde(default)]
    pub first_errors: Vec<serde_json::Value>,
}

/// Statuses after which a job never changes again.
pub(crate) fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// Data of a `progress` event: sent first, then whenever the counts change.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct ProgressEvent {
    #[serde(default)]
    pub job_id: String,
    pub status: String,
    pub counts: Counts,
}

/// Data of a `record` event: one record reached a final state.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct RecordEvent {
    pub record_id: String,
    #[serde(default)]
    pub index: u64,
    pub status: String,
    #[serde(default)]
    pub error_code: Option<String>,
}

/// One decoded event of a job's event stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JobEvent {
    Progress(ProgressEvent),
    Record(RecordEvent),
    /// The final job object; the server ends the stream after it.
    Done(Box<JobView>),
}

/// An event whose name the client knows but whose data it cannot read.
#[derive(Debug, thiserror::Error)]
#[error("malformed `{event}` event: {reason}")]
pub(crate) struct DecodeError {
    pub event: String,
    pub reason: String,
}

/// Decodes one SSE block. Blocks that carry nothing for the client (keep-alives, bare `id:` or
/// `retry:` blocks, event names this version does not know) give `Ok(None)`.
pub(crate) fn decode_event(sse: &Sse) -> Result<Option<JobEvent>, DecodeError> {
    let Some(name) = sse.event.as_deref() else {
        return Ok(None);
    };
    let data = sse.data.as_deref();
    Ok(match name {
        "progress" => Some(JobEvent::Progress(data_of(name, data)?)),
        "record" => Some(JobEvent::Record(data_of(name, data)?)),
        "done" => Some(JobEvent::Done(Box::new(data_of(name, data)?))),
        _ => None,
    })
}

fn data_of<T: DeserializeOwned>(event: &str, data: Option<&str>) -> Result<T, DecodeError> {
    let error = |reason: String| DecodeError {
        event: event.to_owned(),
        reason,
    };
    let data = data.ok_or_else(|| error("no data".to_owned()))?;
    serde_json::from_str(data).map_err(|e| error(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(event: Option<&str>, data: Option<&str>) -> Sse {
        Sse {
            event: event.map(str::to_owned),
            data: data.map(str::to_owned),
            ..Sse::default()
        }
    }

    #[test]
    fn progress_events_decode() {
        let ev = sse(
            Some("progress"),
            Some(
                r#"{"job_id":"j1","status":"running","counts":{"total":10,"pending":4,"in_progress":2,"completed":3,"failed":1,"cancelled":0}}"#,
            ),
        );
        let Some(JobEvent::Progress(p)) = decode_event(&ev).unwrap() else {
            panic!("not a progress event")
        };
        assert_eq!(p.status, "running");
        assert_eq!(p.counts.finished(), 4);
        assert_eq!(p.counts.total, 10);
    }

    #[test]
    fn record_events_decode_with_optional_error_code() {
        let ev = sse(
            Some("record"),
            Some(r#"{"record_id":"r1","index":7,"status":"failed","error_code":"llm_timeout"}"#),
        );
        assert_eq!(
            decode_event(&ev).unwrap(),
            Some(JobEvent::Record(RecordEvent {
                record_id: "r1".into(),
                index: 7,
                status: "failed".into(),
                error_code: Some("llm_timeout".into()),
            }))
        );
        let ok = sse(
            Some("record"),
            Some(r#"{"record_id":"r2","index":8,"status":"completed","error_code":null}"#),
        );
        assert!(matches!(
            decode_event(&ok).unwrap(),
            Some(JobEvent::Record(RecordEvent {
                error_code: None,
                ..
            }))
        ));
    }

    #[test]
    fn done_carries_the_final_job_and_ignores_unknown_fields() {
        let ev = sse(
            Some("done"),
            Some(
                r#"{"id":"j1","status":"failed","num_records":2,"seed":1,"metadata":null,
                    "counts":{"total":2,"completed":1,"failed":1},
                    "error":{"code":"error_rate_exceeded","message":"too many failures"},
                    "first_errors":[{"code":"x"}],"columns":["a"],"created_at":"t"}"#,
            ),
        );
        let Some(JobEvent::Done(job)) = decode_event(&ev).unwrap() else {
            panic!("not a done event")
        };
        assert_eq!(job.status, "failed");
        assert_eq!(job.counts.pending, 0);
        assert_eq!(job.error.unwrap().code, "error_rate_exceeded");
        assert_eq!(job.first_errors.len(), 1);
    }

    #[test]
    fn blocks_without_meaning_are_skipped() {
        assert_eq!(decode_event(&sse(None, None)).unwrap(), None);
        assert_eq!(decode_event(&sse(None, Some("hello"))).unwrap(), None);
        assert_eq!(decode_event(&sse(Some("usage"), Some("{}"))).unwrap(), None);
    }

    #[test]
    fn malformed_known_events_are_errors() {
        let e = decode_event(&sse(Some("progress"), Some("{not json"))).unwrap_err();
        assert_eq!(e.event, "progress");
        assert!(decode_event(&sse(Some("done"), None)).is_err());
    }

    #[test]
    fn terminal_statuses() {
        for s in ["completed", "failed", "cancelled"] {
            assert!(is_terminal(s));
        }
        for s in ["queued", "running", "cancelling", "whatever"] {
            assert!(!is_terminal(s));
        }
    }
}

/// The most bytes one server-sent event may take. The biggest the server sends (`done`, with
/// the job) is a few KB; without a bound the stream parser buffered a 300 MB event whole
/// (550 MB of memory) before seeing where it ends.
pub(crate) const MAX_EVENT_BYTES: usize = 8 << 20;

/// `body` with each event (the bytes between two blank lines, line endings not counted)
/// bounded at `max` bytes: past it the stream ends with an error instead of growing the parser's
/// buffer.
pub(crate) fn bounded_events<S>(
    body: S,
    max: usize,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>>
where
    S: futures::Stream<Item = Result<bytes::Bytes, reqwest::Error>>,
{
    use futures::StreamExt;
    let mut line_len = 0usize;
    let mut event_len = 0usize;
    let mut after_cr = false;
    body.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        for &b in chunk.iter() {
            // SSE lines end with CRLF, LF or CR; an empty line ends the event.
            if b == b'\n' && after_cr {
                after_cr = false;
                continue;
            }
            after_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                if line_len == 0 {
                    event_len = 0;
                }
                line_len = 0;
            } else {
                line_len += 1;
                event_len += 1;
                if event_len > max {
                    return Err(std::io::Error::other(format!(
                        "the server sent an event of more than {max} bytes"
                    )));
                }
            }
        }
        Ok(chunk)
    })
}

#[cfg(test)]
mod bound_tests {
    use futures::StreamExt;

    use super::*;

    async fn run(chunks: &[&'static str], max: usize) -> Result<usize, String> {
        let body = futures::stream::iter(
            chunks
                .iter()
                .map(|c| Ok::<_, reqwest::Error>(bytes::Bytes::from_static(c.as_bytes())))
                .collect::<Vec<_>>(),
        );
        let mut total = 0;
        let mut s = std::pin::pin!(bounded_events(body, max));
        while let Some(chunk) = s.next().await {
            total += chunk.map_err(|e| e.to_string())?.len();
        }
        Ok(total)
    }

    #[tokio::test]
    async fn an_event_past_the_bound_ends_the_stream_and_blank_lines_reset_it() {
        // Events of 10 bytes each (line endings not counted), any line ending, split anywhere.
        assert!(
            run(
                &["data: 1234\n\n", "data: 1234\r\n\r", "\ndata: 1234\r\r"],
                10
            )
            .await
            .is_ok()
        );
        // One event of many lines grows past the bound, whatever its line endings.
        for eol in ["\n", "\r\n", "\r"] {
            let line: &'static str = Box::leak(format!("data: 12{eol}").into_boxed_str());
            let err = run(&[line, line, line], 20).await.unwrap_err();
            assert!(err.contains("more than 20 bytes"), "{err}");
        }
    }
}
