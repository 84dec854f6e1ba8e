//! `DELETE /v1/jobs/{id}`: a finished job goes with everything of it (records, traces, usage,
//! counts) and nothing of another job; a job not finished, or another key's, stays.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{app_with_mock_llm, sampler_config, spawn_slow_worker_app, status_json};

fn config() -> Value {
    json!({"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
         "params": {"low": 1, "high": 9}, "convert_to": "int"},
        {"name": "say", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Say {{ n }}.", "with_trace": "all_messages"}
    ]})
}

/// Rows of the tables a job's rows live in, over every job.
async fn rows(app: &crate::helpers::TestApp) -> [i64; 5] {
    [
        app.db.count("select count(*) from jobs").await,
        app.db.count("select count(*) from records").await,
        app.db.count("select count(*) from traces").await,
        app.db.count("select count(*) from job_usage").await,
        app.db.count("select count(*) from job_record_counts").await,
    ]
}

async fn a_finished_job_is_deleted_with_everything_of_it(backend: Backend) {
    let (app, _mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"text": "hello"}}]}),
        |c| {
            c.auth = serde_json::from_value(json!({"api_keys": [
                {"name": "alice", "key": "alice-key-0123456789abcdef"},
                {"name": "bob", "key": "bob-key-0123456789abcdef"}]}))
            .unwrap();
        },
    )
    .await;
    let submit = |n: u32| {
        app.client
            .post(app.url("/v1/jobs"))
            .bearer_auth("alice-key-0123456789abcdef")
            .json(&json!({"config": config(), "num_records": n}))
            .send()
    };
    let (_, gone) = status_json(submit(3).await.unwrap()).await;
    let (_, kept) = status_json(submit(2).await.unwrap()).await;
    let gone = gone["id"].as_str().unwrap().to_owned();
    let kept = kept["id"].as_str().unwrap().to_owned();
    let wait = |id: String| {
        let app = &app;
        async move {
            for _ in 0..300 {
                let resp = app
                    .client
                    .get(app.url(&format!("/v1/jobs/{id}")))
                    .bearer_auth("alice-key-0123456789abcdef")
                    .send()
                    .await
                    .unwrap();
                let (_, job) = status_json(resp).await;
                if job["status"] == "completed" {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("job {id} did not complete");
        }
    };
    wait(gone.clone()).await;
    wait(kept.clone()).await;
    let before = rows(&app).await;
    assert_eq!(
        &before[..3],
        &[2, 5, 5],
        "jobs, records, traces: {before:?}"
    );

    let delete = |id: &str, key: &str| {
        app.client
            .delete(app.url(&format!("/v1/jobs/{id}")))
            .bearer_auth(key.to_owned())
            .send()
    };
    // Another key's job is not found, and stays.
    let (status, err) = status_json(delete(&gone, "bob-key-0123456789abcdef").await.unwrap()).await;
    assert_eq!(
        (status, &err["error"]["code"]),
        (404, &json!("job_not_found"))
    );
    assert_eq!(rows(&app).await, before);

    let resp = delete(&gone, "alice-key-0123456789abcdef").await.unwrap();
    assert_eq!(resp.status(), 204);
    let after = rows(&app).await;
    // One job's rows left: its 2 records and traces, one usage row, one counts row.
    assert_eq!(
        after,
        [1, 2, 2, before[3] / 2, before[4] / 2],
        "{before:?} → {after:?}"
    );
    let (status, _) = status_json(
        app.client
            .get(app.url(&format!("/v1/jobs/{gone}")))
            .bearer_auth("alice-key-0123456789abcdef")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    // A second delete: not found.
    let (status, _) = status_json(delete(&gone, "alice-key-0123456789abcdef").await.unwrap()).await;
    assert_eq!(status, 404);
    // The other job is whole.
    let resp = app
        .client
        .get(app.url(&format!("/v1/jobs/{kept}/records")))
        .bearer_auth("alice-key-0123456789abcdef")
        .send()
        .await
        .unwrap();
    let (status, page) = status_json(resp).await;
    assert_eq!(status, 200);
    assert_eq!(page["records"].as_array().unwrap().len(), 2, "{page}");
    app.stop().await;
}
backends!(
    delete_finished,
    a_finished_job_is_deleted_with_everything_of_it
);

async fn a_job_not_finished_is_not_deleted(backend: Backend) {
    // One slow worker slot keeps most records pending long enough to try.
    let app = spawn_slow_worker_app(backend).await;
    let (_, job) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 100_000}))
        .await;
    let id = job["id"].as_str().unwrap();
    let resp = app
        .client
        .delete(app.url(&format!("/v1/jobs/{id}")))
        .send()
        .await
        .unwrap();
    let (status, err) = status_json(resp).await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "job_not_finished", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancel it first"),
        "{err}"
    );
    let (status, _) = app.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(status, 200);
    // Cancelled, it can go.
    app.client
        .post(app.url(&format!("/v1/jobs/{id}/cancel")))
        .send()
        .await
        .unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    let resp = app
        .client
        .delete(app.url(&format!("/v1/jobs/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(app.db.count("select count(*) from jobs").await, 0);
    app.stop().await;
}
backends!(delete_unfinished, a_job_not_finished_is_not_deleted);
