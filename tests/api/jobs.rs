//! Job lifecycle over HTTP, on both backends: submit, progress, records, exports, cancel,
//! idempotency, determinism, early shutdown.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{
    sampler_config, spawn_app, spawn_app_with, spawn_slow_worker_app, status_json,
};

const N: u64 = 10_000;

async fn ten_thousand_records_complete_and_export(backend: Backend) {
    let app = spawn_app(backend).await;
    let (status, job) = app
        .create_job(&json!({"config": sampler_config(), "num_records": N, "seed": 7}))
        .await;
    assert_eq!(status, 202, "{job}");
    assert_eq!(job["status"], "queued");
    assert_eq!(job["counts"]["total"], N);
    assert_eq!(
        job["columns"],
        json!(["topic", "difficulty", "id", "title", "hard"])
    );
    let id = job["id"].as_str().unwrap().to_owned();

    let done = app.wait_for_job(&id, Duration::from_secs(120)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], N);
    assert_eq!(done["counts"]["failed"], 0);
    assert!(done["finished_at"].is_string());

    // Every record is retrievable, once, with its values; the dropped column is absent.
    let records = app.all_records(&id).await;
    assert_eq!(records.len() as u64, N);
    let indices: HashSet<u64> = records
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices.len() as u64, N);
    let sample = &records[123];
    let values = &sample["values"];
    assert!(
        values.get("secret").is_none(),
        "dropped column leaked: {values}"
    );
    let topic = values["topic"].as_str().unwrap();
    assert!(["math", "history", "art"].contains(&topic));
    let difficulty = values["difficulty"].as_f64().unwrap();
    assert!((1.0..=10.0).contains(&difficulty));
    assert_eq!(
        values["title"].as_str().unwrap(),
        format!("{} level {}", topic.to_uppercase(), values["difficulty"])
    );
    assert_eq!(values["hard"].as_bool().unwrap(), difficulty > 5.0);

    let (status, one) = app
        .get(&format!("/v1/records/{}", sample["id"].as_str().unwrap()))
        .await;
    assert_eq!(status, 200);
    assert_eq!(one["values"], *values);
    assert_eq!(one["status"], "completed");

    // JSONL export: one line per record, in index order, equal to the stored values.
    let (status, jsonl) = app
        .get_text(&format!("/v1/jobs/{id}/records?format=jsonl"))
        .await;
    assert_eq!(status, 200);
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, N);
    assert_eq!(lines[123], *values);

    // CSV export: header + one row per record.
    let (status, csv) = app
        .get_text(&format!("/v1/jobs/{id}/records?format=csv"))
        .await;
    assert_eq!(status, 200);
    let mut rows = csv.lines();
    assert_eq!(rows.next().unwrap(), "topic,difficulty,id,title,hard");
    assert_eq!(rows.count() as u64, N);
    app.stop().await;
}
backends!(
    ten_thousand_records,
    ten_thousand_records_complete_and_export
);

async fn same_seed_same_values(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, job) = app
            .create_job(&json!({"config": sampler_config(), "num_records": 50, "seed": 42}))
            .await;
        assert_eq!(status, 202, "{job}");
        ids.push(job["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        app.wait_for_job(id, Duration::from_secs(30)).await;
    }
    let a = app.all_records(&ids[0]).await;
    let b = app.all_records(&ids[1]).await;
    let strip = |rs: &[Value]| rs.iter().map(|r| r["values"].clone()).collect::<Vec<_>>();
    assert_eq!(strip(&a), strip(&b));
    // A different seed gives different values.
    let (_, job) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 50, "seed": 43}))
        .await;
    let other = job["id"].as_str().unwrap().to_owned();
    app.wait_for_job(&other, Duration::from_secs(30)).await;
    assert_ne!(strip(&a), strip(&app.all_records(&other).await));
    app.stop().await;
}
backends!(determinism, same_seed_same_values);

async fn yaml_body_with_query_count(backend: Backend) {
    let app = spawn_app(backend).await;
    let yaml = yaml_serde::to_string(&sampler_config()).unwrap();
    let resp = app
        .client
        .post(app.url("/v1/jobs?num_records=25&seed=3"))
        .header("content-type", "application/yaml")
        .body(yaml)
        .send()
        .await
        .unwrap();
    let (status, job) = status_json(resp).await;
    assert_eq!(status, 202, "{job}");
    assert_eq!(job["num_records"], 25);
    assert_eq!(job["seed"], 3);
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(done["counts"]["completed"], 25);
    app.stop().await;
}
backends!(yaml_submission, yaml_body_with_query_count);

async fn idempotency_key_returns_the_same_job(backend: Backend) {
    let app = spawn_app(backend).await;
    let body = json!({"config": sampler_config(), "num_records": 5, "seed": 1});
    let post = |body: Value| {
        app.client
            .post(app.url("/v1/jobs"))
            .header("idempotency-key", "abc-123")
            .json(&body)
            .send()
    };
    let (s1, j1) = status_json(post(body.clone()).await.unwrap()).await;
    let (s2, j2) = status_json(post(body.clone()).await.unwrap()).await;
    assert_eq!((s1, s2), (202, 200));
    assert_eq!(j1["id"], j2["id"]);
    let (s3, e3) = status_json(
        post(json!({"config": sampler_config(), "num_records": 6}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s3, 409);
    assert_eq!(e3["error"]["code"], "idempotency_key_reused");
    let (_, list) = app.get("/v1/jobs").await;
    assert_eq!(
        list["jobs"].as_array().unwrap().len(),
        1,
        "a retry must not create a second job"
    );
    app.stop().await;
}
backends!(idempotency, idempotency_key_returns_the_same_job);

async fn cancel_stops_claiming(backend: Backend) {
    // One slow worker slot keeps most records pending long enough to cancel.
    let app = spawn_slow_worker_app(backend).await;
    let (_, job) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 100_000}))
        .await;
    let id = job["id"].as_str().unwrap().to_owned();
    let resp = app
        .client
        .post(app.url(&format!("/v1/jobs/{id}/cancel")))
        .send()
        .await
        .unwrap();
    let (status, after) = status_json(resp).await;
    assert_eq!(status, 200, "{after}");
    assert!(["cancelling", "cancelled"].contains(&after["status"].as_str().unwrap()));
    let done = app.wait_for_job(&id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "cancelled");
    let c = &done["counts"];
    assert_eq!(c["pending"], 0);
    assert_eq!(c["in_progress"], 0);
    assert!(c["cancelled"].as_u64().unwrap() > 90_000, "{c}");
    // A second cancel is a conflict, not a silent success.
    let resp = app
        .client
        .post(app.url(&format!("/v1/jobs/{id}/cancel")))
        .send()
        .await
        .unwrap();
    let (status, err) = status_json(resp).await;
    assert_eq!(status, 409);
    assert_eq!(err["error"]["code"], "job_finished");
    app.stop().await;
}
backends!(cancel, cancel_stops_claiming);

async fn failing_records_are_kept_and_stop_the_job(backend: Backend) {
    // The provider refuses connections (port 9, discard): every record fails with a classified
    // LLM error after one attempt. Its circuit never opens here (that would hold the records
    // back while it probes; tests/api/admission.rs tests it).
    let app = spawn_app_with(backend, |c| {
        c.llm.max_attempts = 1;
        c.llm.admission.failures_to_open = u32::MAX;
        c.model_providers = vec![
            serde_json::from_value(json!({"name": "mock", "endpoint": "http://127.0.0.1:9"}))
                .unwrap(),
        ];
        c.model_configs = vec![
            serde_json::from_value(json!({"alias": "m", "model": "x", "provider": "mock"}))
                .unwrap(),
        ];
    })
    .await;
    let config = json!({"columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category", "params": {"values": ["a"]}},
        {"name": "answer", "column_type": "llm-text", "model_alias": "m", "prompt": "About {{ topic }}"}
    ]});
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 200}))
        .await;
    assert_eq!(status, 202, "{job}");
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["error"]["code"], "error_rate_exceeded");
    let first = &done["first_errors"][0];
    assert_eq!(first["error"]["code"], "llm_connection_error", "{first}");
    assert_eq!(first["error"]["stage"], "llm");
    assert_eq!(first["error"]["column"], "answer");
    let c = &done["counts"];
    assert!(c["failed"].as_u64().unwrap() >= 10);
    assert_eq!(c["pending"], 0);
    // A failed record keeps the values generated before the failing column.
    let (_, failed) = app
        .get(&format!(
            "/v1/records/{}",
            first["record_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["values"]["topic"], "a");
    app.stop().await;
}
backends!(early_shutdown, failing_records_are_kept_and_stop_the_job);

async fn events_stream_progress_until_done(backend: Backend) {
    let app = spawn_app(backend).await;
    let (_, job) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 300}))
        .await;
    let id = job["id"].as_str().unwrap().to_owned();
    let events = app.job_events(&id, "").await;
    assert_eq!(events.first().map(|e| e.0.as_str()), Some("progress"));
    let (last_name, last) = events.last().unwrap();
    assert_eq!(last_name, "done");
    assert_eq!(last["status"], "completed");
    assert_eq!(last["counts"]["completed"], 300);
    let recorded: HashSet<u64> = events
        .iter()
        .filter(|e| e.0 == "record")
        .map(|e| e.1["index"].as_u64().unwrap())
        .collect();
    let record_events = events.iter().filter(|e| e.0 == "record").count();
    assert_eq!(
        recorded.len(),
        record_events,
        "a record event was sent twice"
    );

    // Reconnecting right after the job finished: the records that finished moments ago are
    // reported again, but `progress` still comes first (it used to follow them).
    let again = app.job_events(&id, "").await;
    let names: Vec<&str> = again.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names.first(), Some(&"progress"), "{names:?}");
    assert_eq!(names.last(), Some(&"done"), "{names:?}");
    app.stop().await;
}
backends!(events, events_stream_progress_until_done);

/// An expression that yields a NUL character (Postgres stores none, in `text` or `jsonb`)
/// fails its own records with `unstorable_value`, on both backends alike; the other records,
/// and another job writing at the same time, complete. Before, on Postgres, the whole batch
/// was refused and retried forever, holding every record in it.
async fn nul_values_fail_only_their_records(backend: Backend) {
    let app = spawn_app(backend).await;
    let config = json!({"columns": [
        {"name": "x", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["a", "b"]}},
        {"name": "y", "column_type": "expression", "expr": "{{ \"\\u0000\" if x == \"b\" else x }}"}
    ]});
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 40, "seed": 3,
                            "run_config": {"disable_early_shutdown": true}}))
        .await;
    assert_eq!(status, 202, "{job}");
    let (status, other) = app
        .create_job(&json!({"config": sampler_config(), "num_records": 40}))
        .await;
    assert_eq!(status, 202, "{other}");
    let id = job["id"].as_str().unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let c = &done["counts"];
    assert_eq!(
        c["completed"].as_u64().unwrap() + c["failed"].as_u64().unwrap(),
        40,
        "{c}"
    );
    assert!(c["failed"].as_u64().unwrap() > 0, "{c}");
    assert!(c["completed"].as_u64().unwrap() > 0, "{c}");
    for r in app.all_records(id).await {
        let x = r["values"]["x"].as_str().unwrap();
        if x == "b" {
            assert_eq!(r["status"], "failed", "{r}");
            assert_eq!(r["error"]["code"], "unstorable_value", "{r}");
            assert_eq!(r["error"]["column"], "y", "{r}");
            assert_eq!(r["error"]["stage"], "store", "{r}");
        } else {
            assert_eq!(r["status"], "completed", "{r}");
            assert_eq!(r["values"]["y"], x, "{r}");
        }
    }
    let other = app
        .wait_for_job(other["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(other["status"], "completed", "{other}");
    assert_eq!(other["counts"]["completed"], 40);
    app.stop().await;
}
backends!(nul_values, nul_values_fail_only_their_records);

/// A NUL character in what a job stores as given (config, column names, metadata, run
/// config) is refused at submit with `422 unstorable_value` naming the field, on both backends
/// (it was a 500 from Postgres), and nothing is stored.
async fn nul_in_a_submitted_field_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut bad_name = sampler_config();
    bad_name["data_designer"]["columns"][0]["name"] = json!("to\u{0}pic");
    let mut bad_category = sampler_config();
    bad_category["data_designer"]["columns"][0]["params"]["values"][1] = json!("h\u{0}");
    let cases = [
        (
            json!({"config": bad_name, "num_records": 1}),
            "config.data_designer.columns[0].name",
        ),
        (
            json!({"config": bad_category, "num_records": 1}),
            "config.data_designer.columns[0].params.values[1]",
        ),
        (
            json!({"config": sampler_config(), "num_records": 1,
                   "metadata": {"team": "data", "tags": ["ok", "n\u{0}"]}}),
            "metadata.tags[1]",
        ),
        (
            json!({"config": sampler_config(), "num_records": 1,
                   "metadata": {"k\u{0}": 1}}),
            "field 'metadata'",
        ),
        (
            json!({"config": sampler_config(), "num_records": 1,
                   "run_config": {"x\u{0}": 1}}),
            "field 'run_config'",
        ),
    ];
    for (body, field) in cases {
        let (status, err) = app.create_job(&body).await;
        assert_eq!(status, 422, "{err}");
        assert_eq!(err["error"]["code"], "unstorable_value", "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{field}: {message}");
    }
    let (status, list) = app.get("/v1/jobs").await;
    assert_eq!(status, 200);
    assert_eq!(list["jobs"], json!([]), "{list}");
    app.stop().await;
}
backends!(nul_at_submit, nul_in_a_submitted_field_is_refused);

/// Cancels racing the end of small jobs: every answer agrees with how the job ends. A `200`
/// job ends `cancelled` only if a record was cancelled (else `completed`: the cancel stopped
/// nothing); a `409 job_finished` job ended `completed`, nothing cancelled. Before, jobs ended
/// `cancelled` with every record completed, and a cancel could answer `200` with a finished
/// job.
async fn cancel_racing_completion_is_consistent(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut seen = HashSet::new();
    for round in 0..30 {
        let (status, job) = app
            .create_job(&json!({"config": sampler_config(), "num_records": 1 + round % 3}))
            .await;
        assert_eq!(status, 202, "{job}");
        let id = job["id"].as_str().unwrap().to_owned();
        // Alternate between cancelling at once and after the first look, to land on both
        // sides of the last write.
        if round % 2 == 1 {
            let _ = app.get(&format!("/v1/jobs/{id}")).await;
        }
        let resp = app
            .client
            .post(app.url(&format!("/v1/jobs/{id}/cancel")))
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        let done = app.wait_for_job(&id, Duration::from_secs(30)).await;
        let c = &done["counts"];
        let cancelled = c["cancelled"].as_u64().unwrap();
        assert_eq!(c["pending"], 0, "{done}");
        assert_eq!(c["in_progress"], 0, "{done}");
        match status {
            200 => {
                let want = if cancelled > 0 {
                    "cancelled"
                } else {
                    "completed"
                };
                assert_eq!(done["status"], want, "{done}");
                // The body is the job read just after the cancel's transaction (which left it
                // `cancelling` or `cancelled`): the records in flight may have finished it in
                // between, so it may show the job's end already, never another one.
                let at = body["status"].as_str().unwrap();
                assert!(["cancelling", want].contains(&at), "{body}");
                seen.insert(want);
            }
            409 => {
                assert_eq!(body["error"]["code"], "job_finished", "{body}");
                assert_eq!(done["status"], "completed", "{done}");
                assert_eq!(cancelled, 0, "{done}");
                seen.insert("finished");
            }
            other => panic!("cancel answered {other}: {body}"),
        }
    }
    eprintln!("{backend:?}: outcomes {seen:?}");
    app.stop().await;
}
backends!(cancel_race, cancel_racing_completion_is_consistent);

/// A job's last batch is written as soon as no other record is on its way to the writer, not
/// after `write_interval_ms`: with the interval at ten minutes, a one-record job (a record
/// task of its own) and a 50-record job (CPU-only chunks) still finish within the wait below.
async fn the_last_batch_does_not_wait_out_the_write_interval(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.workers.write_interval_ms = 600_000).await;
    for n in [1, 50] {
        let (status, job) = app
            .create_job(&json!({"config": sampler_config(), "num_records": n}))
            .await;
        assert_eq!(status, 202, "{job}");
        let done = app
            .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(60))
            .await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["counts"]["completed"], n, "{done}");
    }
    app.stop().await;
}
backends!(
    last_batch,
    the_last_batch_does_not_wait_out_the_write_interval
);

/// With several batch writes at once (`workers.writers`; Postgres runs them side by side,
/// SQLite one at a time), small batches of one job still store every record exactly once, and
/// the job's counts and status come out as with one writer.
async fn several_writers_store_each_record_once(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.workers.writers = Some(4);
        c.workers.write_batch_size = 8;
    })
    .await;
    let n = 600;
    let (status, job) = app
        .create_job(&json!({"config": sampler_config(), "num_records": n}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(120)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], n, "{done}");
    assert_eq!(done["counts"]["failed"], 0, "{done}");
    let records = app.all_records(id).await;
    let indexes: HashSet<u64> = records
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert_eq!(records.len(), n, "one record per index");
    assert_eq!(indexes, (0..n as u64).collect(), "every index once");
    app.stop().await;
}
backends!(several_writers, several_writers_store_each_record_once);
