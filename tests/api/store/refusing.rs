//! The writer's fallback when a batch write fails on something retrying cannot fix: a store
//! that answers like a database refusing a value (a real data error, from a real failing
//! statement), or panics as a bug under the write would, for every write carrying a poisoned
//! result (see [`Spy`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use synthgate::config::WorkersConfig;
use synthgate::domain::{JobStatus, RecordStatus};
use synthgate::queue::Database;
use synthgate::store::{RecordErrorCode, RecordStage};
use synthgate::worker::WorkerPool;
use tokio_util::sync::CancellationToken;

use super::spy::{Poison, Spy};
use super::{create, new_job};
use crate::db::{TestDb, both_backends};

both_backends!(a_refused_batch_is_written_record_by_record);
both_backends!(a_batch_write_that_panics_fails_only_the_records_it_panics_on);
both_backends!(a_record_whose_every_write_panics_is_abandoned_not_rerun_forever);

/// The database refuses every batch holding a poisoned record, for its value. The writer does
/// not retry such a batch as if the database were away (before, it did so for a lease time,
/// then gave up, and the records were re-claimed and refused again, forever): it writes the
/// records one by one, the poisoned ones fail with `unstorable_value` and the rest complete.
async fn a_refused_batch_is_written_record_by_record(db: TestDb) {
    let refusing = Arc::new(Spy::new(&db, Poison::Refuse));
    assert!(refusing.data_error().await.is_data_error());
    let failed = run_poisoned(refusing.clone(), workers(None)).await;
    assert!(refusing.refused_batches.load(Ordering::Relaxed) > 0);
    for (code, stage) in failed {
        assert_eq!(code, RecordErrorCode::UnstorableValue);
        assert_eq!(stage, Some(RecordStage::Store));
    }
}

/// Every batch write holding a poisoned record panics. Before, a panic ended the writer
/// (with one writer, no later batch was written and the job never finished) or, with several,
/// left its records counted in flight with their leases renewed until a restart. The writer
/// catches it and writes the batch one record at a time: the poisoned ones fail with
/// `internal_error`, the rest complete. Run with one writer (SQLite's) and with two.
async fn a_batch_write_that_panics_fails_only_the_records_it_panics_on(db: TestDb) {
    for writers in [1, 2] {
        let panicking = Arc::new(Spy::new(&db, Poison::Panic));
        let failed = run_poisoned(panicking.clone(), workers(Some(writers))).await;
        assert!(panicking.refused_batches.load(Ordering::Relaxed) > 0);
        for (code, stage) in failed {
            assert_eq!(code, RecordErrorCode::InternalError, "writers {writers}");
            assert_eq!(stage, Some(RecordStage::Worker));
        }
    }
}

/// Every write of a poisoned record panics, its failure's too. Given back each time, such a
/// record would be claimed, generated and written again forever; its lease is left to expire
/// instead, and the expiry count (`max_lease_expiries`, 1 here) fails it with
/// `record_abandoned`, while the records written beside it complete.
async fn a_record_whose_every_write_panics_is_abandoned_not_rerun_forever(db: TestDb) {
    let broken = Arc::new(Spy::new(&db, Poison::PanicAlways));
    let cfg = WorkersConfig {
        lease_ttl_sec: 2,
        max_lease_expiries: 1,
        poll_interval_ms: 50,
        ..workers(Some(1))
    };
    let failed = run_poisoned(broken, cfg).await;
    for (code, stage) in failed {
        assert_eq!(code, RecordErrorCode::RecordAbandoned);
        assert_eq!(stage, Some(RecordStage::Worker));
    }
}

/// The pool's settings for these tests: a long write interval, so the writer's batches hold
/// records of both kinds.
fn workers(writers: Option<u32>) -> WorkersConfig {
    WorkersConfig {
        write_interval_ms: 200,
        writers,
        ..WorkersConfig::default()
    }
}

/// Runs a 40-record job whose `y` is poisoned where `x` is `b` through a pool over `spy`, and
/// checks that it completed with every record stored and only poisoned ones failed, without
/// values; returns the failed records' error codes and stages.
async fn run_poisoned(
    spy: Arc<Spy>,
    workers: WorkersConfig,
) -> Vec<(RecordErrorCode, Option<RecordStage>)> {
    let store: Arc<dyn Database> = spy.clone();

    let mut job = new_job(None, 40);
    job.config = json!({"columns": [
        {"name": "x", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["a", "b"]}},
        {"name": "y", "column_type": "expression", "expr": "{{ 'poison' if x == 'b' else x }}"}
    ]});
    job.run_config = json!({"disable_early_shutdown": true});
    let job = create(&*store, &job).await;

    let jobs = super::spy::job_service(store.clone());
    let pool = WorkerPool::new(store.clone(), jobs, workers, "poisoned-writer".to_owned());
    let stop = CancellationToken::new();
    let watch = async {
        let deadline = Instant::now() + Duration::from_secs(30);
        let end = loop {
            let j = store.get_job(job.id, None).await.unwrap().unwrap();
            if j.status.is_terminal() {
                break j;
            }
            assert!(Instant::now() < deadline, "the job never finished: {j:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        stop.cancel();
        end
    };
    let ((), end) = tokio::join!(pool.run(stop.clone(), Duration::from_secs(5)), watch);

    assert_eq!(end.status, JobStatus::Completed);
    let records = store
        .list_records(job.id, None, synthgate::store::RecordSelect::default(), 100)
        .await
        .unwrap();
    assert_eq!(records.len(), 40);
    let mut failed = Vec::new();
    for r in records {
        let values = r.values.clone().unwrap_or_default();
        if r.status == RecordStatus::Failed {
            let e = r.error.expect("error");
            assert_eq!(r.values, None);
            failed.push((e.code, e.stage));
        } else {
            assert_eq!(r.status, RecordStatus::Completed, "{r:?}");
            assert_ne!(values["x"], "b", "{r:?}");
            assert_eq!(values["y"], values["x"]);
        }
    }
    assert!(!failed.is_empty());
    failed
}
