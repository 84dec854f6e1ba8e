//! Seeds from stored datasets (issue 12): a `local` seed path resolved by file name against
//! the caller's uploads, bound to the job at submit, and read block by block while records run;
//! `ordered`/`shuffle` and DataDesigner's `index_range`/`partition_block` on them; a seed of a
//! million rows read a few blocks at a time; and what happens when the dataset goes away.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate::auth::Caller;
use synthgate::jobs::{JobService, NumRecords, SubmitRequest};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm, spawn_app, status_json};

const WAIT: Duration = Duration::from_secs(60);

/// Uploads `body` as dataset file `name`; returns the dataset.
pub(crate) async fn upload(app: &TestApp, name: &str, body: impl Into<reqwest::Body>) -> Value {
    let resp = app
        .client
        .post(app.url(&format!("/v1/datasets?name={name}")))
        .body(body)
        .send()
        .await
        .expect("upload");
    let (status, dataset) = status_json(resp).await;
    assert!(status == 201 || status == 200, "{status}: {dataset}");
    dataset
}

/// A CSV of one column `i` holding `0..n` (and, when `tag` is given, a column `tag` too).
fn numbers_csv(n: u64) -> String {
    let mut s = String::from("i,label\n");
    for i in 0..n {
        s.push_str(&format!("{i},row-{i}\n"));
    }
    s
}

/// A job of `n` records seeded by `seed_config`, with one expression reading the seed fields.
fn seeded_job(seed_config: Value, n: u32, expr: &str) -> Value {
    json!({
        "config": {
            "seed_config": seed_config,
            "columns": [{"name": "out", "column_type": "expression", "expr": expr}],
        },
        "num_records": n,
        "seed": 42,
    })
}

/// Submits `body`, waits for the job and returns its records' values by index.
async fn run(app: &TestApp, body: &Value) -> Vec<Value> {
    let (status, job) = app.create_job(body).await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let done = app.wait_for_job(&id, WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let mut records = app.all_records(&id).await;
    records.sort_by_key(|r| r["index"].as_u64());
    records
        .into_iter()
        .map(|r| {
            assert_eq!(r["status"], "completed", "{r}");
            r["values"].clone()
        })
        .collect()
}

fn field(rows: &[Value], name: &str) -> Vec<Value> {
    rows.iter().map(|r| r[name].clone()).collect()
}

/// `synthgate_seed_blocks_read_total` from `/metrics` (0 before the first read).
async fn blocks_read(app: &TestApp) -> u64 {
    let (status, text) = app.get_text("/metrics").await;
    assert_eq!(status, 200);
    text.lines()
        .find_map(|l| l.strip_prefix("synthgate_seed_blocks_read_total "))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

backends!(
    uploaded_csv_seed,
    seed_from_an_uploaded_csv_in_order_and_shuffled
);
async fn seed_from_an_uploaded_csv_in_order_and_shuffled(backend: Backend) {
    let app = spawn_app(backend).await;
    upload(&app, "people.csv", "name,age\nann,30\nbob,41\ncid,25\n").await;
    // The config names the file with the directories it had on the client's disk.
    let source = json!({"seed_type": "local", "path": "data/people.csv"});
    let ordered = run(
        &app,
        &seeded_job(json!({"source": source}), 7, "{{ name }}:{{ age + 1 }}"),
    )
    .await;
    assert_eq!(
        field(&ordered, "name"),
        json!(["ann", "bob", "cid", "ann", "bob", "cid", "ann"])
            .as_array()
            .unwrap()
            .clone()
    );
    // Typed as the CSV's column types: `age` is an integer, so `age + 1` is arithmetic.
    assert_eq!(ordered[1]["age"], 41);
    assert_eq!(ordered[1]["out"], "bob:42");

    let shuffled = run(
        &app,
        &seeded_job(
            json!({"source": source, "sampling_strategy": "shuffle"}),
            9,
            "{{ name }}",
        ),
    )
    .await;
    let names = field(&shuffled, "name");
    for pass in names.chunks(3) {
        let mut pass: Vec<&str> = pass.iter().map(|v| v.as_str().unwrap()).collect();
        pass.sort_unstable();
        assert_eq!(pass, ["ann", "bob", "cid"], "each pass uses every row once");
    }
    assert_ne!(
        names[..3],
        names[3..6],
        "each pass has its own order (seed 42)"
    );
    app.stop().await;
}

backends!(seed_selection, selection_strategies_pick_datadesigners_rows);
async fn selection_strategies_pick_datadesigners_rows(backend: Backend) {
    let app = spawn_app(backend).await;
    upload(&app, "numbers.csv", numbers_csv(10)).await;
    let source = json!({"seed_type": "local", "path": "numbers.csv"});
    let rows = |sel: Value| {
        seeded_job(
            json!({"source": source, "selection_strategy": sel}),
            5,
            "{{ i }}",
        )
    };
    let range = run(&app, &rows(json!({"start": 2, "end": 4}))).await;
    assert_eq!(field(&range, "i"), [2, 3, 4, 2, 3].map(Value::from));
    // 10 rows in 3 partitions: 3, 3 and the remaining 4 (DataDesigner's to_index_range).
    let last = run(&app, &rows(json!({"index": 2, "num_partitions": 3}))).await;
    assert_eq!(field(&last, "i"), [6, 7, 8, 9, 6].map(Value::from));
    let first = run(&app, &rows(json!({"index": 0, "num_partitions": 3}))).await;
    assert_eq!(field(&first, "i"), [0, 1, 2, 0, 1].map(Value::from));

    // Out of bounds for the dataset's 10 rows: DataDesigner's own messages.
    for (sel, want) in [
        (
            json!({"start": 5, "end": 10}),
            "Selection strategy 'end' index 10 is out of bounds for dataset size 10",
        ),
        (
            json!({"index": 0, "num_partitions": 11}),
            "Selection strategy 'num_partitions' 11 is out of bounds for dataset size 10",
        ),
    ] {
        let (status, body) = app.create_job(&rows(sel)).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["code"], "invalid_seed_config", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(want),
            "{body}"
        );
    }
    app.stop().await;
}

backends!(
    million_row_seed,
    a_million_row_seed_is_read_a_block_at_a_time
);
async fn a_million_row_seed_is_read_a_block_at_a_time(backend: Backend) {
    let app = spawn_app(backend).await;
    let dataset = upload(&app, "big.csv", numbers_csv(1_000_000)).await;
    assert_eq!(dataset["num_rows"], 1_000_000);
    let before = blocks_read(&app).await;
    let source = json!({"seed_type": "local", "path": "big.csv"});
    // The last of 4 partitions: rows 750,000.. (block 2,929 holds rows 749,824..750,079).
    let ordered = run(
        &app,
        &seeded_job(
            json!({"source": source,
                   "selection_strategy": {"index": 3, "num_partitions": 4}}),
            20,
            "{{ label }}",
        ),
    )
    .await;
    let want: Vec<Value> = (750_000..750_020).map(Value::from).collect();
    assert_eq!(field(&ordered, "i"), want);
    assert_eq!(ordered[19]["out"], "row-750019");
    let after_ordered = blocks_read(&app).await;
    assert_eq!(
        after_ordered - before,
        1,
        "20 ordered records (and the submit's probe) share one block"
    );

    // Shuffled over all million rows: at most one block per record (plus the probe's).
    let shuffled = run(
        &app,
        &seeded_job(
            json!({"source": source, "sampling_strategy": "shuffle"}),
            20,
            "{{ i }}",
        ),
    )
    .await;
    let read = blocks_read(&app).await - after_ordered;
    assert!(
        (1..=21).contains(&read),
        "{read} blocks read for 20 shuffled records"
    );
    let mut rows: Vec<u64> = field(&shuffled, "i")
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    rows.sort_unstable();
    rows.dedup();
    assert_eq!(rows.len(), 20, "a pass never repeats a row");
    assert!(
        rows.iter().any(|&r| r >= 256),
        "a shuffle reaches past the first block: {rows:?}"
    );
    app.stop().await;
}

backends!(seed_glob, a_glob_reads_every_matching_upload_in_name_order);
async fn a_glob_reads_every_matching_upload_in_name_order(backend: Backend) {
    let app = spawn_app(backend).await;
    upload(&app, "part-b.csv", "v\nb1\nb2\n").await;
    upload(&app, "part-a.csv", "v\nold\n").await;
    upload(&app, "other.csv", "v\nzzz\n").await;
    // Newest wins among equal names.
    upload(&app, "part-a.csv", "v\na1\n").await;
    let source = json!({"seed_type": "local", "path": "seeds/part-*.csv"});
    let rows = run(&app, &seeded_job(json!({"source": source}), 4, "{{ v }}")).await;
    assert_eq!(field(&rows, "v"), ["a1", "b1", "b2", "a1"].map(Value::from));

    // Files of a glob need the same columns.
    upload(&app, "part-c.csv", "w\nc1\n").await;
    let (status, body) = app
        .create_job(&seeded_job(json!({"source": source}), 1, "x"))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_seed_config", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("different columns"),
        "{body}"
    );
    app.stop().await;
}

backends!(
    unknown_seed_file,
    an_unknown_seed_file_is_a_422_naming_the_path
);
async fn an_unknown_seed_file_is_a_422_naming_the_path(backend: Backend) {
    let app = spawn_app(backend).await;
    upload(&app, "known.csv", "a\n1\n").await;
    for path in ["missing.csv", "data/*.parquet"] {
        let source = json!({"seed_type": "local", "path": path});
        for route in ["/v1/jobs", "/v1/preview"] {
            let resp = app
                .client
                .post(app.url(route))
                .json(&seeded_job(json!({"source": source}), 1, "x"))
                .send()
                .await
                .unwrap();
            let (status, body) = status_json(resp).await;
            assert_eq!(status, 422, "{route} {path}: {body}");
            assert_eq!(body["error"]["code"], "seed_dataset_not_found", "{body}");
            let issue = &body["error"]["details"][0];
            assert_eq!(issue["field"], "seed_config.source.path", "{body}");
            let message = issue["message"].as_str().unwrap();
            assert!(
                message.contains(path) && message.contains("POST /v1/datasets"),
                "{body}"
            );
        }
    }
    // Sources no server serves say what to do instead.
    let (status, body) = app
        .create_job(&seeded_job(json!({"source": {"seed_type": "df"}}), 1, "x"))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "unsupported_seed_source", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("to_parquet"),
        "{body}"
    );
    // A seed field the dataset lacks is the same 422 as for inline rows.
    let source = json!({"seed_type": "local", "path": "known.csv"});
    let mut job = seeded_job(json!({"source": source}), 1, "{{ nope }}");
    job["config"]["columns"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "b", "column_type": "seed-dataset"}));
    let (status, body) = app.create_job(&job).await;
    assert_eq!(status, 422, "{body}");
    let codes: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"invalid_seed_config"), "{body}");
    assert!(codes.contains(&"unknown_reference"), "{body}");
    app.stop().await;
}

backends!(
    bound_seed_delete,
    a_bound_dataset_cannot_be_deleted_while_its_job_runs
);
async fn a_bound_dataset_cannot_be_deleted_while_its_job_runs(backend: Backend) {
    // Slow model answers keep the job running while the delete is tried.
    let (app, _mock) = app_with_mock_llm(backend, json!({"faults": {"latency_ms": 300}}), |c| {
        c.workers.count = 1
    })
    .await;
    let dataset = upload(
        &app,
        "topics.jsonl",
        "{\"topic\": \"tea\"}\n{\"topic\": \"rain\"}\n",
    )
    .await;
    let id = dataset["id"].as_str().unwrap();
    let body = json!({
        "config": {
            "seed_config": {"source": {"seed_type": "local", "path": "topics.jsonl"}},
            "columns": [{"name": "text", "column_type": "llm-text", "model_alias": "writer",
                         "prompt": "Write about {{ topic }}"}],
        },
        "num_records": 4,
    });
    let (status, job) = app.create_job(&body).await;
    assert_eq!(status, 202, "{job}");
    let job_id = job["id"].as_str().unwrap().to_owned();
    let delete = || {
        app.client
            .delete(app.url(&format!("/v1/datasets/{id}")))
            .send()
    };
    let (status, refused) = status_json(delete().await.unwrap()).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "dataset_in_use", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&job_id),
        "{refused}"
    );
    let done = app.wait_for_job(&job_id, WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");

    // Finished: the dataset may go, and the job's records and export stay.
    assert_eq!(delete().await.unwrap().status(), 204);
    let (status, csv) = app
        .get_text(&format!("/v1/jobs/{job_id}/records?format=csv"))
        .await;
    assert_eq!(status, 200, "{csv}");
    assert!(csv.starts_with("topic,text"), "{csv}");
    assert_eq!(csv.lines().count(), 5, "{csv}");
    // A new job naming the file is refused until it is uploaded again.
    let (status, body) = app.create_job(&body).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "seed_dataset_not_found", "{body}");
    app.stop().await;
}

/// A job submitted through one service (no workers) and run by another replica on the same
/// Postgres database, which compiles the plan itself from the job's bound dataset ids: its
/// records read the same seed rows as a job that replica compiled at submit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_compiling_the_plan_itself_reads_the_same_seed_rows() {
    let app = spawn_app(Backend::Postgres).await;
    upload(&app, "numbers.csv", numbers_csv(600)).await;
    let body = seeded_job(
        json!({"source": {"seed_type": "local", "path": "numbers.csv"},
               "sampling_strategy": "shuffle",
               "selection_strategy": {"start": 100, "end": 599}}),
        30,
        "{{ label }}",
    );
    // The other replica: a job service of its own over the same database, without workers.
    let other = JobService::new(
        app.db.open_another().await,
        Default::default(),
        Default::default(),
        std::sync::Arc::new(
            synthgate::llm::LlmClient::new(&[], Default::default()).expect("an LLM client"),
        ),
        synthgate::tools::ToolHub::empty(),
    );
    let req = SubmitRequest {
        config: body["config"].clone(),
        num_records: NumRecords::Count(30),
        seed: Some(42),
        metadata: None,
        run_config: None,
        idempotency_key: None,
        owner: None,
        name: None,
        cache: None,
        max_cost: None,
    };
    let (elsewhere, created) = other.submit(req, &Caller::default()).await.unwrap();
    assert!(created);
    let elsewhere = elsewhere.job.id.to_string();
    let done = app.wait_for_job(&elsewhere, WAIT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let mut theirs = app.all_records(&elsewhere).await;
    theirs.sort_by_key(|r| r["index"].as_u64());
    let theirs: Vec<Value> = theirs.into_iter().map(|r| r["values"].clone()).collect();

    let ours = run(&app, &body).await;
    assert_eq!(theirs, ours);
    assert!(
        field(&ours, "i")
            .iter()
            .all(|i| (100..600).contains(&i.as_u64().unwrap()))
    );
    app.stop().await;
}
