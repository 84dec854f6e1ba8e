//! NVIDIA's own Data Designer client (`nemo-microservices` 1.5.0, `NeMoDataDesignerClient`)
//! against `/v1/data-designer` (issue 26), through tests/nemo/client_check.py: the settings,
//! a preview whose DataFrame holds the generated records, a refused config as the client
//! raises it, a key the server does not know, a job created and waited on whose `load_dataset()`
//! equals our JSONL export, `get_job_results`, `list_jobs`, another key that sees none of it,
//! the analyses, artifacts, logs, the low-level status, results, filters, cancel and delete,
//! and a seed uploaded to the `/v1/hf` datastore and used by a preview and a job.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::app_with_mock_llm;

const KEY_A: &str = "nemo-key-a-0123456789abcdef";
const KEY_B: &str = "nemo-key-b-0123456789abcdef";
const UNKNOWN_KEY: &str = "nemo-key-unknown-0123456789";

/// The interpreter with the client installed (see [`crate::require`]: `None` skips, or fails
/// under `CI=true`): scripts/test sets `$SYNTHGATE_TEST_NEMO_PYTHON`.
fn nemo_python() -> Option<String> {
    crate::require::require(std::env::var("SYNTHGATE_TEST_NEMO_PYTHON").ok(), || {
        "SYNTHGATE_TEST_NEMO_PYTHON is unset (scripts/test installs \
         scripts/requirements-nemo.txt into .venv-nemo and sets it)"
            .into()
    })
}

async fn nemo_client_preview_and_settings(backend: Backend) {
    let Some(python) = nemo_python() else {
        return;
    };
    let (app, mock) = app_with_mock_llm(
        backend,
        json!({"rules": [{"reply": {"text": "roses are red"}}]}),
        |c| {
            c.auth = serde_json::from_value(json!({"api_keys": [
                {"name": "alice", "key": KEY_A}, {"name": "bob", "key": KEY_B}]}))
            .unwrap();
        },
    )
    .await;
    // huggingface_hub's cache and token store, kept out of the user's home.
    let hf_home = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::new(python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/nemo/client_check.py"
            ))
            .arg(app.url(""))
            .env("CHECK_KEY_A", KEY_A)
            .env("CHECK_KEY_B", KEY_B)
            .env("CHECK_KEY_UNKNOWN", UNKNOWN_KEY)
            .env("HF_HOME", hf_home.path())
            .env("HF_HUB_DISABLE_TELEMETRY", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finishes in time")
    .expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The last line: the client prints reports of its own config checks before it.
    let last = stdout.trim().lines().last().unwrap_or_default();
    let got: Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));

    // Settings: the server's model config, never a key or an endpoint.
    assert_eq!(
        got["model_configs"],
        json!([{"alias": "writer", "model": "mock-writer", "provider": "mock"}]),
        "{got}"
    );
    assert_eq!(got["model_providers"], json!(["mock"]), "{got}");
    assert!(!stdout.contains(&mock.endpoint()), "{stdout}");

    // The preview's DataFrame: every column, three records, the LLM's answer and the
    // expression rendered from the sampled value.
    assert_eq!(
        got["preview_columns"],
        json!(["color", "shout", "poem"]),
        "{got}"
    );
    let rows = got["preview_rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{got}");
    for row in rows {
        let color = row["color"].as_str().unwrap();
        assert!(["red", "blue"].contains(&color), "{row}");
        assert_eq!(row["shout"], format!("{}!", color.to_uppercase()), "{row}");
        assert_eq!(row["poem"], "roses are red", "{row}");
    }
    // The model was really asked, once a record: 3 of the preview, 4 of the job.
    assert_eq!(mock.requests().len(), 7);

    // A config the server refuses: the client's validation error, with our code and message.
    assert_eq!(
        got["bad_config"]["type"], "DataDesignerConfigValidationError",
        "{got}"
    );
    let text = got["bad_config"]["text"].as_str().unwrap();
    assert!(
        text.contains("422") && text.contains("invalid_model_config"),
        "{text}"
    );
    assert!(
        text.contains("provider 'no-such-provider' is not defined"),
        "{text}"
    );

    // A key the server does not know.
    assert_eq!(
        got["unknown_key"]["type"], "DataDesignerClientError",
        "{got}"
    );
    let text = got["unknown_key"]["text"].as_str().unwrap();
    assert!(
        text.contains("401") && text.contains("unauthorized"),
        "{text}"
    );

    // The job: waited on to the end, its DataFrame equal to our JSONL export of it.
    let job_id = got["job_id"].as_str().unwrap();
    assert_eq!(got["job_status"], "completed", "{got}");
    assert_eq!(got["again_status"], "completed", "{got}");
    assert_eq!(
        got["job_columns"],
        json!(["color", "shout", "poem"]),
        "{got}"
    );
    let resp = app
        .client
        .get(app.url(&format!("/v1/jobs/{job_id}/records?format=jsonl")))
        .bearer_auth(KEY_A)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let exported: Vec<Value> = resp
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported.len(), 4);
    assert_eq!(got["job_rows"], Value::Array(exported), "{got}");
    assert!(
        got["listed"].as_array().unwrap().contains(&json!(job_id)),
        "{got}"
    );

    // Another key: not its job, and none listed.
    assert_eq!(got["other_key_job"]["type"], "NotFoundError", "{got}");
    let text = got["other_key_job"]["text"].as_str().unwrap();
    assert!(text.contains("job_not_found"), "{got}");
    assert_eq!(got["other_key_listed"], json!([]), "{got}");

    // The analyses, as the client validated them.
    let analysis = &got["preview_analysis"];
    assert_eq!(analysis["num_records"], 3, "{analysis}");
    let color = &analysis["column_statistics"][0];
    assert_eq!(
        (&color["column_name"], &color["column_type"]),
        (&json!("color"), &json!("sampler")),
        "{analysis}"
    );
    assert_eq!(color["distribution_type"], "categorical", "{analysis}");
    let counts: u64 = color["distribution"]["histogram"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counts, 3, "{analysis}");
    assert!(got["preview_report_chars"].as_u64().unwrap() > 100, "{got}");
    let job_analysis = &got["job_analysis"];
    assert_eq!(job_analysis["num_records"], 4, "{job_analysis}");
    assert_eq!(job_analysis["target_num_records"], 4, "{job_analysis}");
    let poem = &job_analysis["column_statistics"][2];
    assert_eq!(poem["column_name"], "poem", "{job_analysis}");
    assert_eq!(poem["num_unique"], 1, "{job_analysis}");
    assert_eq!(
        got["artifacts"],
        json!([
            "artifacts/analysis.json",
            "artifacts/dataset/part-0.parquet"
        ]),
        "{got}"
    );
    let logs = got["logs"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|l| l.as_str().unwrap().contains("Job completed")),
        "{got}"
    );

    // The low-level resource.
    assert_eq!(got["status"]["status"], "completed", "{got}");
    assert_eq!(got["status"]["details"]["completed"], 4, "{got}");
    assert_eq!(got["results"], json!(["analysis", "dataset"]), "{got}");
    let filtered = &got["filtered"];
    assert!(
        filtered["completed"]
            .as_array()
            .unwrap()
            .contains(&json!(job_id)),
        "{got}"
    );
    assert_eq!(filtered["active"], json!([]), "{got}");
    assert!(
        filtered["named"]
            .as_array()
            .unwrap()
            .contains(&json!(job_id)),
        "{got}"
    );
    assert_eq!(filtered["other_name"], json!([]), "{got}");
    assert_eq!(got["cancel_finished"]["type"], "ConflictError", "{got}");

    // The seed: uploaded, its columns read back, used in order by a preview and a job.
    assert_eq!(
        got["seed_reference"], "default/cities/seed-dataset-dataframe.parquet",
        "{got}"
    );
    assert_eq!(
        got["seeded_columns"],
        json!(["city", "country", "where"]),
        "{got}"
    );
    let expected = json!([
        {"city": "Lyon", "country": "FR", "where": "Lyon, FR"},
        {"city": "Porto", "country": "PT", "where": "Porto, PT"},
        {"city": "Kyoto", "country": "JP", "where": "Kyoto, JP"},
    ]);
    assert_eq!(got["seeded_preview"], expected, "{got}");
    assert_eq!(got["seeded_job"], expected, "{got}");
    // Key B: the repository is not found (huggingface_hub's `RepoNotFound`).
    assert_eq!(got["other_key_seed"]["type"], "FileNotFoundError", "{got}");
    assert!(
        got["other_key_seed"]["text"]
            .as_str()
            .unwrap()
            .contains("repository not found"),
        "{got}"
    );

    // Deleted, with its records.
    assert_eq!(got["after_delete"]["type"], "NotFoundError", "{got}");
    let seeded = got["seeded_job_id"].as_str().unwrap();
    let resp = app
        .client
        .get(app.url(&format!("/v1/jobs/{seeded}/records")))
        .bearer_auth(KEY_A)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    app.stop().await;
}

backends!(nemo_client, nemo_client_preview_and_settings);

/// The preview stream's framing, without the client (so it runs everywhere): JSON Lines, each
/// line one message ending in `\n`, none blank, every `log` with `extra.level`, one `dataset`
/// whose `message` is the records as `{column: [values]}`; and `num_records: null` means 10.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_stream_is_json_lines_the_client_can_read() {
    let (app, _mock) = app_with_mock_llm(
        Backend::Sqlite,
        json!({"rules": [{"reply": {"text": "ok"}}]}),
        |_| {},
    )
    .await;
    let config = json!({"columns": [
        {"name": "n", "drop": false, "column_type": "sampler", "sampler_type": "uniform",
         "params": {"low": 1, "high": 2, "decimal_places": null, "sampler_type": "uniform"},
         "conditional_params": {}, "convert_to": "int"},
        {"name": "say", "drop": false, "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Say {{ n }}.", "system_prompt": null, "multi_modal_context": null}
    ], "model_configs": null, "seed_config": null, "constraints": null, "profilers": null,
       "processors": null});
    let resp = app
        .client
        .post(app.url("/v1/data-designer/preview"))
        .json(&json!({"config": config, "num_records": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/jsonl");
    let body = resp.text().await.unwrap();
    assert!(body.ends_with('\n'), "{body}");
    let messages: Vec<Value> = body
        .split_terminator('\n')
        .map(|l| {
            assert!(!l.trim().is_empty(), "a blank line: {body:?}");
            serde_json::from_str(l).unwrap()
        })
        .collect();
    for m in &messages {
        assert!(m["message"].is_string(), "{m}");
        if m["message_type"] == "log" {
            assert!(m["extra"]["level"].is_string(), "{m}");
        }
    }
    let datasets: Vec<&Value> = messages
        .iter()
        .filter(|m| m["message_type"] == "dataset")
        .collect();
    assert_eq!(datasets.len(), 1, "{body}");
    let dataset: Value = serde_json::from_str(datasets[0]["message"].as_str().unwrap()).unwrap();
    assert_eq!(dataset["say"].as_array().unwrap().len(), 10, "{dataset}");
    assert!(dataset["say"].as_array().unwrap().iter().all(|v| v == "ok"));

    // Past the preview limit: our 422, before any stream.
    let resp = app
        .client
        .post(app.url("/v1/data-designer/preview"))
        .json(&json!({"config": config, "num_records": 11}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["error"]["code"], "num_records_out_of_range", "{err}");
    app.stop().await;
}

/// The client serializes a drop-columns processor as `{"build_stage": "post_batch"}` alone (its
/// `processors` field is typed by the abstract base, so pydantic drops `column_names` and
/// `processor_type`) and marks the dropped columns `drop: true` instead: such a config previews,
/// without the dropped column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_processor_shape_is_accepted() {
    let (app, _mock) = app_with_mock_llm(Backend::Sqlite, json!({"rules": []}), |_| {}).await;
    let config = json!({"columns": [
        {"name": "a", "drop": false, "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["x"], "weights": null, "sampler_type": "category"},
         "conditional_params": {}, "convert_to": null},
        {"name": "b", "drop": true, "column_type": "expression", "expr": "{{ a }}!", "dtype": "str"}
    ], "model_configs": [], "seed_config": null, "constraints": null, "profilers": null,
       "processors": [{"build_stage": "post_batch"}]});
    let resp = app
        .client
        .post(app.url("/v1/data-designer/preview"))
        .json(&json!({"config": config, "num_records": 2}))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    let dataset = body
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["message_type"] == "dataset")
        .expect("a dataset message");
    let dataset: Value = serde_json::from_str(dataset["message"].as_str().unwrap()).unwrap();
    assert_eq!(dataset, json!({"a": ["x", "x"]}), "{body}");
    app.stop().await;
}
