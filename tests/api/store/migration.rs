//! Upgrading a database written before chunks (migration 0007) and before record counters
//! (0009): jobs in every state keep their results and counts, and a live job's records without
//! a result are run, exactly those.

use serde_json::json;
use sqlx::Connection;
use synthgate::domain::{JobId, JobStatus, RecordStatus};
use synthgate::store::JobCounts;
use uuid::Uuid;

use super::{LONG, claim, completed, counts, job};
use crate::db::{Backend, TestDb};

/// `(job, index, status, values, error_code)` of a record row as written before 0007.
type OldRecord = (
    Uuid,
    i64,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
);

/// Rows as the service before 0007 wrote them: a running job (one record completed with a
/// trace, one failed, one in progress on a worker that is gone, two pending), a completed job
/// and a cancelled one (one completed, two cancelled rows).
struct Old {
    running: Uuid,
    done: Uuid,
    cancelled: Uuid,
    traced: Uuid,
}

impl Old {
    fn new() -> Self {
        Self {
            running: JobId::new().0,
            done: JobId::new().0,
            cancelled: JobId::new().0,
            traced: Uuid::now_v7(),
        }
    }

    /// Every record row.
    fn records(&self) -> Vec<OldRecord> {
        vec![
            (self.running, 0, "completed", Some(r#"{"x":0}"#), None),
            (self.running, 1, "failed", None, Some("bad_output")),
            (self.running, 2, "in_progress", None, None),
            (self.running, 3, "pending", None, None),
            (self.running, 4, "pending", None, None),
            (self.done, 0, "completed", Some(r#"{"x":0}"#), None),
            (self.done, 1, "completed", Some(r#"{"x":1}"#), None),
            (self.cancelled, 0, "completed", Some(r#"{"x":0}"#), None),
            (self.cancelled, 1, "cancelled", None, None),
            (self.cancelled, 2, "cancelled", None, None),
        ]
    }

    async fn seed(&self, backend: Backend, url: String) {
        let jobs = [
            (self.running, "running", 5),
            (self.done, "completed", 2),
            (self.cancelled, "cancelled", 3),
        ];
        match backend {
            Backend::Sqlite => {
                let mut c = sqlx::sqlite::SqliteConnection::connect(&url).await.unwrap();
                for (id, status, n) in jobs {
                    sqlx::query(
                        "insert into jobs (id, status, config, num_records, seed, run_config, \
                         created_at, updated_at) values ($1, $2, '{}', $3, 7, '{}', 1, 1)",
                    )
                    .bind(id)
                    .bind(status)
                    .bind(n)
                    .execute(&mut c)
                    .await
                    .unwrap();
                }
                for (i, (job, idx, status, values, code)) in self.records().into_iter().enumerate()
                {
                    let id = if i == 0 { self.traced } else { Uuid::now_v7() };
                    let owner = (status == "in_progress").then_some("gone");
                    sqlx::query(
                        "insert into records (id, job_id, idx, status, \"values\", attempts, \
                         lease_owner, lease_expires_at, error_code, created_at, updated_at) \
                         values ($1, $2, $3, $4, $5, 1, $6, $7, $8, 1, 1)",
                    )
                    .bind(id)
                    .bind(job)
                    .bind(idx)
                    .bind(status)
                    .bind(values)
                    .bind(owner)
                    .bind(owner.map(|_| i64::MAX))
                    .bind(code)
                    .execute(&mut c)
                    .await
                    .unwrap();
                }
                sqlx::query(
                    "insert into traces (record_id, column_name, messages, created_at, \
                     updated_at) values ($1, 'answer', '[{\"role\":\"user\"}]', 1, 1)",
                )
                .bind(self.traced)
                .execute(&mut c)
                .await
                .unwrap();
            }
            Backend::Postgres => {
                let mut c = sqlx::postgres::PgConnection::connect(&url).await.unwrap();
                for (id, status, n) in jobs {
                    sqlx::query(
                        "insert into jobs (id, status, config, num_records, seed, run_config) \
                         values ($1, $2, '{}', $3, 7, '{}')",
                    )
                    .bind(id)
                    .bind(status)
                    .bind(i64::from(n))
                    .execute(&mut c)
                    .await
                    .unwrap();
                }
                for (i, (job, idx, status, values, code)) in self.records().into_iter().enumerate()
                {
                    let id = if i == 0 { self.traced } else { Uuid::now_v7() };
                    let owner = (status == "in_progress").then_some("gone");
                    sqlx::query(
                        "insert into records (id, job_id, idx, status, \"values\", attempts, \
                         lease_owner, lease_expires_at, error_code) \
                         values ($1, $2, $3, $4, $5::jsonb, 1, $6, \
                                 case when $6 is null then null \
                                      else now() + interval '1 hour' end, $7)",
                    )
                    .bind(id)
                    .bind(job)
                    .bind(idx)
                    .bind(status)
                    .bind(values)
                    .bind(owner)
                    .bind(code)
                    .execute(&mut c)
                    .await
                    .unwrap();
                }
                sqlx::query(
                    "insert into traces (record_id, column_name, messages) \
                     values ($1, 'answer', '[{\"role\":\"user\"}]')",
                )
                .bind(self.traced)
                .execute(&mut c)
                .await
                .unwrap();
            }
        }
    }
}

mod an_old_database_is_upgraded {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        run(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        run(Backend::Postgres).await;
    }
}

async fn run(backend: Backend) {
    let old = Old::new();
    let db = TestDb::upgraded_from(backend, 6, |url| old.seed(backend, url)).await;
    let store = &*db.store;
    let (running, done, cancelled) = (JobId(old.running), JobId(old.done), JobId(old.cancelled));

    // Finished jobs keep their results; cancelled records are a count now, not rows.
    assert_eq!(
        counts(store, done).await,
        JobCounts {
            completed: 2,
            ..Default::default()
        }
    );
    assert_eq!(
        counts(store, cancelled).await,
        JobCounts {
            completed: 1,
            cancelled: 2,
            ..Default::default()
        }
    );
    assert_eq!(
        store
            .list_records(
                cancelled,
                None,
                synthgate::store::RecordSelect::default(),
                10
            )
            .await
            .unwrap()
            .len(),
        1
    );

    // The running job: its results kept (trace included), the other three to run.
    assert_eq!(
        counts(store, running).await,
        JobCounts {
            pending: 3,
            completed: 1,
            failed: 1,
            ..Default::default()
        }
    );
    let rows = store
        .list_records(running, None, synthgate::store::RecordSelect::default(), 10)
        .await
        .unwrap();
    let got: Vec<_> = rows.iter().map(|r| (r.index, r.status)).collect();
    assert_eq!(
        got,
        [(0, RecordStatus::Completed), (1, RecordStatus::Failed)]
    );
    assert_eq!(store.get_traces(rows[0].id, None).await.unwrap().len(), 1);
    let failed = store
        .list_records(
            running,
            None,
            synthgate::store::RecordSelect::status(Some(RecordStatus::Failed)),
            10,
        )
        .await
        .unwrap();
    assert_eq!(failed.iter().map(|r| r.index).collect::<Vec<_>>(), [1]);

    // The next claim takes exactly the records without a result, as one chunk.
    let c = claim(store, "w", 10, LONG).await;
    let got: Vec<_> = c
        .iter()
        .map(|r| (r.job_id, r.index, r.chunk_todo))
        .collect();
    assert_eq!(got, [(running, 2, 3), (running, 3, 3), (running, 4, 3)]);
    assert!(c.iter().all(|r| r.lease_expiries == 0));
    let results: Vec<_> = c
        .iter()
        .map(|r| completed(r, json!({"x": r.index})))
        .collect();
    assert_eq!(
        store.complete_records("w", &results).await.unwrap().len(),
        3
    );
    assert_eq!(store.finalize_jobs(&[running]).await.unwrap(), [running]);
    assert_eq!(job(store, running).await.status, JobStatus::Completed);
    let c = counts(store, running).await;
    assert_eq!((c.completed, c.failed, c.total()), (4, 1, 5));
    assert_eq!(db.count("select count(*) from chunks").await, 0);
}
