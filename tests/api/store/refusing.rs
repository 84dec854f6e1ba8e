//! The writer's fallback when the database refuses a value that the checks before the write
//! did not foresee: a store that answers like a database refusing a value (a real data error,
//! from a real failing statement) for every write carrying a poisoned result (see [`Spy`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use synthgate::config::WorkersConfig;
use synthgate::domain::{JobStatus, RecordStatus};
use synthgate::store::Store;
use synthgate::worker::WorkerPool;
use tokio_util::sync::CancellationToken;

use super::spy::Spy;
use super::{create, new_job};
use crate::db::{TestDb, both_backends};

both_backends!(a_refused_batch_is_written_record_by_record);

/// The database refuses every batch holding a poisoned record, for its value. The writer does
/// not retry such a batch as if the database were away (before, it did so for a lease time,
/// then gave up, and the records were re-claimed and refused again, forever): it writes the
/// records one by one, the poisoned ones fail with `unstorable_value` and the rest complete.
async fn a_refused_batch_is_written_record_by_record(db: TestDb) {
    let refusing = Arc::new(Spy::new(&db, true));
    assert!(refusing.data_error().await.is_data_error());
    let store: Arc<dyn Store> = refusing.clone();

    let mut job = new_job(None, 40);
    job.config = json!({"columns": [
        {"name": "x", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["a", "b"]}},
        {"name": "y", "column_type": "expression", "expr": "{{ 'poison' if x == 'b' else x }}"}
    ]});
    job.run_config = json!({"disable_early_shutdown": true});
    let job = create(&*store, &job).await;

    let jobs = super::spy::job_service(store.clone());
    // A long write interval, so the writer's batches hold records of both kinds.
    let workers = WorkersConfig {
        write_interval_ms: 200,
        ..WorkersConfig::default()
    };
    let pool = WorkerPool::new(store.clone(), jobs, workers, "refused-writer".to_owned());
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
    assert!(refusing.refused_batches.load(Ordering::Relaxed) > 0);
    let records = store.list_records(job.id, None, None, 100).await.unwrap();
    assert_eq!(records.len(), 40);
    let mut failed = 0;
    for r in records {
        let values = r.values.clone().unwrap_or_default();
        if r.status == RecordStatus::Failed {
            failed += 1;
            let e = r.error.expect("error");
            assert_eq!(e.code, "unstorable_value", "{e:?}");
            assert_eq!(e.stage, Some(synthgate::store::RecordStage::Store));
            assert_eq!(r.values, None);
        } else {
            assert_eq!(r.status, RecordStatus::Completed, "{r:?}");
            assert_ne!(values["x"], "b", "{r:?}");
            assert_eq!(values["y"], values["x"]);
        }
    }
    assert!(failed > 0);
}
