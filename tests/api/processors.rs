//! Processors, profilers and the one 422: a `drop_columns` processor removes columns from the
//! dataset, a `schema_transform` processor's dataset is served at
//! `/v1/jobs/{id}/outputs/{name}` (JSONL and CSV), `/v1/jobs/{id}/analysis` profiles the
//! dataset, and a config's problems of every kind come back in one 422.

use std::time::Duration;

use serde_json::{Value, json};

use crate::backends;
use crate::db::Backend;
use crate::helpers::app_with_mock_llm;

backends!(processors_shape_the_dataset_and_its_outputs, processors_job);

fn config() -> Value {
    json!({
        "columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["cats", "dogs"]}},
            {"name": "tmp_n", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 1, "high": 10}, "convert_to": "int"},
            {"name": "question", "column_type": "expression",
             "expr": "Tell me about {{ topic }} ({{ tmp_n }})"},
            {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
             "prompt": "{{ question }}"},
            {"name": "judge", "column_type": "llm-judge", "model_alias": "writer",
             "prompt": "Rate: {{ answer }}",
             "scores": [{"name": "quality", "description": "How good",
                         "options": {"1": "bad", "4": "good"}}]}
        ],
        "processors": [
            {"name": "drop_tmp", "processor_type": "drop_columns", "column_names": ["tmp_*"]},
            {"name": "chat", "processor_type": "schema_transform", "template": {
                "messages": [
                    {"role": "user", "content": "{{ question }}"},
                    {"role": "assistant", "content": "{{ answer }}"}
                ],
                "score": "{{ judge.quality.score }}"
            }}
        ],
        "profilers": [{"model_alias": "writer", "summary_score_sample_size": 5}]
    })
}

async fn processors_job(backend: Backend) {
    let (app, _mock) = app_with_mock_llm(
        backend,
        json!({"rules": [
            {"when": {"user_contains": "Rate:"},
             "reply": {"text": "{\"quality\": {\"reasoning\": \"fine\", \"score\": 4}}"}},
            {"reply": {"text": "They are \"great\"."}}
        ]}),
        |_| {},
    )
    .await;
    let (status, job) = app
        .create_job(
            &json!({"config": {"data_designer": config(), "library_version": "0.9.6"},
            "num_records": 4, "seed": 7}),
        )
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let done = app.wait_for_job(&id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");

    // drop_columns: tmp_n was generated (the question reads it) but is not in the dataset.
    let records = app.all_records(&id).await;
    assert_eq!(records.len(), 4);
    for r in &records {
        // Sorted: Postgres' jsonb keeps keys in its own order.
        let mut keys: Vec<&String> = r["values"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["answer", "judge", "question", "topic"], "{r}");
        assert!(r["values"]["question"].as_str().unwrap().contains('('));
    }

    // schema_transform: one row per record, in index order, rendered from the record.
    let (status, body) = app.get_text(&format!("/v1/jobs/{id}/outputs/chat")).await;
    assert_eq!(status, 200, "{body}");
    let rows: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4);
    for (row, rec) in rows.iter().zip(&records) {
        assert_eq!(
            row,
            &json!({
                "messages": [
                    {"role": "user", "content": rec["values"]["question"]},
                    {"role": "assistant", "content": "They are \"great\"."}
                ],
                "score": "4"
            })
        );
    }
    let (status, csv) = app
        .get_text(&format!("/v1/jobs/{id}/outputs/chat?format=csv"))
        .await;
    assert_eq!(status, 200, "{csv}");
    // Template keys sorted: Postgres' jsonb does not keep their order.
    assert_eq!(csv.lines().next(), Some("messages,score"));
    assert_eq!(csv.lines().count(), 5);
    let (status, err) = app.get(&format!("/v1/jobs/{id}/outputs/drop_tmp")).await;
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error"]["code"], "output_not_found");
    assert!(err["error"]["message"].as_str().unwrap().contains("chat"));
    let (status, err) = app
        .get(&format!("/v1/jobs/{id}/outputs/chat?format=xml"))
        .await;
    assert_eq!(status, 422, "{err}");

    // analysis: per-column statistics over the four rows, and the judge's score profile.
    let (status, a) = app.get(&format!("/v1/jobs/{id}/analysis")).await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["num_records"], 4);
    let stats = a["column_statistics"].as_array().unwrap();
    let names: Vec<&str> = stats
        .iter()
        .map(|s| s["column_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["topic", "question", "answer", "judge"]);
    let topic = &stats[0];
    assert_eq!(topic["column_type"], "sampler");
    assert_eq!(topic["sampler_type"], "category");
    assert_eq!(topic["distribution_type"], "categorical");
    let counts: u64 = topic["distribution"]["histogram"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counts, 4);
    assert_eq!(stats[2]["num_unique"], 1, "{}", stats[2]);
    let profiles = a["column_profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 1);
    assert_eq!(profiles[0]["column_name"], "judge");
    assert_eq!(profiles[0]["summaries"], Value::Null);
    let quality = &profiles[0]["score_distributions"]["quality"];
    assert_eq!(
        quality["distribution"]["histogram"],
        json!({"categories": ["4"], "counts": [4]}),
        "{quality}"
    );
    app.stop().await;
}

/// Model config, tool config, seed, run config, column and processor problems in one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_config_problem_comes_back_in_one_422() {
    let (app, _mock) = app_with_mock_llm(Backend::Sqlite, json!({"rules": []}), |_| {}).await;
    let config = json!({
        "model_configs": [
            {"alias": "mine", "provider": "mock"},
            {"alias": "ok", "model": "m", "provider": "mock",
             "inference_parameters": {"temperature": 9}}
        ],
        "tool_configs": [{"tool_alias": "t", "providers": "not-a-list"}],
        "seed_config": {"source": {"seed_type": "inline", "rows": []}},
        "columns": [
            {"name": "a", "column_type": "expression", "expr": "{{ nope }}"},
            {"name": "b", "column_type": "llm-text", "model_alias": "mine",
             "prompt": "{{ broken }} {{ a }}"},
            {"name": "broken", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": "x"}},
            {"name": "u", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 5, "high": 1}}
        ],
        "processors": [{"name": "d", "processor_type": "drop_columns", "column_names": ["zz"]}],
        "profilers": [{"model_alias": "nobody"}]
    });
    let (status, body) = app
        .create_job(&json!({"config": config, "num_records": 1,
            "run_config": {"shutdown_error_rate": 7}}))
        .await;
    assert_eq!(status, 422, "{body}");
    let details = body["error"]["details"].as_array().unwrap();
    let got: Vec<(&str, &str)> = details
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap(),
                d["field"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    for want in [
        ("invalid_model_config", "model_configs[0].model"),
        ("invalid_tool_config", "tool_configs[0].providers"),
        ("invalid_config", "params.low"),
        ("invalid_run_config", "run_config.shutdown_error_rate"),
        (
            "invalid_model_config",
            "model_configs[1].inference_parameters.temperature",
        ),
        ("invalid_seed_config", "seed_config.source.rows"),
        ("unknown_reference", "expr"),
        ("invalid_sampler_params", "params"),
        ("invalid_processor", "processors[0].column_names[0]"),
        ("invalid_profiler", "profilers[0].model_alias"),
    ] {
        assert!(
            got.iter()
                .any(|(c, f)| *c == want.0 && f.starts_with(want.1)),
            "{want:?} missing from {got:#?}"
        );
    }
    // What did not parse is not reported again as unknown: `b` reads `broken` and names
    // model alias `mine`, both defined by entries that failed to parse.
    assert!(
        !got.iter()
            .any(|(c, _)| *c == "unknown_model_alias" || *c == "no_columns"),
        "{got:#?}"
    );
    assert!(
        !details
            .iter()
            .any(|d| d["code"] == "unknown_reference" && d["column"] == "b"),
        "{details:#?}"
    );
    app.stop().await;
}
