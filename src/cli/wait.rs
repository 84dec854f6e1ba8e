//! `submit --wait`: follows `GET /v1/jobs/{id}/events` until the `done` event, reconnecting
//! when the stream drops.
//!
//! The server sends a `progress` event first on every connection, so a reconnect needs no
//! resume position: the bar simply jumps to the current counts. When a stream ends without
//! `done`, the job itself is fetched, because it may have finished while we were away.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{Method, header};
use sse_stream::SseByteStream;

use super::client::{Api, RequestError};
use super::events::{
    JobEvent, JobView, MAX_EVENT_BYTES, bounded_events, decode_event, is_terminal,
};
use super::progress::{ProgressView, exit_code, summary_line};
use super::terminal::note;

/// Consecutive attempts that received no event before giving up (about a minute of backoff).
const MAX_FRUITLESS_ATTEMPTS: u32 = 12;
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(250);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(8);

/// Delay before reconnect attempt `attempt` (1-based): doubling from 250 ms, capped at 8 s.
pub(crate) fn retry_delay(attempt: u32) -> Duration {
    let factor = 1u32 << attempt.saturating_sub(1).min(6);
    (FIRST_RETRY_DELAY * factor).min(MAX_RETRY_DELAY)
}

/// Follows the job to its end, then says how it ended on stderr (the summary and its first
/// errors); the exit code is 0 only if it completed (`submit --wait`, `jobs wait`).
pub(crate) async fn wait_and_report(api: &Api, job: &JobView) -> Result<ExitCode, RequestError> {
    let started = Instant::now();
    let done = wait_for_job(api, job).await?;
    note!("{}", summary_line(&done, started.elapsed()));
    for error in done.first_errors.iter().take(5) {
        note!("  - {error}");
    }
    Ok(ExitCode::from(exit_code(&done)))
}

/// Follows the job's events with a progress bar until it finishes; returns the final job.
pub(crate) async fn wait_for_job(api: &Api, job: &JobView) -> Result<JobView, RequestError> {
    let mut view = ProgressView::new(job);
    let outcome = follow(api, &job.id, &mut view).await;
    match &outcome {
        Ok(done) => view.finish(done),
        Err(_) => view.finish(job),
    }
    outcome
}

async fn follow(api: &Api, id: &str, view: &mut ProgressView) -> Result<JobView, RequestError> {
    let mut fruitless = 0;
    loop {
        let mut events_seen = 0;
        let error = match follow_once(api, id, view, &mut events_seen).await {
            Ok(Some(done)) => return Ok(done),
            Ok(None) => None,
            Err(e) if !e.is_retryable() => return Err(e),
            Err(e) => Some(e),
        };
        // The stream ended or broke without `done`: the job may be over already.
        match api.get_json::<JobView>(&["v1", "jobs", id]).await {
            Ok(job) if is_terminal(&job.status) => return Ok(job),
            Ok(_) => {}
            Err(e) if !e.is_retryable() => return Err(e),
            Err(_) => {}
        }
        fruitless = if events_seen > 0 { 1 } else { fruitless + 1 };
        let reason = error.as_ref().map_or_else(
            || "the event stream ended before the job finished".to_owned(),
            RequestError::chain,
        );
        if fruitless > MAX_FRUITLESS_ATTEMPTS {
            return Err(error.unwrap_or(RequestError::Local(format!(
                "gave up following job {id}: {reason}"
            ))));
        }
        let delay = retry_delay(fruitless);
        view.note(&format!("{reason}; reconnecting in {delay:?}"));
        tokio::time::sleep(delay).await;
    }
}

/// One connection to the event stream. `Ok(Some(job))` on `done`, `Ok(None)` when the stream
/// ends without it.
async fn follow_once(
    api: &Api,
    id: &str,
    view: &mut ProgressView,
    events_seen: &mut u64,
) -> Result<Option<JobView>, RequestError> {
    let request = api
        .request(Method::GET, &["v1", "jobs", id, "events"])
        .header(header::ACCEPT, "text/event-stream");
    let response = api.send(request).await?;
    let mut events = SseByteStream::new(bounded_events(response.bytes_stream(), MAX_EVENT_BYTES));
    while let Some(block) = events.next().await {
        match decode_event(&block?) {
            Ok(Some(JobEvent::Progress(p))) => {
                *events_seen += 1;
                view.progress(&p);
            }
            Ok(Some(JobEvent::Record(r))) => {
                *events_seen += 1;
                view.record(&r);
            }
            Ok(Some(JobEvent::Done(job))) => return Ok(Some(*job)),
            Ok(None) => {}
            // One bad event should not stop the progress display.
            Err(e) => view.note(&format!("ignoring {e}")),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delay_doubles_then_caps() {
        assert_eq!(retry_delay(1), Duration::from_millis(250));
        assert_eq!(retry_delay(2), Duration::from_millis(500));
        assert_eq!(retry_delay(4), Duration::from_secs(2));
        assert_eq!(retry_delay(6), Duration::from_secs(8));
        assert_eq!(retry_delay(40), Duration::from_secs(8));
        assert_eq!(retry_delay(0), Duration::from_millis(250));
    }
}
