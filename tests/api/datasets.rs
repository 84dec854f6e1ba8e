//! `/v1/datasets` against the real service on both backends: uploads of each format read back
//! through list, get and preview with their inferred types; idempotent re-uploads; oversize
//! uploads and malformed files refused with nothing stored; keys that see only their own
//! datasets; deletes refused while a job reads the dataset.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate::config::Config;
use synthgate::datasets::DatasetId;
use synthgate::store::{CreateOutcome, NewJob};

use crate::backends;
use crate::db::{Backend, TestDb};
use crate::helpers::{
    TestApp, app_with_mock_llm, spawn_app, spawn_app_on, spawn_app_with, status_json, test_config,
};

const KEY_A: &str = "key-a-0123456789abcdef";
const KEY_B: &str = "key-b-0123456789abcdef";

/// POSTs `bytes` as a dataset file; `query` is the query string after `?`.
async fn upload(app: &TestApp, key: Option<&str>, query: &str, bytes: Vec<u8>) -> (u16, Value) {
    let mut req = app
        .client
        .post(app.url(&format!("/v1/datasets?{query}")))
        .body(bytes);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    status_json(req.send().await.unwrap()).await
}

async fn call(app: &TestApp, method: &str, path: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = app.client.request(method.parse().unwrap(), app.url(path));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    status_json(req.send().await.unwrap()).await
}

/// `[(name, type)]` of a dataset response.
fn types(d: &Value) -> Vec<(String, String)> {
    d["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["type"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// Rows stored in `datasets` and `dataset_blocks`, whatever their status.
async fn stored(app: &TestApp) -> (i64, i64) {
    (
        app.db.count("select count(*) from datasets").await,
        app.db.count("select count(*) from dataset_blocks").await,
    )
}

async fn csv_and_jsonl_read_back(backend: Backend) {
    let app = spawn_app(backend).await;
    // A BOM, CRLF, a quoted field with a comma and a newline, pandas NA strings, booleans in
    // any case, an integer column with a gap, numbers with exponents.
    let csv = "\u{feff}id,name,score,ok,gap,empty\r\n\
               1,\"Smith, Ann\",1.5,TRUE,10,\r\n\
               2,\"two\nlines\",2e3,false,,NA\r\n\
               3,NA,-4,True,30,\r\n";
    let (status, d) = upload(&app, None, "name=people.csv", csv.as_bytes().to_vec()).await;
    assert_eq!(status, 201, "{d}");
    assert_eq!(d["name"], "people.csv");
    assert_eq!(d["format"], "csv");
    assert_eq!(d["source"], "upload");
    assert_eq!(d["num_rows"], 3);
    assert_eq!(d["size_bytes"], csv.len());
    assert!(
        d.get("owner").is_none() && d.get("source_ref").is_none(),
        "{d}"
    );
    assert_eq!(
        types(&d),
        pairs(&[
            ("id", "integer"),
            ("name", "string"),
            ("score", "float"),
            ("ok", "boolean"),
            ("gap", "integer"),
            ("empty", "null"),
        ])
    );
    let id = d["id"].as_str().unwrap().to_owned();
    let (status, got) = call(&app, "GET", &format!("/v1/datasets/{id}"), None).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["sha256"], d["sha256"]);
    assert_eq!(
        got["preview"],
        json!([
            {"id": 1, "name": "Smith, Ann", "score": 1.5, "ok": true, "gap": 10, "empty": null},
            {"id": 2, "name": "two\nlines", "score": 2000.0, "ok": false, "gap": null, "empty": null},
            {"id": 3, "name": null, "score": -4.0, "ok": true, "gap": 30, "empty": null},
        ])
    );

    // JSONL: blank lines skipped, a key missing from a row is null there, ints and floats
    // mixed make float, nested values kept.
    let jsonl = "{\"q\": \"a\", \"n\": 1, \"tags\": [\"x\"]}\n\n\
                 {\"q\": \"b\", \"n\": 2.5, \"meta\": {\"k\": true}}\n";
    let (status, j) = upload(&app, None, "name=qa.ndjson", jsonl.as_bytes().to_vec()).await;
    assert_eq!(status, 201, "{j}");
    assert_eq!(j["format"], "jsonl");
    assert_eq!(
        types(&j),
        pairs(&[
            ("q", "string"),
            ("n", "float"),
            ("tags", "array"),
            ("meta", "object")
        ])
    );
    let (_, got) = call(
        &app,
        "GET",
        &format!("/v1/datasets/{}", j["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(
        got["preview"],
        json!([
            {"q": "a", "n": 1, "tags": ["x"], "meta": null},
            {"q": "b", "n": 2.5, "tags": null, "meta": {"k": true}},
        ])
    );

    // The same bytes under the same name: 200 and the same dataset, nothing new stored.
    let before = stored(&app).await;
    let (status, again) = upload(&app, None, "name=people.csv", csv.as_bytes().to_vec()).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["id"], d["id"]);
    assert_eq!(stored(&app).await, before);
    // Under another name it is another dataset; `format` overrides the extension.
    let (status, other) = upload(
        &app,
        None,
        "name=people.txt&format=csv",
        csv.as_bytes().to_vec(),
    )
    .await;
    assert_eq!(status, 201, "{other}");
    assert_ne!(other["id"], d["id"]);

    // Lists: newest first, filters, pages.
    let (status, list) = call(&app, "GET", "/v1/datasets", None).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["people.txt", "qa.ndjson", "people.csv"]);
    assert!(list.get("next_cursor").is_none(), "{list}");
    let sha = d["sha256"].as_str().unwrap();
    let (_, by_sha) = call(&app, "GET", &format!("/v1/datasets?sha256={sha}"), None).await;
    assert_eq!(by_sha["datasets"].as_array().unwrap().len(), 2, "{by_sha}");
    let (_, by_name) = call(&app, "GET", "/v1/datasets?name=people.csv", None).await;
    assert_eq!(by_name["datasets"][0]["id"], d["id"], "{by_name}");
    let (_, page) = call(&app, "GET", "/v1/datasets?limit=2", None).await;
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let (_, rest) = call(
        &app,
        "GET",
        &format!("/v1/datasets?limit=2&cursor={cursor}"),
        None,
    )
    .await;
    assert_eq!(rest["datasets"][0]["id"], d["id"], "{rest}");

    // Delete: 204, then 404.
    let (status, _) = call(&app, "DELETE", &format!("/v1/datasets/{id}"), None).await;
    assert_eq!(status, 204);
    let (status, gone) = call(&app, "GET", &format!("/v1/datasets/{id}"), None).await;
    assert_eq!(status, 404, "{gone}");
    assert_eq!(gone["error"]["code"], "dataset_not_found");
    let (status, bad) = call(&app, "GET", "/v1/datasets/not-a-uuid", None).await;
    assert_eq!(
        (status, bad["error"]["code"].as_str()),
        (400, Some("invalid_id"))
    );
    app.stop().await;
}
backends!(csv_and_jsonl_round_trip, csv_and_jsonl_read_back);

async fn parquet_from_pyarrow_reads_back(backend: Backend) {
    let Some(python) = crate::parquet::pyarrow_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
import datetime, sys
import pyarrow as pa, pyarrow.parquet as pq
t = pa.table({
    "id": pa.array([1, 2, 3], pa.int64()),
    "small": pa.array([1, None, 3], pa.int8()),
    "score": pa.array([0.5, None, 2.25], pa.float64()),
    "ok": pa.array([True, False, None]),
    "name": pa.array(["a", "ü", None]),
    "at": pa.array([datetime.datetime(2024, 5, 1, 12), None,
                    datetime.datetime(2024, 5, 2, 0, 0, 0, 250000)], pa.timestamp("us")),
    "at_ns": pa.array([1714564800000000001, None, 0], pa.timestamp("ns", tz="UTC")),
    "day": pa.array([datetime.date(2024, 5, 1), None, datetime.date(1999, 12, 31)]),
    "tags": pa.array([["x", "y"], [], None]),
    "meta": pa.array([{"k": 1, "s": "v"}, None, {"k": 3, "s": None}]),
    "nothing": pa.array([None, None, None], pa.null()),
})
pq.write_table(t, sys.argv[1])
pq.write_table(t, sys.argv[2], compression="gzip")
"#;
    let snappy = dir.path().join("t.parquet");
    let gzip = dir.path().join("t_gzip.parquet");
    let out = std::process::Command::new(&python)
        .args(["-c", script])
        .arg(&snappy)
        .arg(&gzip)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let app = spawn_app(backend).await;
    let expected_rows = json!([
        {"id": 1, "small": 1, "score": 0.5, "ok": true, "name": "a",
         "at": "2024-05-01T12:00:00Z", "at_ns": "2024-05-01T12:00:00.000000001Z",
         "day": "2024-05-01", "tags": ["x", "y"], "meta": {"k": 1, "s": "v"}, "nothing": null},
        {"id": 2, "small": null, "score": null, "ok": false, "name": "ü",
         "at": null, "at_ns": null, "day": null, "tags": [], "meta": null, "nothing": null},
        {"id": 3, "small": 3, "score": 2.25, "ok": null, "name": null,
         "at": "2024-05-02T00:00:00.250Z", "at_ns": "1970-01-01T00:00:00Z",
         "day": "1999-12-31", "tags": null, "meta": {"k": 3, "s": null}, "nothing": null},
    ]);
    for (name, path) in [("t.parquet", &snappy), ("t_gzip.parquet", &gzip)] {
        let (status, d) = upload(
            &app,
            None,
            &format!("name={name}"),
            std::fs::read(path).unwrap(),
        )
        .await;
        assert_eq!(status, 201, "{name}: {d}");
        assert_eq!(d["format"], "parquet");
        assert_eq!(d["num_rows"], 3);
        assert_eq!(
            types(&d),
            pairs(&[
                ("id", "integer"),
                ("small", "integer"),
                ("score", "float"),
                ("ok", "boolean"),
                ("name", "string"),
                ("at", "timestamp"),
                ("at_ns", "timestamp"),
                ("day", "timestamp"),
                ("tags", "array"),
                ("meta", "object"),
                ("nothing", "null"),
            ]),
            "{name}"
        );
        let (_, got) = call(
            &app,
            "GET",
            &format!("/v1/datasets/{}", d["id"].as_str().unwrap()),
            None,
        )
        .await;
        assert_eq!(got["preview"], expected_rows, "{name}");
    }
    app.stop().await;
}
backends!(parquet_round_trip, parquet_from_pyarrow_reads_back);

async fn bad_files_store_nothing(backend: Backend) {
    let app = spawn_app_with(backend, |c: &mut Config| {
        c.datasets.max_upload_bytes = 4096;
    })
    .await;
    let refused = |status: u16, body: &Value, code: &str, needles: &[&str]| {
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        let msg = body["error"]["message"].as_str().unwrap();
        for n in needles {
            assert!(msg.contains(n), "{msg:?} lacks {n:?}");
        }
    };
    // CSV: a row with too many fields; a cell that is not UTF-8; only a header.
    let (s, b) = upload(&app, None, "name=a.csv", b"a,b\n1,2\n3,4,5\n".to_vec()).await;
    refused(s, &b, "invalid_dataset", &["row 2", "3 fields"]);
    let (s, b) = upload(
        &app,
        None,
        "name=a.csv",
        b"a,name\n1,ok\n2,\xff\xfe\n".to_vec(),
    )
    .await;
    refused(
        s,
        &b,
        "invalid_dataset",
        &["row 2", "column 'name'", "UTF-8"],
    );
    let (s, b) = upload(&app, None, "name=a.csv", b"a,b\n".to_vec()).await;
    refused(s, &b, "invalid_dataset", &["no rows"]);
    let (s, b) = upload(&app, None, "name=a.csv", b"a,a\n1,2\n".to_vec()).await;
    refused(s, &b, "invalid_dataset", &["'a'", "twice"]);
    // JSONL: bad JSON, a non-object.
    let (s, b) = upload(
        &app,
        None,
        "name=a.jsonl",
        b"{\"a\": 1}\n\n{\"a\": \n".to_vec(),
    )
    .await;
    refused(s, &b, "invalid_dataset", &["line 3", "invalid JSON"]);
    let (s, b) = upload(&app, None, "name=a.jsonl", b"{\"a\": 1}\n[1]\n".to_vec()).await;
    refused(s, &b, "invalid_dataset", &["line 2", "an array"]);
    // A key twice in a row: refused (a plain parse kept the last value).
    let (s, b) = upload(
        &app,
        None,
        "name=a.jsonl",
        b"{\"a\": 1}\n{\"a\": 1, \"a\": 2}\n".to_vec(),
    )
    .await;
    refused(s, &b, "invalid_dataset", &["line 2", "`a` appears twice"]);
    // Glob characters in a name: a seed could never name the dataset alone.
    let (s, b) = upload(&app, None, "name=*.csv", b"a\n1\n".to_vec()).await;
    refused(s, &b, "invalid_request", &["glob"]);
    // Parquet: not one at all.
    let (s, b) = upload(
        &app,
        None,
        "name=a.parquet",
        b"PAR1 this is not parquet".to_vec(),
    )
    .await;
    refused(s, &b, "invalid_dataset", &["Parquet"]);
    // No format to be had; an empty body.
    let (s, b) = upload(&app, None, "name=a.txt", b"a\n1\n".to_vec()).await;
    refused(s, &b, "unsupported_dataset_format", &["a.txt"]);
    let (s, b) = upload(&app, None, "name=a.csv", Vec::new()).await;
    refused(s, &b, "invalid_dataset", &["empty"]);
    assert_eq!(stored(&app).await, (0, 0));

    // Over datasets.max_upload_bytes, with a Content-Length and streamed (chunked).
    let big = "v\n".repeat(3000).into_bytes();
    let (s, b) = upload(&app, None, "name=big.csv", big.clone()).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (413, Some("dataset_too_large")),
        "{b}"
    );
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.chunks(500).map(|c| Ok(c.to_vec())).collect();
    let resp = app
        .client
        .post(app.url("/v1/datasets?name=big.csv"))
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    let (s, b) = status_json(resp).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (413, Some("dataset_too_large")),
        "{b}"
    );
    assert_eq!(stored(&app).await, (0, 0));
    app.stop().await;
}
backends!(malformed_and_oversize_uploads, bad_files_store_nothing);

async fn uploads_bypass_the_global_body_limit(backend: Backend) {
    let app = spawn_app_with(backend, |c: &mut Config| {
        c.server.max_body_bytes = 1024;
    })
    .await;
    let mut csv = String::from("n,text\n");
    for i in 0..2000 {
        csv.push_str(&format!("{i},row number {i}\n"));
    }
    assert!(csv.len() > 20 * 1024);
    let (s, d) = upload(&app, None, "name=rows.csv", csv.into_bytes()).await;
    assert_eq!(s, 201, "{d}");
    assert_eq!(d["num_rows"], 2000);
    app.stop().await;
}
backends!(upload_body_limit, uploads_bypass_the_global_body_limit);

async fn keys_see_only_their_datasets(backend: Backend) {
    let app = spawn_app_with(backend, |c: &mut Config| {
        c.auth = serde_json::from_value(json!({"api_keys": [
            {"name": "alice", "key": KEY_A},
            {"name": "bob", "key": KEY_B},
        ]}))
        .unwrap();
    })
    .await;
    let (s, _) = upload(&app, None, "name=a.csv", b"v\n1\n".to_vec()).await;
    assert_eq!(s, 401);
    let (s, d) = upload(&app, Some(KEY_A), "name=a.csv", b"v\n1\n".to_vec()).await;
    assert_eq!(s, 201, "{d}");
    let path = format!("/v1/datasets/{}", d["id"].as_str().unwrap());
    for method in ["GET", "DELETE"] {
        let (s, b) = call(&app, method, &path, Some(KEY_B)).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (404, Some("dataset_not_found")),
            "{b}"
        );
    }
    let (_, list) = call(&app, "GET", "/v1/datasets", Some(KEY_B)).await;
    assert_eq!(list["datasets"], json!([]));
    // Bob uploading the same file gets his own dataset, not Alice's.
    let (s, own) = upload(&app, Some(KEY_B), "name=a.csv", b"v\n1\n".to_vec()).await;
    assert_eq!(s, 201, "{own}");
    assert_ne!(own["id"], d["id"]);
    let (s, still) = call(&app, "GET", &path, Some(KEY_A)).await;
    assert_eq!(s, 200, "{still}");
    app.stop().await;
}
backends!(datasets_per_key, keys_see_only_their_datasets);

async fn delete_refused_while_a_job_reads_it(backend: Backend) {
    // The job's one record waits for the model until released, so the job stays running.
    let (app, mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"text": "ok", "hold": true}}]}),
        |_| {},
    )
    .await;
    let (s, d) = upload(&app, None, "name=seed.csv", b"topic\nmath\n".to_vec()).await;
    assert_eq!(s, 201, "{d}");
    let id: DatasetId = d["id"].as_str().unwrap().parse().unwrap();
    // Bound the way a submit binds a seed's datasets (the store's job-creation path).
    let job = NewJob {
        id: synthgate::domain::JobId::new(),
        owner: None,
        config: json!({"columns": [
            {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
             "prompt": "Say ok."}
        ]}),
        num_records: 1,
        seed: 1,
        metadata: None,
        run_config: json!({}),
        idempotency_key: None,
        request_hash: None,
        output_columns: vec!["answer".into()],
        max_live_jobs: None,
        max_live_records: None,
        seed_datasets: vec![id],
        name: None,
        trace_context: None,
        selection: None,
        cache_mode: Default::default(),
        max_cost_nanos: None,
    };
    let CreateOutcome::Created(row) = app.db.store.create_job(&job).await.unwrap() else {
        panic!("job not created");
    };
    let path = format!("/v1/datasets/{id}");
    let (s, b) = call(&app, "DELETE", &path, None).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (409, Some("dataset_in_use")),
        "{b}"
    );
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&row.id.to_string()),
        "{b}"
    );
    let (s, still) = call(&app, "GET", &path, None).await;
    assert_eq!(s, 200, "{still}");
    assert_eq!(still["preview"], json!([{"topic": "math"}]));

    // Once the job is over, the delete goes through.
    mock.release();
    let done = app
        .wait_for_job(&row.id.to_string(), Duration::from_secs(30))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let (s, _) = call(&app, "DELETE", &path, None).await;
    assert_eq!(s, 204);
    assert_eq!(stored(&app).await, (0, 0));
    app.stop().await;
}
backends!(delete_in_use, delete_refused_while_a_job_reads_it);

/// The metadata of an upload named `name`, for a test that writes its import through the
/// store itself.
fn upload_meta(
    name: &str,
    format: synthgate::datasets::DatasetFormat,
) -> synthgate::datasets::DatasetMeta {
    synthgate::datasets::DatasetMeta {
        id: DatasetId::new(),
        owner: None,
        name: name.into(),
        format,
        columns: Vec::new(),
        num_rows: 0,
        size_bytes: 1,
        sha256: "0".repeat(64),
        source: synthgate::datasets::DatasetSourceKind::Upload,
        source_ref: None,
        created_at: chrono::Utc::now(),
    }
}

async fn a_crashed_import_is_deleted_at_start(backend: Backend) {
    let db = TestDb::new(backend).await;
    // What a process that died mid-import leaves: an `importing` row and some blocks, idle
    // for a day.
    let meta = upload_meta("crash.csv", synthgate::datasets::DatasetFormat::Csv);
    db.store.begin_dataset_import(&meta).await.unwrap();
    assert!(
        db.store
            .write_dataset_blocks(meta.id, 0, &[b"[{}]".to_vec()])
            .await
            .unwrap()
    );
    db.execute(match backend {
        Backend::Sqlite => "update datasets set updated_at = updated_at - 86400000000",
        Backend::Postgres => "update datasets set updated_at = now() - interval '1 day'",
    })
    .await;
    let running = synthgate::app::start(test_config(&db))
        .await
        .expect("app starts");
    assert_eq!(db.count("select count(*) from datasets").await, 0);
    assert_eq!(db.count("select count(*) from dataset_blocks").await, 0);
    running.shutdown.cancel();
    running.wait().await;
}
backends!(crashed_import_cleanup, a_crashed_import_is_deleted_at_start);

/// Rows an earlier build stored nested deeper than serde_json reads back (it accepted a
/// Parquet schema 80 to 600 levels deep): reading them answers `422 invalid_dataset` saying
/// what to do, not `500 internal`.
async fn unreadable_stored_rows_are_refused_clearly(backend: Backend) {
    let db = TestDb::new(backend).await;
    let meta = upload_meta("deep.parquet", synthgate::datasets::DatasetFormat::Parquet);
    let deep = format!(r#"[{{"x":{}1{}}}]"#, "[".repeat(300), "]".repeat(300));
    db.store.begin_dataset_import(&meta).await.unwrap();
    assert!(
        db.store
            .write_dataset_blocks(meta.id, 0, &[deep.into_bytes()])
            .await
            .unwrap()
    );
    let columns = [synthgate::datasets::DatasetColumn {
        name: "x".into(),
        r#type: synthgate::datasets::ColumnType::Array,
    }];
    let ready = db
        .store
        .finish_dataset_import(meta.id, &columns, 1)
        .await
        .unwrap();
    assert!(ready.is_some());
    let app = spawn_app_on(db, |_| {}).await;
    let (s, body) = call(&app, "GET", &format!("/v1/datasets/{}", meta.id), None).await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_dataset", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("import its file again"), "{message}");
    app.stop().await;
}
backends!(unreadable_rows, unreadable_stored_rows_are_refused_clearly);
