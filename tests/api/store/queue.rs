//! Chunk claims, leases and fencing.

use std::collections::HashSet;
use std::time::Instant;

use serde_json::json;
use synthgate::domain::JobStatus;
use synthgate::queue::ChunkKey;
use synthgate::store::JobCounts;

use super::{EXPIRED, LONG, claim, completed, counts, create, idx_attempts, job, new_job, trace};
use crate::db::{Backend, TestDb, both_backends};

both_backends!(
    claim_order_and_limit,
    no_double_claim_under_concurrency,
    expired_lease_is_reclaimed,
    takeover_cuts_a_chunk_and_skips_written_records,
    fencing_ignores_the_old_owner,
    release_returns_chunks_to_the_queue,
    renew_extends_leases,
    a_job_inserted_by_an_earlier_build_is_claimed,
);

async fn claim_order_and_limit(db: TestDb) {
    let store = &*db.store;
    assert!(claim(store, "w", 10, LONG).await.is_empty());
    let older = create(store, &new_job(None, 3)).await;
    let newer = create(store, &new_job(None, 5)).await;
    assert!(claim(store, "w", 0, LONG).await.is_empty());

    // Round robin across the jobs, oldest job first, then by index, up to the limit: one
    // chunk per job.
    let first = claim(store, "w1", 4, LONG).await;
    let got: Vec<_> = first
        .iter()
        .map(|c| (c.job_id, c.index, c.attempts, c.chunk.start, c.chunk_todo))
        .collect();
    assert_eq!(
        got,
        [
            (older.id, 0, 1, 0, 2),
            (older.id, 1, 1, 0, 2),
            (newer.id, 0, 1, 0, 2),
            (newer.id, 1, 1, 0, 2)
        ]
    );
    assert_eq!(
        first.iter().map(|c| c.id).collect::<HashSet<_>>().len(),
        4,
        "each record gets its own id"
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

    // A record in progress has no row yet: it becomes one with its result.
    assert_eq!(store.get_record(first[0].id, None).await.unwrap(), None);
    assert!(
        store
            .list_records(
                older.id,
                None,
                synthgate::store::RecordSelect::default(),
                10
            )
            .await
            .unwrap()
            .is_empty()
    );
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
                mine.extend(batch.into_iter().map(|c| c.index));
            }
        });
    }
    let mut all = Vec::new();
    while let Some(mine) = tasks.join_next().await {
        all.extend(mine.expect("claimer task"));
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{:?}: 8 claimers took {RECORDS} records in chunks of 7 in {elapsed:?} ({:.0} records/s)",
        db.backend,
        f64::from(RECORDS) / elapsed.as_secs_f64()
    );

    // Every index exactly once.
    all.sort_unstable();
    assert_eq!(all, (0..RECORDS).collect::<Vec<_>>());
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

    // The expired chunk comes back first, on its second attempt; then a new chunk.
    let taken = claim(store, "new", 5, LONG).await;
    assert_eq!(idx_attempts(&taken), [(1, 2), (2, 1)]);
    assert_eq!(taken[0].chunk, dead[0].chunk);
    assert_eq!(taken[0].lease_expiries, 1);
    assert_ne!(taken[0].id, dead[0].id, "a new attempt, a new id");
    assert!(claim(store, "other", 5, LONG).await.is_empty());
    assert_eq!(counts(store, job.id).await.in_progress, 3);
}

async fn takeover_cuts_a_chunk_and_skips_written_records(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 10)).await;
    let dead = claim(store, "dead", 10, EXPIRED).await;
    assert_eq!(dead.len(), 10);
    // The dead worker wrote 1 and 4 before its lease lapsed (on SQLite and Postgres alike a
    // write checks only the owner: a lapsed lease not yet taken over still writes).
    let early = [
        completed(&dead[1], json!({})),
        completed(&dead[4], json!({})),
    ];
    assert_eq!(
        store.complete_records("dead", &early).await.unwrap().len(),
        2
    );

    // A claim with room for 3 runs 0, 2, 3: the chunk is cut after 3, the rest given back.
    let a = claim(store, "a", 3, LONG).await;
    assert_eq!(idx_attempts(&a), [(0, 2), (2, 2), (3, 2)]);
    assert!(a.iter().all(|c| c.chunk_todo == 3 && c.chunk.start == 0));
    // The rest, without 4: its own chunk, claimable at once, not counted as an expiry.
    let b = claim(store, "b", 100, LONG).await;
    assert_eq!(
        b.iter().map(|c| c.index).collect::<Vec<_>>(),
        [5, 6, 7, 8, 9]
    );
    assert!(b.iter().all(|c| c.chunk
        == ChunkKey {
            job_id: j.id,
            start: 4
        }
        && c.lease_expiries == 1
        && c.attempts == 2));
    let c = counts(store, j.id).await;
    assert_eq!((c.completed, c.in_progress, c.pending), (2, 8, 0));

    // Both chunks written: gone, and the job finishes.
    let all: Vec<_> = a
        .iter()
        .chain(&b)
        .map(|c| completed(c, json!({})))
        .collect();
    assert_eq!(
        store.complete_records("a", &all[..3]).await.unwrap().len(),
        3
    );
    assert_eq!(
        store.complete_records("b", &all[3..]).await.unwrap().len(),
        5
    );
    assert_eq!(store.finalize_jobs(&[j.id]).await.unwrap(), [j.id]);
    let c = counts(store, j.id).await;
    assert_eq!((c.completed, c.total()), (10, 10));
}

async fn fencing_ignores_the_old_owner(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 1)).await;
    let old = claim(store, "old", 1, EXPIRED).await;
    let new = claim(store, "new", 1, LONG).await;
    assert_eq!(idx_attempts(&new), [(0, 2)]);

    // The old worker finishes late: its write is ignored, traces included.
    let mut late = completed(&old[0], json!({"x": "old"}));
    late.traces = vec![trace("summary", "old")];
    assert!(
        store
            .complete_records("old", &[late])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.get_record(old[0].id, None).await.unwrap(), None);
    assert!(store.get_traces(old[0].id, None).await.unwrap().is_empty());
    // Nor can it release or renew what it no longer holds.
    let chunk = [old[0].chunk];
    assert_eq!(store.release_chunks("old", &chunk).await.unwrap(), 0);
    assert_eq!(store.renew_leases("old", &chunk, LONG).await.unwrap(), 0);

    let id = new[0].id;
    let mut current = completed(&new[0], json!({"x": "new"}));
    current.traces = vec![trace("summary", "new")];
    assert_eq!(
        store.complete_records("new", &[current]).await.unwrap(),
        [id]
    );
    let rec = store.get_record(id, None).await.unwrap().unwrap();
    assert_eq!((rec.job_id, rec.index), (j.id, 0));
    assert_eq!(rec.values, Some(json!({"x": "new"})));
    assert_eq!(rec.attempts, 2);
    let traces = store.get_traces(id, None).await.unwrap();
    assert_eq!(traces.len(), 1);
    assert_eq!(
        traces[0].messages,
        json!([{"role": "user", "content": "new"}])
    );

    // A finished record is never written again, even by its last owner (its chunk is gone).
    let again = completed(&new[0], json!({"x": "again"}));
    assert!(
        store
            .complete_records("new", &[again])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(claim(store, "any", 1, EXPIRED).await.is_empty());
    let rows = store
        .list_records(j.id, None, synthgate::store::RecordSelect::default(), 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].values, Some(json!({"x": "new"})));
}

async fn release_returns_chunks_to_the_queue(db: TestDb) {
    let store = &*db.store;
    let job = create(store, &new_job(None, 4)).await;
    let held = claim(store, "a", 3, LONG).await;
    let chunk = [held[0].chunk];
    // One record written, then the chunk is given back with the other two.
    let one = [completed(&held[1], json!({}))];
    assert_eq!(store.complete_records("a", &one).await.unwrap().len(), 1);
    assert_eq!(store.release_chunks("b", &chunk).await.unwrap(), 0);
    assert_eq!(store.release_chunks("a", &[]).await.unwrap(), 0);
    assert_eq!(store.release_chunks("a", &chunk).await.unwrap(), 1);
    assert_eq!(
        counts(store, job.id).await,
        JobCounts {
            pending: 3,
            completed: 1,
            ..Default::default()
        }
    );
    // Back in order, without the written one; a release still counts as an attempt, not as
    // an expiry.
    let again = claim(store, "c", 3, LONG).await;
    assert_eq!(idx_attempts(&again), [(0, 2), (2, 2), (3, 1)]);
    assert!(again.iter().all(|c| c.lease_expiries == 0));
}

async fn renew_extends_leases(db: TestDb) {
    let store = &*db.store;
    create(store, &new_job(None, 3)).await;
    // `b` first: a claim takes expired leases before new chunks.
    claim(store, "b", 1, LONG).await;
    // Two chunks for `a`, whose leases lapse at once; renewed before anyone took them over,
    // nobody can claim them.
    let mut held: Vec<ChunkKey> = Vec::new();
    for _ in 0..2 {
        held.extend(claim(store, "a", 1, LONG).await.iter().map(|c| c.chunk));
    }
    assert_eq!(store.renew_leases("a", &held, EXPIRED).await.unwrap(), 2);
    assert_eq!(store.renew_leases("a", &held, LONG).await.unwrap(), 2);
    assert!(claim(store, "c", 5, LONG).await.is_empty());
    assert_eq!(store.renew_leases("nobody", &held, LONG).await.unwrap(), 0);
    assert_eq!(store.renew_leases("a", &[], LONG).await.unwrap(), 0);
    // Shortened to nothing, they are claimable again; except the one `a` renews again: only
    // the chunks named are renewed, so a lease its owner stopped renewing lapses.
    assert_eq!(store.renew_leases("a", &held, EXPIRED).await.unwrap(), 2);
    assert_eq!(store.renew_leases("a", &held[..1], LONG).await.unwrap(), 1);
    assert_eq!(idx_attempts(&claim(store, "c", 5, LONG).await), [(2, 2)]);
}

/// A job inserted by a process that knows nothing of `job_cursors` (a replica of an earlier
/// build still taking submits during an upgrade) is claimed like any other: inserting the job
/// row opens its cursor (a trigger of migration 0013), whoever inserts it.
async fn a_job_inserted_by_an_earlier_build_is_claimed(db: TestDb) {
    const ID: &str = "01900000-0000-7000-8000-000000000001";
    db.execute(match db.backend {
        Backend::Sqlite => {
            "insert into jobs (id, status, config, num_records, seed, run_config, created_at, \
             updated_at) \
             values (x'01900000000070008000000000000001', 'queued', '{}', 3, 7, '{}', 1, 1)"
        }
        Backend::Postgres => {
            "insert into jobs (id, status, config, num_records, seed, run_config) \
             values ('01900000-0000-7000-8000-000000000001', 'queued', '{}', 3, 7, '{}')"
        }
    })
    .await;
    let claimed = claim(&*db.store, "w", 10, LONG).await;
    let got: Vec<(String, u32)> = claimed
        .iter()
        .map(|c| (c.job_id.0.to_string(), c.index))
        .collect();
    assert_eq!(got, [(ID.into(), 0), (ID.into(), 1), (ID.into(), 2)]);
    assert_eq!(
        db.count("select count(*) from jobs where status = 'running'")
            .await,
        1
    );
}
