//! The store test suite: every test runs on SQLite and on Postgres (see `db::both_backends!`).
//!
//! This file holds the shared helpers and the job tests; `store/queue.rs` covers chunk claims,
//! leases and fencing, `store/claims.rs` fair shares and chunks whose worker keeps dying,
//! `store/lifecycle.rs` cancel, finalize and fail, `store/records.rs` record reads, traces and
//! large jobs, `store/migration.rs` upgrading a database written before chunks,
//! `store/writes.rs` what a completion writes besides the record (usage) and what it cannot
//! write (NUL), `store/refusing.rs` the writer when the database refuses a value anyway,
//! `store/round_trips.rs` what the job service's reads cost.

mod cache;
mod claims;
mod datasets;
mod disk_full;
mod lifecycle;
mod lock_cycles;
mod migration;
mod queue;
mod records;
mod refusing;
mod round_trips;
mod seed_cache;
mod spy;
mod writes;

use std::time::Duration;

use serde_json::{Value, json};
use synthgate::config::WorkersConfig;
use synthgate::domain::{JobId, JobStatus, RecordId};
use synthgate::queue::{ClaimPolicy, ClaimedRecord, Database, RecordResult};
use synthgate::store::{
    CreateOutcome, FailedRecord, JobCounts, JobError, JobRow, JobSelect, NewJob, RecordError,
    RecordErrorCode, RecordOutcome, RecordStage, Store, StoreError, Trace,
};

use crate::db::{TestDb, both_backends};

/// A lease no test outlives.
const LONG: Duration = Duration::from_secs(3600);
/// A lease that has expired by the next statement, to simulate a dead worker without sleeping.
const EXPIRED: Duration = Duration::ZERO;

/// A job of `n` records with distinctive values in every field.
pub(crate) fn new_job(owner: Option<&str>, n: u32) -> NewJob {
    NewJob {
        id: JobId::new(),
        owner: owner.map(str::to_owned),
        config: json!({"columns": [{"name": "x", "column_type": "sampler"}]}),
        num_records: n,
        // Above i64::MAX, to check the bit-cast round-trips.
        seed: u64::MAX - 41,
        metadata: Some(json!({"team": "data", "tags": ["a", "b"]})),
        run_config: json!({"shutdown_error_rate": 0.5}),
        idempotency_key: None,
        request_hash: None,
        output_columns: vec!["x".into()],
        max_live_jobs: None,
        max_live_records: None,
        seed_datasets: Vec::new(),
        name: None,
        trace_context: None,
        selection: None,
        cache_mode: Default::default(),
        max_cost_nanos: None,
    }
}

/// Creates a job, asserting it was new.
async fn create(store: &dyn Store, job: &NewJob) -> JobRow {
    match store.create_job(job).await.expect("create_job") {
        CreateOutcome::Created(row) => row,
        other => panic!("expected a new job, got {other:?}"),
    }
}

async fn job(store: &dyn Store, id: JobId) -> JobRow {
    store
        .get_job(id, None)
        .await
        .expect("get_job")
        .expect("job exists")
}

/// A page of jobs as [`Store::job_summaries`] reads it, without the summary parts.
async fn list_jobs(
    store: &dyn Store,
    owner: Option<&str>,
    before: Option<JobId>,
    limit: u32,
) -> Vec<JobRow> {
    let select = JobSelect::Page {
        owner,
        before,
        limit,
        filter: &Default::default(),
    };
    let page = store.job_summaries(select, 0).await.expect("job_summaries");
    page.into_iter().map(|s| s.job).collect()
}

/// The first `n` failed records of a job, as its summary lists them.
async fn first_errors(store: &dyn Store, id: JobId, n: u32) -> Vec<FailedRecord> {
    let one = JobSelect::One { id, owner: None };
    let mut found = store.job_summaries(one, n).await.expect("job_summaries");
    found.pop().expect("the job exists").first_errors
}

async fn counts(store: &dyn Store, id: JobId) -> JobCounts {
    store.job_counts(id).await.expect("job_counts")
}

/// A claim with the worker's default policy by a claimer with no suspect record in flight (so
/// one suspect record may be returned, beside other work); the records only.
async fn claim(
    store: &dyn Database,
    owner: &str,
    limit: u32,
    lease: Duration,
) -> Vec<ClaimedRecord> {
    let policy = ClaimPolicy {
        max_lease_expiries: WorkersConfig::default().max_lease_expiries,
        isolate: true,
    };
    store
        .claim(owner, limit, lease, policy)
        .await
        .expect("claim")
        .records
}

/// `(index, attempts)` of claimed records, for exact comparisons.
fn idx_attempts(claimed: &[ClaimedRecord]) -> Vec<(u32, u32)> {
    claimed.iter().map(|c| (c.index, c.attempts)).collect()
}

/// The result of a claimed record.
fn completed(c: &ClaimedRecord, values: Value) -> RecordResult {
    RecordResult {
        id: c.id,
        job_id: c.job_id,
        index: c.index,
        chunk: c.chunk,
        attempts: c.attempts,
        outcome: RecordOutcome::Completed { values },
        traces: Vec::new(),
        usage: Default::default(),
        column_usage: Default::default(),
        tool_usage: Default::default(),
        media: Vec::new(),
        selection: None,
    }
}

fn failed(c: &ClaimedRecord, code: &str) -> RecordResult {
    RecordResult {
        id: c.id,
        job_id: c.job_id,
        index: c.index,
        chunk: c.chunk,
        attempts: c.attempts,
        outcome: RecordOutcome::Failed {
            values: Some(json!({"x": 1})),
            // The store keeps any code, including ones this build does not produce.
            error: RecordError {
                code: RecordErrorCode::parse(code),
                message: format!("{code} happened"),
                column: Some("summary".to_owned()),
                stage: Some(RecordStage::Llm),
            },
        },
        traces: Vec::new(),
        usage: Default::default(),
        column_usage: Default::default(),
        tool_usage: Default::default(),
        media: Vec::new(),
        selection: None,
    }
}

fn trace(column: &str, content: &str) -> Trace {
    Trace {
        column: column.to_owned(),
        messages: json!([{"role": "user", "content": content}]),
    }
}

both_backends!(
    create_then_get,
    owner_isolation,
    list_jobs_newest_first_with_pagination,
    idempotency_key_returns_existing,
    idempotency_key_without_owner,
    live_jobs_lists_unfinished,
);

async fn create_then_get(db: TestDb) {
    let store = &*db.store;
    let new = new_job(Some("team-a"), 3);
    let created = create(store, &new).await;

    assert_eq!(created.id, new.id);
    assert_eq!(created.owner.as_deref(), Some("team-a"));
    assert_eq!(created.status, JobStatus::Queued);
    assert_eq!(created.config, new.config);
    assert_eq!(created.num_records, 3);
    assert_eq!(created.seed, u64::MAX - 41);
    assert_eq!(created.metadata, new.metadata);
    assert_eq!(created.run_config, new.run_config);
    assert_eq!(created.error, None);
    assert_eq!(created.started_at, None);
    assert_eq!(created.finished_at, None);
    assert_eq!(created.created_at, created.updated_at);
    let now = store.now().await.unwrap();
    assert!(created.created_at <= now, "{} > {now}", created.created_at);

    // What get returns is exactly what create returned.
    assert_eq!(job(store, new.id).await, created);
    assert_eq!(
        counts(store, new.id).await,
        JobCounts {
            pending: 3,
            ..Default::default()
        }
    );
    // No record row until a record has a result.
    assert!(
        store
            .list_records(new.id, None, synthgate::store::RecordSelect::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Without metadata, and an unknown id.
    let mut bare = new_job(None, 1);
    bare.metadata = None;
    assert_eq!(create(store, &bare).await.metadata, None);
    assert_eq!(store.get_job(JobId::new(), None).await.unwrap(), None);
}

async fn owner_isolation(db: TestDb) {
    let store = &*db.store;
    let a = create(store, &new_job(Some("a"), 1)).await;
    let b = create(store, &new_job(Some("b"), 1)).await;
    let none = create(store, &new_job(None, 1)).await;

    assert_eq!(
        store.get_job(a.id, Some("a")).await.unwrap(),
        Some(a.clone())
    );
    assert_eq!(store.get_job(a.id, Some("b")).await.unwrap(), None);
    assert_eq!(store.get_job(none.id, Some("a")).await.unwrap(), None);
    assert_eq!(store.get_job(b.id, None).await.unwrap(), Some(b.clone()));

    let c = claim(store, "w", 1, LONG).await;
    assert_eq!(c[0].job_id, a.id);
    store
        .complete_records("w", &[completed(&c[0], json!({}))])
        .await
        .unwrap();
    let rec = store
        .list_records(a.id, None, synthgate::store::RecordSelect::default(), 1)
        .await
        .unwrap()[0]
        .clone();
    assert_eq!(
        store.get_record(rec.id, Some("a")).await.unwrap(),
        Some(rec.clone())
    );
    assert_eq!(store.get_record(rec.id, Some("b")).await.unwrap(), None);
    assert_eq!(store.get_record(rec.id, None).await.unwrap(), Some(rec));
    assert_eq!(store.get_record(RecordId::new(), None).await.unwrap(), None);

    let ids = |jobs: Vec<JobRow>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
    assert_eq!(ids(list_jobs(store, Some("a"), None, 10).await), [a.id]);
    assert_eq!(ids(list_jobs(store, Some("c"), None, 10).await), []);
    assert_eq!(
        ids(list_jobs(store, None, None, 10).await),
        [none.id, b.id, a.id]
    );
}

async fn list_jobs_newest_first_with_pagination(db: TestDb) {
    let store = &*db.store;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(create(store, &new_job(Some("a"), 1)).await.id);
    }
    create(store, &new_job(Some("b"), 1)).await;
    ids.reverse(); // newest first

    let page1: Vec<JobId> = list_jobs(store, Some("a"), None, 2)
        .await
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(page1, ids[0..2]);
    let page2: Vec<JobId> = list_jobs(store, Some("a"), Some(page1[1]), 2)
        .await
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(page2, ids[2..4]);
    let page3: Vec<JobId> = list_jobs(store, Some("a"), Some(page2[1]), 2)
        .await
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(page3, ids[4..5]);
    assert!(
        list_jobs(store, Some("a"), Some(page3[0]), 2)
            .await
            .is_empty()
    );
}

async fn idempotency_key_returns_existing(db: TestDb) {
    let store = &*db.store;
    let mut first = new_job(Some("a"), 4);
    first.idempotency_key = Some("key-1".to_owned());
    first.request_hash = Some("hash-1".to_owned());
    let created = create(store, &first).await;
    assert_eq!(created.idempotency_key.as_deref(), Some("key-1"));
    assert_eq!(created.request_hash.as_deref(), Some("hash-1"));

    // A retry: a new job id, same owner and key. Nothing is inserted.
    let mut retry = new_job(Some("a"), 4);
    retry.idempotency_key = Some("key-1".to_owned());
    retry.request_hash = Some("hash-2".to_owned());
    match store.create_job(&retry).await.unwrap() {
        CreateOutcome::Existing(row) => assert_eq!(row, created),
        other => panic!("expected the existing job, got {other:?}"),
    }
    assert_eq!(store.get_job(retry.id, None).await.unwrap(), None);
    assert_eq!(counts(store, created.id).await.total(), 4);
    assert_eq!(list_jobs(store, None, None, 10).await.len(), 1);

    // The same key under another owner is another job.
    let mut other = new_job(Some("b"), 2);
    other.idempotency_key = Some("key-1".to_owned());
    create(store, &other).await;
    assert_eq!(list_jobs(store, None, None, 10).await.len(), 2);
    assert_eq!(claim(store, "w", 100, LONG).await.len(), 6);
}

async fn idempotency_key_without_owner(db: TestDb) {
    let store = &*db.store;
    let mut first = new_job(None, 2);
    first.idempotency_key = Some("k".to_owned());
    let created = create(store, &first).await;
    let mut retry = new_job(None, 2);
    retry.idempotency_key = Some("k".to_owned());
    match store.create_job(&retry).await.unwrap() {
        CreateOutcome::Existing(row) => assert_eq!(row.id, created.id),
        other => panic!("null owners must share a key space: {other:?}"),
    }
    // Jobs without a key never collide.
    create(store, &new_job(None, 1)).await;
    create(store, &new_job(None, 1)).await;
    assert_eq!(list_jobs(store, None, None, 10).await.len(), 3);
}

async fn live_jobs_lists_unfinished(db: TestDb) {
    let store = &*db.store;
    let running = create(store, &new_job(None, 2)).await.id;
    assert_eq!(claim(store, "w", 2, LONG).await.len(), 2);

    let cancelling = create(store, &new_job(None, 1)).await.id;
    assert_eq!(claim(store, "w", 1, LONG).await[0].job_id, cancelling);
    store.request_cancel(cancelling).await.unwrap();

    let done = create(store, &new_job(None, 1)).await.id;
    let c = claim(store, "w", 1, LONG).await;
    assert_eq!(c[0].job_id, done);
    let written = store
        .complete_records("w", &[completed(&c[0], json!({}))])
        .await
        .unwrap();
    assert_eq!(written, [c[0].id]);
    assert_eq!(store.finalize_jobs(&[done]).await.unwrap(), [done]);

    let failed = create(store, &new_job(None, 1)).await.id;
    let error = JobError {
        code: "error_rate_exceeded".to_owned(),
        message: "too many failures".to_owned(),
    };
    store.fail_job(failed, &error).await.unwrap();

    let queued = create(store, &new_job(None, 1)).await.id;

    assert_eq!(
        store.live_jobs().await.unwrap(),
        [running, cancelling, queued]
    );
}

/// SQLite's pool honours `database.acquire_timeout_sec` as Postgres's does: with its only
/// connection held, a read fails with a pool timeout (the API's `503 service_unavailable`)
/// after the timeout, instead of waiting sqlx's default 30 s; once the connection is back,
/// the same read answers.
#[tokio::test]
async fn a_busy_sqlite_pool_fails_a_wait_after_the_acquire_timeout() {
    use synthgate::store::JobStore;
    use synthgate::store::sqlite::SqliteStore;

    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_path(&dir.path().join("t.db"), 1, Duration::from_millis(300))
        .await
        .unwrap();
    let held = store.pool().acquire().await.unwrap();
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), store.get_job(JobId::new(), None))
        .await
        .expect("the wait is bounded by the acquire timeout, not sqlx's 30 s")
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Db(sqlx::Error::PoolTimedOut)),
        "{err:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    drop(held);
    assert!(store.get_job(JobId::new(), None).await.unwrap().is_none());
}

/// `queue::open` picks the backend from the URL and creates a missing SQLite file and its
/// directory, in WAL mode.
#[tokio::test]
async fn open_picks_the_backend() {
    use synthgate::store::sqlite::SqliteStore;

    let dir = tempfile::tempdir().unwrap();
    let default = dir.path().join("data/nested/synthgate.db");
    let store = synthgate::queue::open(
        None,
        &default,
        None,
        synthgate::store::DEFAULT_ACQUIRE_TIMEOUT,
    )
    .await
    .unwrap();
    create(&*store, &new_job(None, 2)).await;
    store.close().await;
    assert!(default.exists());

    let url = format!("sqlite://{}", dir.path().join("other.db").display());
    let sqlite = SqliteStore::open(&url, 2, synthgate::store::DEFAULT_ACQUIRE_TIMEOUT)
        .await
        .unwrap();
    let mode: String = sqlx::query_scalar("pragma journal_mode")
        .fetch_one(sqlite.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = sqlx::query_scalar("pragma foreign_keys")
        .fetch_one(sqlite.pool())
        .await
        .unwrap();
    // The page cache is bounded per connection (1 MiB, in KiB when negative).
    let cache: i64 = sqlx::query_scalar("pragma cache_size")
        .fetch_one(sqlite.pool())
        .await
        .unwrap();
    assert_eq!(cache, -1024);
    assert_eq!(fk, 1);
    sqlite.close().await;
    // Reopening an existing database applies no migration twice.
    let again = synthgate::queue::open(
        Some(&url),
        &default,
        Some(2),
        synthgate::store::DEFAULT_ACQUIRE_TIMEOUT,
    )
    .await
    .unwrap();
    assert!(list_jobs(&*again, None, None, 1).await.is_empty());

    // In memory, for quick tests: one connection that lives as long as the store.
    let mem = synthgate::queue::open(
        Some("sqlite::memory:"),
        &default,
        Some(4),
        synthgate::store::DEFAULT_ACQUIRE_TIMEOUT,
    )
    .await
    .unwrap();
    create(&*mem, &new_job(None, 3)).await;
    assert_eq!(claim(&*mem, "w", 5, LONG).await.len(), 3);

    let pg = TestDb::new(crate::db::Backend::Postgres).await;
    let store = synthgate::queue::open(
        Some(&pg.url),
        &default,
        Some(2),
        synthgate::store::DEFAULT_ACQUIRE_TIMEOUT,
    )
    .await
    .unwrap();
    store.probe_write().await.unwrap();
    store.close().await;

    let err = synthgate::queue::open(
        Some("mysql://u:secret@h/db"),
        &default,
        Some(2),
        synthgate::store::DEFAULT_ACQUIRE_TIMEOUT,
    )
    .await
    .err()
    .expect("mysql is not supported");
    assert!(!err.to_string().contains("secret"), "{err}");
}
