//! Job lifecycle: cancel, finalize, fail.

use serde_json::json;
use synthgate::domain::{JobId, JobStatus};
use synthgate::queue::{CancelOutcome, Database};
use synthgate::store::{JobCounts, JobError, JobRow};

use super::{EXPIRED, LONG, claim, completed, counts, create, failed, job, new_job};

/// Cancels `id`, expecting the cancel to be accepted.
async fn accepted(store: &dyn Database, id: JobId) -> JobRow {
    match store.request_cancel(id).await.expect("request_cancel") {
        CancelOutcome::Accepted(job) => job,
        other => panic!("expected the cancel to be accepted, got {other:?}"),
    }
}
use crate::db::{TestDb, both_backends};

both_backends!(
    cancel_keeps_in_flight_records,
    cancel_of_a_finished_or_missing_job,
    finalize_completes_once,
    finalize_races_between_replicas,
    finalize_cancels_abandoned_records,
    fail_job_stops_the_job,
    workers_race_a_cancel,
    cancel_after_every_record_finished,
    cancel_with_every_record_in_flight,
    cancel_races_the_last_write,
    claims_racing_a_cancel_leave_no_chunk_behind,
);

async fn cancel_keeps_in_flight_records(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 5)).await;
    let held = claim(store, "w", 2, LONG).await;

    let after = accepted(store, j.id).await;
    assert_eq!(after.status, JobStatus::Cancelling);
    assert_eq!(after.finished_at, None);
    assert_eq!(
        counts(store, j.id).await,
        JobCounts {
            in_progress: 2,
            cancelled: 3,
            ..Default::default()
        }
    );
    // No new work from a cancelling job; a second cancel changes nothing.
    assert!(claim(store, "w2", 10, LONG).await.is_empty());
    let again = accepted(store, j.id).await;
    assert_eq!(again, after);

    // In-flight records finish normally; the job is cancelled once the last one has.
    let one = [completed(&held[0], json!({"x": 0}))];
    assert_eq!(
        store.complete_records("w", &one).await.unwrap(),
        [held[0].id]
    );
    assert!(store.finalize_jobs(&[j.id]).await.unwrap().is_empty());
    let two = [failed(&held[1], "boom")];
    assert_eq!(
        store.complete_records("w", &two).await.unwrap(),
        [held[1].id]
    );
    assert_eq!(store.finalize_jobs(&[j.id]).await.unwrap(), [j.id]);

    let done = job(store, j.id).await;
    assert_eq!(done.status, JobStatus::Cancelled);
    assert!(done.finished_at.is_some());
    assert_eq!(
        counts(store, j.id).await,
        JobCounts {
            completed: 1,
            failed: 1,
            cancelled: 3,
            ..Default::default()
        }
    );
}

async fn cancel_of_a_finished_or_missing_job(db: TestDb) {
    let store = &*db.store;
    assert_eq!(
        store.request_cancel(JobId::new()).await.unwrap(),
        CancelOutcome::NotFound
    );

    let j = create(store, &new_job(None, 1)).await;
    let c = claim(store, "w", 1, LONG).await;
    store
        .complete_records("w", &[completed(&c[0], json!({}))])
        .await
        .unwrap();
    assert_eq!(store.finalize_jobs(&[j.id]).await.unwrap(), [j.id]);
    let finished = job(store, j.id).await;
    assert_eq!(
        store.request_cancel(j.id).await.unwrap(),
        CancelOutcome::Finished(finished)
    );

    // A queued job with nothing in flight is cancelled by the cancel itself; a second cancel
    // finds it finished.
    let q = create(store, &new_job(None, 2)).await;
    let cancelled = accepted(store, q.id).await;
    assert_eq!(cancelled.status, JobStatus::Cancelled);
    assert!(cancelled.finished_at.is_some());
    assert!(store.finalize_jobs(&[q.id]).await.unwrap().is_empty());
    assert_eq!(counts(store, q.id).await.cancelled, 2);
    assert_eq!(
        store.request_cancel(q.id).await.unwrap(),
        CancelOutcome::Finished(cancelled)
    );
}

async fn finalize_completes_once(db: TestDb) {
    let store = &*db.store;
    assert!(store.finalize_jobs(&[]).await.unwrap().is_empty());
    let a = create(store, &new_job(None, 2)).await;
    let b = create(store, &new_job(None, 1)).await;
    assert!(store.finalize_jobs(&[a.id, b.id]).await.unwrap().is_empty());

    let held = claim(store, "w", 3, LONG).await;
    let results = [
        completed(&held[0], json!({"x": 0})),
        failed(&held[1], "bad_output"),
    ];
    store.complete_records("w", &results).await.unwrap();
    // `a` is done (one record failed, still completed); `b` still has a record in flight.
    let done = store.finalize_jobs(&[a.id, b.id, a.id]).await.unwrap();
    assert_eq!(done, [a.id]);
    let a_now = job(store, a.id).await;
    assert_eq!(a_now.status, JobStatus::Completed);
    let finished = a_now.finished_at.expect("finished_at set");
    assert!(finished >= a_now.started_at.unwrap());
    assert_eq!(a_now.error, None);
    assert_eq!(
        counts(store, a.id).await,
        JobCounts {
            completed: 1,
            failed: 1,
            ..Default::default()
        }
    );

    // Idempotent: nothing changes the second time.
    assert!(store.finalize_jobs(&[a.id]).await.unwrap().is_empty());
    assert_eq!(job(store, a.id).await, a_now);
    assert_eq!(job(store, b.id).await.status, JobStatus::Running);
}

async fn finalize_races_between_replicas(db: TestDb) {
    let other = db.open_another().await;
    let mut ids = Vec::new();
    for _ in 0..10 {
        let j = create(&*db.store, &new_job(None, 1)).await;
        let c = claim(&*db.store, "w", 1, LONG).await;
        db.store
            .complete_records("w", &[completed(&c[0], json!({}))])
            .await
            .unwrap();
        ids.push(j.id);
    }
    // Both replicas finalize every job at once: each job is reported by exactly one of them.
    let (mine, theirs) = tokio::join!(db.store.finalize_jobs(&ids), other.finalize_jobs(&ids));
    let mut all = mine.unwrap();
    all.extend(theirs.unwrap());
    all.sort();
    assert_eq!(all, ids);
    for id in ids {
        assert_eq!(job(&*db.store, id).await.status, JobStatus::Completed);
    }
    other.close().await;
}

async fn finalize_cancels_abandoned_records(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 3)).await;
    // Live first: a claim takes expired leases before pending records.
    let live = claim(store, "live", 1, LONG).await;
    let dead = claim(store, "dead", 1, EXPIRED).await;
    store.request_cancel(j.id).await.unwrap();

    // The dead worker's chunk will never finish: it is dropped, and its record counts as
    // cancelled (it has no row). The live one is kept.
    assert!(store.finalize_jobs(&[j.id]).await.unwrap().is_empty());
    assert_eq!(store.get_record(dead[0].id, None).await.unwrap(), None);
    assert_eq!(
        counts(store, j.id).await,
        JobCounts {
            in_progress: 1,
            cancelled: 2,
            ..Default::default()
        }
    );
    let late = [completed(&dead[0], json!({}))];
    assert!(
        store
            .complete_records("dead", &late)
            .await
            .unwrap()
            .is_empty()
    );

    let ok = [completed(&live[0], json!({}))];
    assert_eq!(
        store.complete_records("live", &ok).await.unwrap(),
        [live[0].id]
    );
    assert_eq!(store.finalize_jobs(&[j.id]).await.unwrap(), [j.id]);
    assert_eq!(job(store, j.id).await.status, JobStatus::Cancelled);
}

async fn fail_job_stops_the_job(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 4)).await;
    let held = claim(store, "w", 1, LONG).await;
    let error = JobError {
        code: "error_rate_exceeded".to_owned(),
        message: "3 of 4 records failed".to_owned(),
    };
    assert!(
        store.fail_job(j.id, &error).await.unwrap(),
        "failed by this call"
    );

    let failed_job = job(store, j.id).await;
    assert_eq!(failed_job.status, JobStatus::Failed);
    assert_eq!(failed_job.error, Some(error.clone()));
    assert!(failed_job.finished_at.is_some());
    assert_eq!(
        counts(store, j.id).await,
        JobCounts {
            in_progress: 1,
            cancelled: 3,
            ..Default::default()
        }
    );
    // Nothing more is claimed; the in-flight record may still land; the job stays failed.
    assert!(claim(store, "w2", 10, LONG).await.is_empty());
    let last = [completed(&held[0], json!({}))];
    assert_eq!(
        store.complete_records("w", &last).await.unwrap(),
        [held[0].id]
    );
    assert!(store.finalize_jobs(&[j.id]).await.unwrap().is_empty());
    assert_eq!(
        store.request_cancel(j.id).await.unwrap(),
        CancelOutcome::Finished(failed_job.clone())
    );

    // Failing a finished job changes nothing.
    let other = JobError {
        code: "other".to_owned(),
        message: "late".to_owned(),
    };
    assert!(
        !store.fail_job(j.id, &other).await.unwrap(),
        "nothing to fail"
    );
    assert_eq!(job(store, j.id).await, failed_job);
}

/// Workers on two stores claim, complete and finalize while a cancel lands mid-way: no errors
/// (no deadlock between claims, completions, cancel and finalize), nothing left in flight, and
/// every record either completed or cancelled.
async fn workers_race_a_cancel(db: TestDb) {
    const RECORDS: u32 = 600;
    let j = create(&*db.store, &new_job(None, RECORDS)).await;
    let other = db.open_another().await;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..6 {
        let store = if worker % 2 == 0 {
            db.store.clone()
        } else {
            other.clone()
        };
        tasks.spawn(async move {
            let owner = format!("worker-{worker}");
            let mut finalized = Vec::new();
            loop {
                let batch = claim(&*store, &owner, 5, LONG).await;
                if batch.is_empty() {
                    finalized.extend(store.finalize_jobs(&[j.id]).await.expect("finalize"));
                    return finalized;
                }
                let results: Vec<_> = batch
                    .iter()
                    .map(|c| completed(c, json!({"i": c.index})))
                    .collect();
                let written = store
                    .complete_records(&owner, &results)
                    .await
                    .expect("complete");
                assert_eq!(written.len(), batch.len());
                finalized.extend(store.finalize_jobs(&[j.id]).await.expect("finalize"));
            }
        });
    }
    // Cancel once some work is done; yield (not sleep) between looks.
    while counts(&*db.store, j.id).await.completed < 100 {
        tokio::task::yield_now().await;
    }
    let cancel = db.store.request_cancel(j.id).await.unwrap();
    let mut reported = Vec::new();
    while let Some(done) = tasks.join_next().await {
        reported.extend(done.expect("worker"));
    }
    reported.extend(db.store.finalize_jobs(&[j.id]).await.unwrap());

    let end = job(&*db.store, j.id).await;
    let c = counts(&*db.store, j.id).await;
    assert_eq!((c.pending, c.in_progress, c.failed), (0, 0, 0));
    assert_eq!(c.completed + c.cancelled, u64::from(RECORDS));
    assert!(c.completed >= 100);
    // `cancelled` exactly when a record was cancelled; a cancel that stopped nothing leaves the
    // job `completed`, and is told so when it came after the last record.
    let want = if c.cancelled > 0 {
        JobStatus::Cancelled
    } else {
        JobStatus::Completed
    };
    assert_eq!(end.status, want, "{c:?}");
    match &cancel {
        CancelOutcome::Accepted(at) => {
            assert!(matches!(
                at.status,
                JobStatus::Cancelling | JobStatus::Cancelled
            ));
        }
        CancelOutcome::Finished(at) => {
            assert_eq!(at.status, JobStatus::Completed);
            assert_eq!(c.cancelled, 0);
        }
        CancelOutcome::NotFound => panic!("the job exists"),
    }
    // Reported finished at most once, by whichever caller got there first; by none only when
    // the cancel itself finalized the job.
    assert!(
        reported.len() <= 1 && reported.iter().all(|r| *r == j.id),
        "{reported:?}"
    );
    if reported.is_empty() {
        assert!(
            matches!(&cancel, CancelOutcome::Accepted(at) | CancelOutcome::Finished(at)
                if at.status.is_terminal()),
            "{cancel:?}"
        );
    }
    eprintln!(
        "{:?}: cancel landed after {} of {RECORDS} records",
        db.backend, c.completed
    );
    other.close().await;
}

/// Every record was written but the job not finalized yet (the writer's next step) when the
/// cancel came: the job has finished, so the cancel is refused and the job ends `completed`.
async fn cancel_after_every_record_finished(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 2)).await;
    let held = claim(store, "w", 2, LONG).await;
    let results = [
        completed(&held[0], json!({"x": 0})),
        failed(&held[1], "boom"),
    ];
    assert_eq!(
        store.complete_records("w", &results).await.unwrap().len(),
        2
    );

    let CancelOutcome::Finished(at) = store.request_cancel(j.id).await.unwrap() else {
        panic!("a job whose records all finished cannot be cancelled");
    };
    assert_eq!(at.status, JobStatus::Completed);
    assert!(at.finished_at.is_some());
    assert_eq!(job(store, j.id).await, at);
    // Already finalized: the writer's finalize has nothing left to report.
    assert!(store.finalize_jobs(&[j.id]).await.unwrap().is_empty());
    assert_eq!(
        counts(store, j.id).await,
        JobCounts {
            completed: 1,
            failed: 1,
            ..Default::default()
        }
    );
}

/// A cancel that comes when every record is in flight stops nothing: the records finish and
/// the job ends `completed`, not `cancelled` with every record completed.
async fn cancel_with_every_record_in_flight(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 2)).await;
    let held = claim(store, "w", 2, LONG).await;
    assert_eq!(accepted(store, j.id).await.status, JobStatus::Cancelling);
    let results = [
        completed(&held[0], json!({"x": 0})),
        completed(&held[1], json!({"x": 1})),
    ];
    assert_eq!(
        store.complete_records("w", &results).await.unwrap().len(),
        2
    );
    assert_eq!(store.finalize_jobs(&[j.id]).await.unwrap(), [j.id]);
    assert_eq!(job(store, j.id).await.status, JobStatus::Completed);
}

/// The last record's write (and its finalize) races a cancel from another replica, many times:
/// whichever wins, a one-record job that nothing could stop ends `completed`, and a cancel
/// answered after the write says the job finished.
async fn cancel_races_the_last_write(db: TestDb) {
    let other = db.open_another().await;
    for round in 0..40 {
        let j = create(&*db.store, &new_job(None, 1)).await;
        let held = claim(&*db.store, "w", 1, LONG).await;
        assert_eq!(held[0].job_id, j.id);
        let write = async {
            let one = [completed(&held[0], json!({"round": round}))];
            db.store.complete_records("w", &one).await.unwrap();
            db.store.finalize_jobs(&[j.id]).await.unwrap()
        };
        let (reported, cancel) = tokio::join!(write, other.request_cancel(j.id));
        let reported_again = db.store.finalize_jobs(&[j.id]).await.unwrap();
        let end = job(&*db.store, j.id).await;
        assert_eq!(
            end.status,
            JobStatus::Completed,
            "round {round}: {cancel:?}"
        );
        match cancel.unwrap() {
            CancelOutcome::Accepted(at) => assert_eq!(at.status, JobStatus::Cancelling),
            CancelOutcome::Finished(at) => assert_eq!(at.status, JobStatus::Completed),
            CancelOutcome::NotFound => panic!("the job exists"),
        }
        // Nobody reports it twice (the cancel may have finalized it itself).
        assert!(reported.len() + reported_again.len() <= 1);
    }
    other.close().await;
}

/// Claimers that give every chunk back at once race a cancel, round after round, so a cancel
/// often finds nothing leased and ends the job at once while a claim is carving. A carve must
/// either come before the cancel (and hold the job `cancelling` until its chunk is dropped) or
/// see the cancel and carve nothing: a chunk carved off a job that has already ended would
/// never be claimed or dropped again, and would show here as a chunk left behind.
async fn claims_racing_a_cancel_leave_no_chunk_behind(db: TestDb) {
    const ROUNDS: usize = 12;
    const RECORDS: u32 = 300;
    let other = db.open_another().await;
    for round in 0..ROUNDS {
        let j = create(&*db.store, &new_job(None, RECORDS)).await;
        let cancelled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut tasks = tokio::task::JoinSet::new();
        for worker in 0..4 {
            let store = if worker % 2 == 0 {
                db.store.clone()
            } else {
                other.clone()
            };
            let cancelled = cancelled.clone();
            tasks.spawn(async move {
                let owner = format!("worker-{worker}");
                loop {
                    let seen = cancelled.load(std::sync::atomic::Ordering::SeqCst);
                    let batch = claim(&*store, &owner, 3, LONG).await;
                    if batch.is_empty() {
                        return;
                    }
                    assert!(
                        !seen,
                        "a claim begun after the cancel returned took records"
                    );
                    let mut chunks: Vec<_> = batch.iter().map(|c| c.chunk).collect();
                    chunks.dedup();
                    store
                        .release_chunks(&owner, &chunks)
                        .await
                        .expect("release");
                }
            });
        }
        // Let the claimers start, by a different number of yields each round.
        for _ in 0..round * 3 {
            tokio::task::yield_now().await;
        }
        db.store.request_cancel(j.id).await.expect("cancel");
        cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
        while let Some(done) = tasks.join_next().await {
            done.expect("claimer");
        }
        db.store.finalize_jobs(&[j.id]).await.expect("finalize");
        let end = job(&*db.store, j.id).await;
        assert_eq!(end.status, JobStatus::Cancelled, "round {round}");
        let c = counts(&*db.store, j.id).await;
        assert_eq!(
            (c.pending, c.in_progress, c.completed, c.cancelled),
            (0, 0, 0, u64::from(RECORDS)),
            "round {round}"
        );
    }
    assert_eq!(
        db.count("select count(*) from chunks").await,
        0,
        "chunks left behind by jobs that ended"
    );
}
