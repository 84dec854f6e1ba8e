//! Claims, leases and fencing.

use std::collections::HashSet;
use std::time::Instant;

use serde_json::json;
use synthgate::domain::{JobStatus, RecordStatus};
use synthgate::store::JobCounts;

use super::{EXPIRED, LONG, claim, completed, counts, create, idx_attempts, job, new_job, trace};
use crate::db::{TestDb, both_backends};

both_backends!(
    claim_order_and_limit,
    no_double_claim_under_concurrency,
    expired_lease_is_reclaimed,
    fencing_ignores_the_old_owner,
    release_returns_records_to_the_queue,
    renew_extends_leases,
);

async fn claim_order_and_limit(db: TestDb) {
    let store = &*db.store;
    assert!(claim(store, "w", 10, LONG).await.is_empty());
    let older = create(store, &new_job(None, 3)).await;
    let newer = create(store, &new_job(None, 5)).await;
    assert!(claim(store, "w", 0, LONG).await.is_empty());

    // Round robin across the jobs, oldest job first, then by index, up to the limit.
    let first = claim(store, "w1", 4, LONG).await;
    let got: Vec<_> = first
        .iter()
        .map(|c| (c.job_id, c.index, c.attempts))
        .collect();
    assert_eq!(
        got,
        [
            (older.id, 0, 1),
            (older.id, 1, 1),
            (newer.id, 0, 1),
            (newer.id, 1, 1)
        ]
    );

    // Both jobs are running, started once.
    let older_now = job(store, older.id).await;
    assert_eq!(older_now.status, JobStatus::Running);
    let started = older_now.started_at.expect("started_at set");
    assert!(started >= older.created_at);
    assert_eq!(job(store, newer.id).await.status, JobStatus::Running);

    // A job with fewer records than its share drops out; the others take the rest.
    let second = claim(store, "w2", 10, LONG).await;
    assert_eq!(idx_attempts(&second), [(2, 1), (2, 1), (3, 1), (4, 1)]);
    assert_eq!(second[0].job_id, older.id);
    assert!(second[1..].iter().all(|c| c.job_id == newer.id));
    assert!(claim(store, "w3", 10, LONG).await.is_empty());
    assert_eq!(job(store, older.id).await.started_at, Some(started));
    assert_eq!(
        counts(store, newer.id).await,
        JobCounts {
            in_progress: 5,
            ..Default::default()
        }
    );

    let rec = store.get_record(first[0].id, None).await.unwrap().unwrap();
    assert_eq!(rec.status, RecordStatus::InProgress);
    assert_eq!(rec.attempts, 1);
}

async fn no_double_claim_under_concurrency(db: TestDb) {
    const RECORDS: u32 = 2_000;
    let job = create(&*db.store, &new_job(None, RECORDS)).await;
    // Half the claimers on a second store: another replica, or for SQLite another process.
    let other = db.open_another().await;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let store = if worker % 2 == 0 {
            db.store.clone()
        } else {
            other.clone()
        };
        tasks.spawn(async move {
            let owner = format!("worker-{worker}");
            let mut mine = Vec::new();
            loop {
                let batch = claim(&*store, &owner, 7, LONG).await;
                if batch.is_empty() {
                    return mine;
                }
                assert!(batch.iter().all(|c| c.attempts == 1));
                mine.extend(batch.into_iter().map(|c| c.id));
            }
        });
    }
    let mut all = Vec::new();
    while let Some(mine) = tasks.join_next().await {
        all.extend(mine.expect("claimer task"));
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{:?}: 8 claimers took {RECORDS} records in batches of 7 in {elapsed:?} ({:.0} records/s)",
        db.backend,
        f64::from(RECORDS) / elapsed.as_secs_f64()
    );

    assert_eq!(all.len(), RECORDS as usize);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), RECORDS as usize);
    assert_eq!(
        counts(&*db.store, job.id).await,
        JobCounts {
            in_progress: u64::from(RECORDS),
            ..Default::default()
        }
    );
    other.close().await;
}

async fn expired_lease_is_reclaimed(db: TestDb) {
    let store = &*db.store;
    let job = create(store, &new_job(None, 3)).await;
    // Record 0 is held by a live worker; record 1 by a dead one (lease expired).
    let live = claim(store, "live", 1, LONG).await;
    assert_eq!(idx_attempts(&live), [(0, 1)]);
    let dead = claim(store, "dead", 1, EXPIRED).await;
    assert_eq!(idx_attempts(&dead), [(1, 1)]);

    // The expired record comes back first, on its second attempt; then pending work.
    let taken = claim(store, "new", 5, LONG).await;
    assert_eq!(idx_attempts(&taken), [(1, 2), (2, 1)]);
    assert_eq!(taken[0].id, dead[0].id);
    assert!(claim(store, "other", 5, LONG).await.is_empty());
    let rec = store.get_record(dead[0].id, None).await.unwrap().unwrap();
    assert_eq!((rec.status, rec.attempts), (RecordStatus::InProgress, 2));
    assert_eq!(counts(store, job.id).await.in_progress, 3);
}

async fn fencing_ignores_the_old_owner(db: TestDb) {
    let store = &*db.store;
    create(store, &new_job(None, 1)).await;
    let old = claim(store, "old", 1, EXPIRED).await;
    let id = old[0].id;
    let new = claim(store, "new", 1, LONG).await;
    assert_eq!(idx_attempts(&new), [(0, 2)]);

    // The old worker finishes late: its write is ignored, traces included.
    let mut late = completed(id, json!({"x": "old"}));
    late.traces = vec![trace("summary", "old")];
    assert!(
        store
            .complete_records("old", &[late])
            .await
            .unwrap()
            .is_empty()
    );
    let rec = store.get_record(id, None).await.unwrap().unwrap();
    assert_eq!((rec.status, rec.values), (RecordStatus::InProgress, None));
    assert!(store.get_traces(id, None).await.unwrap().is_empty());
    // Nor can it release or renew what it no longer holds.
    assert_eq!(store.release_records("old", &[id]).await.unwrap(), 0);
    assert_eq!(store.renew_leases("old", &[id], LONG).await.unwrap(), 0);

    let mut current = completed(id, json!({"x": "new"}));
    current.traces = vec![trace("summary", "new")];
    assert_eq!(
        store.complete_records("new", &[current]).await.unwrap(),
        [id]
    );
    let rec = store.get_record(id, None).await.unwrap().unwrap();
    assert_eq!(rec.status, RecordStatus::Completed);
    assert_eq!(rec.values, Some(json!({"x": "new"})));
    assert_eq!(rec.attempts, 2);
    let traces = store.get_traces(id, None).await.unwrap();
    assert_eq!(traces.len(), 1);
    assert_eq!(
        traces[0].messages,
        json!([{"role": "user", "content": "new"}])
    );

    // A finished record is never written again, even by its last owner.
    let again = completed(id, json!({"x": "again"}));
    assert!(
        store
            .complete_records("new", &[again])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(claim(store, "any", 1, EXPIRED).await.is_empty());
}

async fn release_returns_records_to_the_queue(db: TestDb) {
    let store = &*db.store;
    let job = create(store, &new_job(None, 3)).await;
    let held = claim(store, "a", 2, LONG).await;
    let ids: Vec<_> = held.iter().map(|c| c.id).collect();
    assert_eq!(store.release_records("b", &ids).await.unwrap(), 0);
    assert_eq!(store.release_records("a", &[]).await.unwrap(), 0);
    assert_eq!(store.release_records("a", &ids).await.unwrap(), 2);
    assert_eq!(
        counts(store, job.id).await,
        JobCounts {
            pending: 3,
            ..Default::default()
        }
    );
    // Back in order; a release still counts as an attempt.
    let again = claim(store, "c", 3, LONG).await;
    assert_eq!(idx_attempts(&again), [(0, 2), (1, 2), (2, 1)]);
}

async fn renew_extends_leases(db: TestDb) {
    let store = &*db.store;
    create(store, &new_job(None, 3)).await;
    // `b` first: a claim takes expired leases before pending records.
    claim(store, "b", 1, LONG).await;
    let held: Vec<_> = claim(store, "a", 2, EXPIRED)
        .await
        .iter()
        .map(|c| c.id)
        .collect();
    // Renewed before anyone took them over: nobody can claim them now.
    assert_eq!(store.renew_leases("a", &held, LONG).await.unwrap(), 2);
    assert!(claim(store, "c", 5, LONG).await.is_empty());
    assert_eq!(store.renew_leases("nobody", &held, LONG).await.unwrap(), 0);
    assert_eq!(store.renew_leases("a", &[], LONG).await.unwrap(), 0);
    // Shortened to nothing, they are claimable again; except the one `a` renews again: only
    // the records named are renewed, so a lease its owner stopped renewing lapses.
    assert_eq!(store.renew_leases("a", &held, EXPIRED).await.unwrap(), 2);
    assert_eq!(store.renew_leases("a", &held[..1], LONG).await.unwrap(), 1);
    assert_eq!(idx_attempts(&claim(store, "c", 5, LONG).await), [(2, 2)]);
}
