//! What the job service's reads cost in store round trips: a job summary is one, for one job
//! as for a page of them, and a job stored before its column list was kept still shows it
//! (from its plan) without another.

use std::sync::Arc;

use serde_json::json;
use synthgate::queue::Database;

use super::spy::{Poison, Spy};
use super::{create, new_job};
use crate::db::{TestDb, both_backends};

both_backends!(a_job_or_a_page_of_jobs_is_one_round_trip);

async fn a_job_or_a_page_of_jobs_is_one_round_trip(db: TestDb) {
    let spy = Arc::new(Spy::new(&db, Poison::Pass));
    let store: Arc<dyn Database> = spy.clone();
    let jobs = super::spy::job_service(store.clone());
    let mut ids = Vec::new();
    for _ in 0..3 {
        let mut job = new_job(Some("a"), 2);
        job.config = json!({"columns": [
            {"name": "x", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["a", "b"]}},
            {"name": "y", "column_type": "expression", "expr": "{{ x }}"}
        ]});
        ids.push(create(&*store, &job).await.id);
    }
    // The first job as stored before the column list was kept: its plan gives it.
    forget_columns(&db, ids[0]).await;
    spy.take_calls();

    let one = jobs.summary(ids[1], Some("a")).await.unwrap();
    assert_eq!(spy.take_calls(), ["job_summaries"]);
    assert_eq!(
        one.job.output_columns.as_deref(),
        Some(&["x".to_owned()][..]),
        "as stored"
    );
    assert_eq!(one.counts.pending, 2);

    let page = jobs
        .jobs(Some("a"), None, 20, &Default::default())
        .await
        .unwrap();
    assert_eq!(
        spy.take_calls(),
        ["job_summaries"],
        "one query for the page"
    );
    assert_eq!(page.items.len(), 3);
    assert!(!page.more);
    let legacy = page.items.iter().find(|s| s.job.id == ids[0]).unwrap();
    assert_eq!(
        legacy.job.output_columns.as_deref(),
        Some(&["x".to_owned(), "y".to_owned()][..]),
        "compiled from the stored config"
    );
}

/// Sets a job's `output_columns` to null, as a job stored before the column existed has it.
async fn forget_columns(db: &TestDb, id: synthgate::domain::JobId) {
    let sql = "update jobs set output_columns = null where id = $1";
    if db.url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
        sqlx::query(sql).bind(id.0).execute(&pool).await.unwrap();
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(&db.url).await.unwrap();
        sqlx::query(sql).bind(id.0).execute(&pool).await.unwrap();
        pool.close().await;
    }
}
