//! Claim policy: fair shares across keys and jobs, and chunks whose worker keeps dying.

use std::time::Duration;

use serde_json::json;
use synthgate::domain::{JobId, JobStatus, RecordStatus};
use synthgate::queue::{Claim, ClaimPolicy, Database};
use synthgate::store::{RecordErrorCode, RecordStage};

use super::{EXPIRED, LONG, claim, completed, counts, create, idx_attempts, job, new_job};
use crate::db::{TestDb, both_backends};

both_backends!(
    claims_are_fair_across_keys_and_jobs,
    a_record_that_keeps_killing_its_worker_is_abandoned,
    suspects_go_one_per_claim_beside_other_work,
    a_release_at_drain_is_not_an_expiry,
    a_late_result_past_a_cut_is_not_the_cut_chunks,
);

async fn claim_with(
    store: &dyn Database,
    owner: &str,
    limit: u32,
    lease: Duration,
    isolate: bool,
) -> Claim {
    let policy = ClaimPolicy {
        max_lease_expiries: 3,
        isolate,
    };
    store
        .claim(owner, limit, lease, policy)
        .await
        .expect("claim")
}

/// `(job, index)` of what a claim returned.
fn taken(c: &[synthgate::queue::ClaimedRecord]) -> Vec<(JobId, u32)> {
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
            .all(|r| r.lease_expiries == 1 && !r.suspect)
    );

    // Twice: suspects. A claimer with a suspect record in flight is not given them.
    let busy = claim_with(store, "busy", 3, LONG, false).await;
    assert!(busy.records.is_empty() && busy.abandoned.is_empty());
    // A claimer with none gets one record of the chunk, in a chunk cut right after it (the
    // rest is given back, still suspect).
    let third = claim_with(store, "dead-3", 3, EXPIRED, true).await;
    assert_eq!(idx_attempts(&third.records), [(0, 3)]);
    assert!(third.records[0].suspect);
    assert_eq!(third.records[0].lease_expiries, 2);
    assert_eq!(third.records[0].chunk_todo, 1);

    // It kills its worker a third time: the next claim fails it instead of running it, and
    // hands out the next suspect record (it completes: it was only next to the poison).
    let fourth = claim_with(store, "w", 3, LONG, true).await;
    assert_eq!(fourth.abandoned.len(), 1);
    let (poison, poison_job) = fourth.abandoned[0];
    assert_eq!(poison_job, j.id);
    assert_eq!(idx_attempts(&fourth.records), [(1, 3)]);
    assert!(fourth.records[0].suspect);
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

/// Suspect chunks (their worker died twice) are handed out one record per claim, and only to a
/// claimer with no suspect record in flight. A claimer that has one is handed other work and
/// the suspects are left, so no claim waits for them; one that may take a suspect record gets
/// other work beside it. Suspicion alone fails nothing: every record completes.
async fn suspects_go_one_per_claim_beside_other_work(db: TestDb) {
    let store = &*db.store;
    let a = create(store, &new_job(Some("a"), 3)).await;
    let c = create(store, &new_job(Some("c"), 2)).await;
    // Two crashes with both jobs in flight (one chunk each): both chunks become suspect.
    for (owner, attempts) in [("dead-1", 1), ("dead-2", 2)] {
        let got = claim_with(store, owner, 6, EXPIRED, false).await;
        assert_eq!(got.records.len(), 5, "{owner}: {got:?}");
        assert!(
            got.records
                .iter()
                .all(|r| r.attempts == attempts && !r.suspect),
            "{owner}: {got:?}"
        );
    }
    let b = create(store, &new_job(Some("b"), 3)).await;
    let mut results = Vec::new();
    let mut done = |owner: &'static str, claim: &Claim| {
        results.extend(
            claim
                .records
                .iter()
                .map(|r| (owner, completed(r, json!({"i": r.index})))),
        );
    };

    // A suspect record of this claimer is in flight: new work only, the suspects are left.
    let busy = claim_with(store, "w", 2, LONG, false).await;
    assert_eq!(taken(&busy.records), [(b.id, 0), (b.id, 1)]);
    assert!(busy.abandoned.is_empty());
    done("w", &busy);
    // None in flight: the first suspect chunk's first record, cut right after it, and new
    // work beside it; one suspect record per claim, so c's chunk and the rest of a's wait.
    let free = claim_with(store, "w", 10, LONG, true).await;
    assert_eq!(taken(&free.records), [(a.id, 0), (b.id, 2)]);
    let (suspect, fresh) = (&free.records[0], &free.records[1]);
    assert!(suspect.suspect && suspect.chunk_todo == 1 && suspect.lease_expiries == 2);
    assert!(!fresh.suspect && fresh.lease_expiries == 0);
    done("w", &free);
    // Another replica with no suspect in flight takes the next one: the rest of a's chunk,
    // given back with its count.
    let other = claim_with(store, "w2", 10, LONG, true).await;
    assert_eq!(taken(&other.records), [(a.id, 1)]);
    assert!(other.records[0].suspect && other.records[0].lease_expiries == 2);
    done("w2", &other);
    for (owner, result) in std::mem::take(&mut results) {
        let written = store.complete_records(owner, &[result]).await.unwrap();
        assert_eq!(written.len(), 1);
    }

    // The rest, one suspect record per claim, each written before the next claim.
    let mut claims = 0;
    loop {
        let next = claim_with(store, "w", 10, LONG, true).await;
        assert!(next.abandoned.is_empty(), "{next:?}");
        if next.records.is_empty() {
            break;
        }
        assert_eq!(next.records.len(), 1, "{next:?}");
        let ok = completed(&next.records[0], json!({"i": next.records[0].index}));
        assert_eq!(store.complete_records("w", &[ok]).await.unwrap().len(), 1);
        claims += 1;
    }
    assert_eq!(claims, 3, "a's index 2, c's indexes 0 and 1");
    for (id, n) in [(a.id, 3), (b.id, 3), (c.id, 2)] {
        assert_eq!(store.finalize_jobs(&[id]).await.unwrap(), [id]);
        let got = counts(store, id).await;
        assert_eq!((got.completed, got.failed), (n, 0), "{got:?}");
    }
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
