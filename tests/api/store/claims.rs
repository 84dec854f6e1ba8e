//! Claim policy: fair shares across keys and jobs, and chunks whose worker keeps dying.

use std::time::Duration;

use serde_json::json;
use synthgate::domain::{JobId, JobStatus, RecordStatus};
use synthgate::store::{Claim, ClaimPolicy, RecordErrorCode, RecordStage, Store};

use super::{EXPIRED, LONG, claim, completed, counts, create, idx_attempts, job, new_job};
use crate::db::{TestDb, both_backends};

both_backends!(
    claims_are_fair_across_keys_and_jobs,
    a_record_that_keeps_killing_its_worker_is_abandoned,
    a_release_at_drain_is_not_an_expiry,
    a_late_result_past_a_cut_is_not_the_cut_chunks,
);

async fn claim_with(
    store: &dyn Store,
    owner: &str,
    limit: u32,
    lease: Duration,
    alone: bool,
) -> Claim {
    let policy = ClaimPolicy {
        max_lease_expiries: 3,
        alone,
    };
    store
        .claim(owner, limit, lease, policy)
        .await
        .expect("claim")
}

/// `(job, index)` of what a claim returned.
fn taken(c: &[synthgate::store::ClaimedRecord]) -> Vec<(JobId, u32)> {
    c.iter().map(|r| (r.job_id, r.index)).collect()
}

async fn claims_are_fair_across_keys_and_jobs(db: TestDb) {
    let store = &*db.store;
    // Key a's big job came first and has 6 records in progress.
    let big = create(store, &new_job(Some("a"), 20)).await;
    assert_eq!(claim(store, "w", 6, LONG).await.len(), 6);
    let small = create(store, &new_job(Some("b"), 3)).await;

    // Oldest job first would give the big job's seventh record; key b has nothing running.
    let c = claim(store, "w", 1, LONG).await;
    assert_eq!(taken(&c), [(small.id, 0)]);
    // b goes first until it catches up with a (6 in progress), but it has only 2 left; the
    // rest of the claim goes to a.
    let c = claim(store, "w", 4, LONG).await;
    assert_eq!(
        taken(&c),
        [(big.id, 6), (big.id, 7), (small.id, 1), (small.id, 2)]
    );

    // Within one key, a new job goes before the key's busy one.
    let second = create(store, &new_job(Some("a"), 2)).await;
    let c = claim(store, "w", 2, LONG).await;
    assert_eq!(taken(&c), [(second.id, 0), (second.id, 1)]);
    assert_eq!(counts(store, big.id).await.in_progress, 8);
}

async fn a_record_that_keeps_killing_its_worker_is_abandoned(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 3)).await;
    // A crash with all three records in flight: their leases expire.
    let first = claim_with(store, "dead-1", 3, EXPIRED, false).await;
    assert_eq!(idx_attempts(&first.records), [(0, 1), (1, 1), (2, 1)]);

    // The first expiry is an ordinary crash: taken over together, as before. They crash again.
    let second = claim_with(store, "dead-2", 3, EXPIRED, false).await;
    assert_eq!(idx_attempts(&second.records), [(0, 2), (1, 2), (2, 2)]);
    assert!(
        second
            .records
            .iter()
            .all(|r| r.lease_expiries == 1 && !r.alone)
    );

    // Twice: suspects. A claimer with work in flight is not given them, but told they wait.
    let busy = claim_with(store, "busy", 3, LONG, false).await;
    assert!(busy.records.is_empty() && busy.abandoned.is_empty());
    assert!(busy.alone_waiting);
    // A claimer with nothing in flight gets one record of the chunk, by itself, in a chunk cut
    // right after it (the rest is given back, still suspect).
    let third = claim_with(store, "dead-3", 3, EXPIRED, true).await;
    assert_eq!(idx_attempts(&third.records), [(0, 3)]);
    assert!(third.records[0].alone);
    assert_eq!(third.records[0].lease_expiries, 2);
    assert_eq!(third.records[0].chunk_todo, 1);

    // It kills its worker a third time: the next claim fails it instead of running it, and
    // hands out the next suspect, alone (it completes: it was only next to the poison).
    let fourth = claim_with(store, "w", 3, LONG, true).await;
    assert_eq!(fourth.abandoned.len(), 1);
    let (poison, poison_job) = fourth.abandoned[0];
    assert_eq!(poison_job, j.id);
    assert_eq!(idx_attempts(&fourth.records), [(1, 3)]);
    assert!(fourth.records[0].alone);
    let ok = completed(&fourth.records[0], json!({"x": 1}));
    assert_eq!(store.complete_records("w", &[ok]).await.unwrap().len(), 1);
    let fifth = claim_with(store, "w", 3, LONG, true).await;
    assert!(fifth.abandoned.is_empty());
    assert_eq!(idx_attempts(&fifth.records), [(2, 3)]);
    let ok = completed(&fifth.records[0], json!({"x": 2}));
    assert_eq!(store.complete_records("w", &[ok]).await.unwrap().len(), 1);

    let rec = store.get_record(poison, None).await.unwrap().unwrap();
    assert_eq!(rec.index, 0);
    assert_eq!(rec.status, RecordStatus::Failed);
    assert_eq!(rec.attempts, 3, "never run a fourth time");
    let e = rec.error.expect("error");
    assert_eq!(e.code, RecordErrorCode::RecordAbandoned);
    assert_eq!(e.stage, Some(RecordStage::Worker));
    assert!(e.message.contains('3'), "{}", e.message);
    assert_eq!(rec.values, None);
    // Nothing is left to claim, and the job finishes.
    assert!(
        claim_with(store, "w", 3, LONG, true)
            .await
            .records
            .is_empty()
    );
    assert_eq!(store.finalize_jobs(&[j.id]).await.unwrap(), [j.id]);
    let done = job(store, j.id).await;
    assert_eq!(done.status, JobStatus::Completed);
    let c = counts(store, j.id).await;
    assert_eq!((c.completed, c.failed), (2, 1));
}

async fn a_release_at_drain_is_not_an_expiry(db: TestDb) {
    let store = &*db.store;
    create(store, &new_job(None, 1)).await;
    // Released cleanly at drain, four times: more than the limit, and never abandoned.
    for round in 1..=4u32 {
        let c = claim_with(store, "w", 1, LONG, false).await;
        assert_eq!(idx_attempts(&c.records), [(0, round)]);
        assert_eq!(c.records[0].lease_expiries, 0);
        assert!(c.abandoned.is_empty());
        let chunks = [c.records[0].chunk];
        assert_eq!(store.release_chunks("w", &chunks).await.unwrap(), 1);
    }
    let c = claim_with(store, "w", 1, EXPIRED, false).await;
    assert_eq!(c.records[0].lease_expiries, 0);
    // Its lease expiring is one.
    let c = claim_with(store, "w", 1, LONG, false).await;
    assert_eq!(c.records[0].lease_expiries, 1);
}

/// The database was away longer than a lease: the replica's lease on a chunk lapsed while some
/// of its results still waited in the writer, and the same replica (the lease owner is the
/// replica) took the chunk over with room for fewer records, cutting it and giving the rest
/// back. The late results past the cut are the rest's, not the cut chunk's: counted for it,
/// they made it go before its own records were written, which were then fenced out, and the
/// job completed without them (found by `db_faults::postgres_restart_mid_job`, 1,999 rows of
/// 2,000).
async fn a_late_result_past_a_cut_is_not_the_cut_chunks(db: TestDb) {
    let store = &*db.store;
    let j = create(store, &new_job(None, 6)).await;
    let first = claim_with(store, "w", 6, EXPIRED, false).await;
    assert_eq!(first.records.len(), 6);
    // The same owner takes its lapsed chunk over with room for three: [0, 3), [3, 6) given
    // back.
    let second = claim_with(store, "w", 3, LONG, false).await;
    assert_eq!(idx_attempts(&second.records), [(0, 2), (1, 2), (2, 2)]);
    let own: Vec<_> = second
        .records
        .iter()
        .map(|c| completed(c, json!({"own": c.index})))
        .collect();
    assert_eq!(
        store.complete_records("w", &own[..1]).await.unwrap().len(),
        1
    );
    // The first lease's results for indexes 4 and 5, past the cut, come now: they are not the
    // cut chunk's, and are not written for it.
    let late: Vec<_> = first.records[4..]
        .iter()
        .map(|c| completed(c, json!({"late": c.index})))
        .collect();
    assert_eq!(store.complete_records("w", &late).await.unwrap().len(), 0);
    // The cut chunk's other records are still its own to write.
    assert_eq!(
        store.complete_records("w", &own[1..]).await.unwrap().len(),
        2
    );
    // The rest is run by a later claim, and the job ends with every record.
    let third = claim_with(store, "w", 6, LONG, false).await;
    assert_eq!(idx_attempts(&third.records), [(3, 2), (4, 2), (5, 2)]);
    let rest: Vec<_> = third
        .records
        .iter()
        .map(|c| completed(c, json!({"rest": c.index})))
        .collect();
    assert_eq!(store.complete_records("w", &rest).await.unwrap().len(), 3);
    assert_eq!(store.finalize_jobs(&[j.id]).await.unwrap(), [j.id]);
    assert_eq!(job(store, j.id).await.status, JobStatus::Completed);
    assert_eq!(counts(store, j.id).await.completed, 6);
}
