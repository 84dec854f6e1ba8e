//! Postgres's row locks around a claim: a claim does not wait for the batch writes under way
//! (their foreign keys lock the job row, which a carve only shares), and a queue operation
//! that Postgres ends to break a deadlock runs again instead of failing
//! (`queue/postgres/mod.rs`, `rerun`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::PgConnection;
use uuid::Uuid;

use super::{LONG, claim, create, new_job};
use crate::db::{Backend, TestDb};

/// A batch write holds the job row `for key share` from its first insert (each record's
/// foreign key) until it commits; a claim of the same job goes on meanwhile. The carve used to
/// lock the job row `for update`, so every claim waited for the writes in progress
/// (bench/README.md, "Where a tool record waits"): here it would wait for the open
/// transaction until the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_does_not_wait_for_a_batch_write_in_progress() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = db.store.clone();
    let j = create(&*store, &new_job(None, 20)).await;
    let first = claim(&*store, "writer", 5, LONG).await;
    assert_eq!(first.len(), 5);

    // A write of the first record, left open: the insert's foreign-key check holds the job row.
    let mut writer = PgConnection::connect(&db.url).await.unwrap();
    let mut tx = writer.begin().await.unwrap();
    sqlx::query(
        "insert into records (id, job_id, idx, status, \"values\", attempts) \
         values ($1, $2, $3, 'completed', '{}'::jsonb, 1)",
    )
    .bind(Uuid::now_v7())
    .bind(j.id.0)
    .bind(i64::from(first[0].index))
    .execute(&mut *tx)
    .await
    .unwrap();

    let claimer = store.clone();
    let next = tokio::time::timeout(Duration::from_secs(10), async move {
        claim(&*claimer, "other", 5, LONG).await
    })
    .await
    .expect("the claim waited for the batch write in progress");
    let indexes: Vec<u32> = next.iter().map(|r| r.index).collect();
    assert_eq!(indexes, (5..10).collect::<Vec<_>>());
    tx.rollback().await.unwrap();
}

/// A lock cycle made on purpose: a claim takes over a given-back chunk, then waits to carve,
/// sharing the job row, behind this test's transaction, which holds the row as an update of
/// it does (a cancel, a job's end) and then waits for the chunk. (The cycle a load test met,
/// a writer's foreign-key lock on the job row against the carve, cannot form since the carve
/// only shares the row; this one stands for any other.) Postgres ends the claim's transaction
/// (this one's deadlock timeout is longer), and the claim runs again: no error, no index
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_ended_by_a_deadlock_runs_again() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = db.store.clone();
    let j = create(&*store, &new_job(None, 10)).await;
    let given_back = claim(&*store, "a", 5, LONG).await;
    assert_eq!(given_back.len(), 5);
    let chunk = given_back[0].chunk;
    assert_eq!(store.release_chunks("a", &[chunk]).await.unwrap(), 1);

    let mut holder = PgConnection::connect(&db.url).await.unwrap();
    // Superuser-settable per session: the claim's backend (one second) detects the cycle.
    sqlx::query("set deadlock_timeout = '60s'")
        .execute(&mut holder)
        .await
        .unwrap();
    let mut tx = holder.begin().await.unwrap();
    sqlx::query("select 1 from jobs where id = $1 for no key update")
        .bind(j.id.0)
        .execute(&mut *tx)
        .await
        .unwrap();

    let claimer = store.clone();
    let mut claiming = tokio::task::JoinSet::new();
    claiming.spawn(async move {
        let policy = synthgate::queue::ClaimPolicy {
            max_lease_expiries: 3,
            isolate: false,
        };
        claimer.claim("b", 10, LONG, policy).await
    });
    // The claim holds the given-back chunk once it waits on the job row.
    let mut watcher = PgConnection::connect(&db.url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity \
             where datname = current_database() and wait_event_type = 'Lock'",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if waiting == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the claim never waited on the job row"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Closes the cycle; returns once Postgres has ended the claim's first run.
    sqlx::query("update chunks set updated_at = updated_at where job_id = $1 and start_idx = $2")
        .bind(j.id.0)
        .bind(i64::from(chunk.start))
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let first = claiming
        .join_next()
        .await
        .expect("the claim's task")
        .unwrap()
        .expect("the claim runs again after the deadlock");
    let deadlocks: i64 = sqlx::query_scalar(
        "select deadlocks from pg_stat_database where datname = current_database()",
    )
    .fetch_one(&mut watcher)
    .await
    .unwrap();
    assert!(
        deadlocks >= 1,
        "Postgres broke no deadlock: the test made no cycle"
    );
    // Whatever the rerun found (the chunk, or only the rest of the job), every index is
    // claimed exactly once between it and the next claim.
    let rest = claim(&*store, "c", 10, LONG).await;
    let mut seen = BTreeSet::new();
    for r in first.records.iter().chain(&rest) {
        assert!(seen.insert(r.index), "index {} claimed twice", r.index);
    }
    assert_eq!(seen, (0..10).collect());
}
