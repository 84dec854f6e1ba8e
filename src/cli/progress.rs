//! How a job's progress is shown: bar position and message from the counts, the closing
//! summary line, and the exit code of a finished job. The arithmetic is pure; [`ProgressView`]
//! is the thin indicatif wrapper around it.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::events::{Counts, JobView, ProgressEvent, RecordEvent};
use super::terminal::note;

/// Failed records printed one by one before the rest are only counted.
const MAX_PRINTED_FAILURES: u64 = 5;

/// `(position, length)` of the bar: finished records out of the total. The length never falls
/// below the position, so a count that runs ahead of `total` cannot overflow the bar.
pub(crate) fn bar_position(counts: &Counts) -> (u64, u64) {
    let done = counts.finished();
    (done, counts.total.max(done))
}

/// The text beside the bar: the job status and, once there are any, the failures.
pub(crate) fn bar_message(status: &str, counts: &Counts) -> String {
    match counts.failed {
        0 => status.to_owned(),
        n => format!("{status}, {n} failed"),
    }
}

/// One line that closes `submit --wait`.
pub(crate) fn summary_line(job: &JobView, elapsed: Duration) -> String {
    let c = &job.counts;
    let mut line = format!(
        "job {} {} in {:.1}s: {} completed, {} failed, {} cancelled of {}",
        job.id,
        job.status,
        elapsed.as_secs_f64(),
        c.completed,
        c.failed,
        c.cancelled,
        c.total,
    );
    if let Some(error) = &job.error {
        line.push_str(&format!(" ({}: {})", error.code, error.message));
    }
    line
}

/// `0` when the job completed with at least one record (or had none to make), `1` for any
/// other final status, and for a completed job whose every record failed: a script that
/// waits on the job has no data to go on (a server that answers every request with an error
/// still lets the job finish "completed").
pub(crate) fn exit_code(job: &JobView) -> u8 {
    let all_failed = job.counts.completed == 0 && job.counts.failed > 0;
    if job.status == "completed" && !all_failed {
        0
    } else {
        1
    }
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub(crate) struct ProgressView {
    bar: ProgressBar,
    failures_seen: u64,
}

impl ProgressView {
    /// A bar sized from the job as the server accepted it.
    pub(crate) fn new(job: &JobView) -> Self {
        let total = job.counts.total.max(job.num_records.unwrap_or(0));
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} ({eta}) {msg}",
        ) {
            bar.set_style(style);
        }
        bar.set_message(super::terminal::safe(&job.status).into_owned());
        bar.enable_steady_tick(Duration::from_millis(200));
        Self {
            bar,
            failures_seen: 0,
        }
    }

    /// Moves the bar to the counts of a `progress` event.
    pub(crate) fn progress(&self, event: &ProgressEvent) {
        let (position, length) = bar_position(&event.counts);
        self.bar.set_length(length);
        self.bar.set_position(position);
        self.bar.set_message(
            super::terminal::safe(&bar_message(&event.status, &event.counts)).into_owned(),
        );
    }

    /// Prints the first few failed records above the bar.
    pub(crate) fn record(&mut self, event: &RecordEvent) {
        if event.status != "failed" {
            return;
        }
        self.failures_seen += 1;
        if self.failures_seen <= MAX_PRINTED_FAILURES {
            let code = event.error_code.as_deref().unwrap_or("unknown_error");
            self.note(&format!(
                "record {} ({}) failed: {code}",
                event.index, event.record_id
            ));
        }
        if self.failures_seen == MAX_PRINTED_FAILURES {
            self.note("further failed records are counted, not listed");
        }
    }

    /// A line of text above the bar (or on stderr when the bar is hidden).
    pub(crate) fn note(&self, text: &str) {
        if self.bar.is_hidden() {
            note!("{text}");
        } else {
            self.bar.println(super::terminal::safe(text));
        }
    }

    /// Shows the final counts and removes the bar.
    pub(crate) fn finish(&self, job: &JobView) {
        let (position, length) = bar_position(&job.counts);
        self.bar.set_length(length);
        self.bar.set_position(position);
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::events::ErrorInfo;

    fn counts(total: u64, completed: u64, failed: u64, cancelled: u64) -> Counts {
        Counts {
            total,
            completed,
            failed,
            cancelled,
            pending: total.saturating_sub(completed + failed + cancelled),
            in_progress: 0,
        }
    }

    fn job(status: &str, c: Counts) -> JobView {
        JobView {
            id: "j1".into(),
            status: status.into(),
            name: None,
            created_at: String::new(),
            num_records: Some(c.total),
            counts: c,
            error: None,
            first_errors: Vec::new(),
        }
    }

    #[test]
    fn position_counts_every_final_record() {
        assert_eq!(bar_position(&counts(10, 3, 2, 1)), (6, 10));
        assert_eq!(bar_position(&counts(0, 0, 0, 0)), (0, 0));
        // Never past the end, even if the counts disagree.
        assert_eq!(bar_position(&counts(2, 3, 0, 0)), (3, 3));
    }

    #[test]
    fn message_shows_failures_once_there_are_any() {
        assert_eq!(bar_message("running", &counts(10, 3, 0, 0)), "running");
        assert_eq!(
            bar_message("running", &counts(10, 3, 2, 0)),
            "running, 2 failed"
        );
    }

    #[test]
    fn summary_names_the_job_counts_and_error() {
        let done = job("completed", counts(100, 98, 2, 0));
        assert_eq!(
            summary_line(&done, Duration::from_millis(12_340)),
            "job j1 completed in 12.3s: 98 completed, 2 failed, 0 cancelled of 100"
        );
        let mut failed = job("failed", counts(10, 1, 5, 4));
        failed.error = Some(ErrorInfo {
            code: "error_rate_exceeded".into(),
            message: "5 of 6 records failed".into(),
        });
        assert!(
            summary_line(&failed, Duration::ZERO)
                .ends_with("(error_rate_exceeded: 5 of 6 records failed)")
        );
    }

    #[test]
    fn only_completed_jobs_exit_zero() {
        assert_eq!(exit_code(&job("completed", counts(1, 1, 0, 0))), 0);
        // A completed job with failed records still completed.
        assert_eq!(exit_code(&job("completed", counts(2, 1, 1, 0))), 0);
        assert_eq!(exit_code(&job("failed", counts(1, 0, 1, 0))), 1);
        assert_eq!(exit_code(&job("cancelled", counts(1, 0, 0, 1))), 1);
        // Completed, with every record failed: nothing to go on.
        assert_eq!(exit_code(&job("completed", counts(3, 0, 3, 0))), 1);
    }
}
