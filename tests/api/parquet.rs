//! Parquet exports (`format=parquet`) of a job's records and of a `schema_transform`
//! processor's dataset, read back with pyarrow: the same rows and values as the JSONL export,
//! with column types taken from the config. Both backends. The interpreter with pyarrow comes
//! from `$SYNTHGATE_TEST_DD_PYTHON` (scripts/test sets it), else `.venv-datadesigner/`; without
//! one the test says so and skips.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm};

/// An interpreter with pyarrow, or `None` (reason printed) to skip.
pub(crate) fn pyarrow_python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SYNTHGATE_TEST_DD_PYTHON") {
        return Some(p.into());
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-datadesigner/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    crate::require::skip(
        "SYNTHGATE_TEST_DD_PYTHON is not set and .venv-datadesigner/ does not exist \
         (scripts/test builds it)",
    );
    None
}

/// Reads a Parquet file with pyarrow: `{"types": {column: arrow type}, "row_groups": n,
/// "rows": [...]}`.
fn read_with_pyarrow(python: &PathBuf, bytes: &[u8]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.parquet");
    std::fs::write(&path, bytes).unwrap();
    let script = r#"
import json, sys
import pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1])
t = f.read()
print(json.dumps({
    "types": {field.name: str(field.type) for field in t.schema},
    "row_groups": f.num_row_groups,
    "rows": t.to_pylist(),
}))
"#;
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(&path)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "pyarrow could not read the export: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn config() -> Value {
    json!({
        "columns": [
            {"name": "count", "column_type": "sampler", "sampler_type": "poisson",
             "params": {"mean": 3}},
            {"name": "score", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 0, "high": 1}},
            {"name": "size", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["s", "m", "l"]}},
            {"name": "level", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": [1, 2, 3]}},
            {"name": "id", "column_type": "sampler", "sampler_type": "uuid", "params": {}},
            {"name": "when", "column_type": "sampler", "sampler_type": "datetime",
             "params": {"start": "2024-01-01", "end": "2024-12-31"}},
            {"name": "half", "column_type": "expression", "expr": "{{ count / 2 }}",
             "dtype": "float"},
            {"name": "big", "column_type": "expression", "expr": "{{ count > 2 }}",
             "dtype": "bool"},
            {"name": "label", "column_type": "expression", "expr": "{{ size }}-{{ level }}"},
            {"name": "maybe", "column_type": "expression", "expr": "{{ count }}", "dtype": "int",
             "skip": {"when": "{{ count > 2 }}", "value": "n/a"}},
            {"name": "summary", "column_type": "llm-structured", "model_alias": "writer",
             "prompt": "Summarize {{ label }}", "with_trace": "last_message",
             "output_format": {"type": "object", "properties": {"title": {"type": "string"},
                 "tags": {"type": "array", "items": {"type": "string"}}},
                 "required": ["title", "tags"]}}
        ],
        "processors": [
            {"name": "chat", "processor_type": "schema_transform", "template": {
                "prompt": "{{ label }}",
                "title": "{{ summary.title }}"
            }}
        ]
    })
}

async fn get_bytes(app: &TestApp, path: &str) -> (u16, String, Vec<u8>) {
    let resp = app.client.get(app.url(path)).send().await.expect("request");
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, ctype, resp.bytes().await.expect("body").to_vec())
}

/// The JSONL export as values.
async fn jsonl(app: &TestApp, path: &str) -> Vec<Value> {
    let (status, body) = app.get_text(path).await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A Parquet row with its JSON-text cells parsed back where the JSONL value is not a string.
fn decode(parquet_row: &Value, jsonl_row: &Value) -> Value {
    let obj = parquet_row.as_object().unwrap();
    Value::Object(
        obj.iter()
            .map(|(k, v)| {
                let decoded = match (v, jsonl_row.get(k)) {
                    (Value::String(s), Some(j)) if !j.is_string() => {
                        serde_json::from_str(s).unwrap_or_else(|e| panic!("{k}: {s:?}: {e}"))
                    }
                    _ => v.clone(),
                };
                (k.clone(), decoded)
            })
            .collect(),
    )
}

async fn parquet_matches_jsonl(backend: Backend) {
    let Some(python) = pyarrow_python() else {
        return;
    };
    let reply = json!({"title": "A title", "tags": ["x", "y"]});
    let (app, _mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"text": format!("```json\n{reply}\n```")}}]}),
        |_| {},
    )
    .await;
    let (status, job) = app
        .create_job(&json!({"config": config(), "num_records": 5, "seed": 3}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let done = app.wait_for_job(&id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");

    for traces in [false, true] {
        let q = if traces { "&include_traces=true" } else { "" };
        let expected = jsonl(&app, &format!("/v1/jobs/{id}/records?format=jsonl{q}")).await;
        assert_eq!(expected.len(), 5);
        let (status, ctype, bytes) =
            get_bytes(&app, &format!("/v1/jobs/{id}/records?format=parquet{q}")).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
        assert_eq!(ctype, "application/vnd.apache.parquet");
        let file = read_with_pyarrow(&python, &bytes);
        let rows = file["rows"].as_array().unwrap();
        assert_eq!(rows.len(), expected.len());
        for (got, want) in rows.iter().zip(&expected) {
            assert_eq!(&decode(got, want), want, "traces={traces}");
        }
        let mut types = json!({
            "count": "int64", "score": "double", "size": "string", "level": "int64",
            "id": "string", "when": "string", "half": "double", "big": "bool",
            "label": "string", "maybe": "string", "summary": "string"
        });
        if traces {
            types["summary__trace"] = json!("string");
        }
        assert_eq!(file["types"], types, "traces={traces}");
        assert_eq!(file["row_groups"], 1);
    }

    // The processor's dataset: the template's keys, as text.
    let expected = jsonl(&app, &format!("/v1/jobs/{id}/outputs/chat")).await;
    let (status, ctype, bytes) =
        get_bytes(&app, &format!("/v1/jobs/{id}/outputs/chat?format=parquet")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(ctype, "application/vnd.apache.parquet");
    let file = read_with_pyarrow(&python, &bytes);
    assert_eq!(
        file["types"],
        json!({"prompt": "string", "title": "string"})
    );
    let rows = file["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for (got, want) in rows.iter().zip(&expected) {
        assert_eq!(&decode(got, want), want);
    }
    assert_eq!(rows[0]["title"], "A title");
    app.stop().await;
}
backends!(parquet_export, parquet_matches_jsonl);

/// An export of more than one chunk of records is more than one row group: the file is
/// written a chunk at a time, never whole in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_export_is_written_in_row_groups() {
    let Some(python) = pyarrow_python() else {
        return;
    };
    let (app, _mock) = app_with_mock_llm(Backend::Sqlite, json!({"rules": []}), |_| {}).await;
    let config = json!({"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "binomial",
         "params": {"n": 10, "p": 0.5}}
    ]});
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 1201, "seed": 1}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let done = app.wait_for_job(&id, Duration::from_secs(120)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let expected = jsonl(&app, &format!("/v1/jobs/{id}/records?format=jsonl")).await;
    let (status, _, bytes) =
        get_bytes(&app, &format!("/v1/jobs/{id}/records?format=parquet")).await;
    assert_eq!(status, 200);
    let file = read_with_pyarrow(&python, &bytes);
    assert_eq!(
        file["row_groups"], 3,
        "one row group per chunk of 500 records"
    );
    assert_eq!(file["rows"].as_array().unwrap(), &expected);
    app.stop().await;
}
