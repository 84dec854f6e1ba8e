//! `embedding` columns: the target's text (or each text of a list) embedded by an embedding
//! model on the mock LLM, in DataDesigner's output shape; usage counted; a column whose model
//! is of the wrong type, or served by an Anthropic provider, refused naming the column.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::{Api, MockLlm, embedding_of};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm};

backends!(embedding_columns_embed_their_target, embeddings_end_to_end);

async fn start(backend: Backend, script: Value) -> (TestApp, MockLlm) {
    app_with_mock_llm(backend, script, |c| {
        c.model_configs.push(
            serde_json::from_value(json!({"alias": "embedder", "model": "mock-embed",
                "provider": "mock", "inference_parameters": {"generation_type": "embedding",
                "encoding_format": "float", "dimensions": 4,
                "extra_body": {"input_type": "query"}}}))
            .unwrap(),
        );
    })
    .await
}

async fn embeddings_end_to_end(backend: Backend) {
    let (app, mock) = start(backend, json!({"rules": []})).await;
    let config = json!({
        "columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["tea", "coffee"]}},
            {"name": "phrases", "column_type": "expression",
             "expr": "[\"{{ topic }} hot\", \" {{ topic }} cold \"]"},
            {"name": "one", "column_type": "embedding", "target_column": "topic",
             "model_alias": "embedder"},
            {"name": "many", "column_type": "embedding", "target_column": "phrases",
             "model_alias": "embedder"}
        ]
    });
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 3}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let records = app.all_records(id).await;
    assert_eq!(records.len(), 3);
    for r in &records {
        let v = &r["values"];
        let topic = v["topic"].as_str().unwrap();
        assert_eq!(
            v["one"],
            json!({"embeddings": [embedding_of(topic, 4)], "num_embeddings": 1, "dimension": 4}),
            "{r}"
        );
        // A JSON list of texts: one vector per text, trimmed, in order.
        let hot = embedding_of(&format!("{topic} hot"), 4);
        let cold = embedding_of(&format!("{topic} cold"), 4);
        assert_eq!(v["many"]["embeddings"], json!([hot, cold]), "{r}");
        assert_eq!(v["many"]["num_embeddings"], 2, "{r}");
    }
    // What was sent: the model id, the inputs, the inference params and extra_body.
    let sent: Vec<Value> = mock
        .requests()
        .into_iter()
        .filter(|r| r.api == Api::Embeddings)
        .map(|r| r.body)
        .collect();
    assert_eq!(sent.len(), 6, "{sent:?}");
    let first = &sent[0];
    assert_eq!(first["model"], "mock-embed", "{first}");
    assert_eq!(first["encoding_format"], "float", "{first}");
    assert_eq!(first["dimensions"], 4, "{first}");
    assert_eq!(first["input_type"], "query", "{first}");
    assert!(first["input"].is_array(), "{first}");
    // Usage: one request per column and record, prompt tokens as the mock counts them.
    let usage = &done["usage"]["embedder"];
    assert_eq!(usage["requests"], 6, "{done}");
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 0, "{done}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_failures_are_record_errors() {
    let script = json!({"rules": [
        {"when": {"api": "embeddings", "user_contains": "bad"}, "reply": {"status": 400}}
    ]});
    let (app, _mock) = start(Backend::Sqlite, script).await;
    let config = json!({
        "columns": [
            {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 1, "high": 2}},
            {"name": "text", "column_type": "expression", "expr": "bad {{ n }}"},
            {"name": "e_text", "column_type": "embedding", "target_column": "text",
             "model_alias": "embedder"}
        ]
    });
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 1,
            "run_config": {"disable_early_shutdown": true}}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    app.wait_for_job(id, Duration::from_secs(60)).await;
    let records = app.all_records(id).await;
    assert_eq!(
        records[0]["error"]["code"], "llm_bad_request",
        "{records:?}"
    );
    assert_eq!(records[0]["error"]["column"], "e_text", "{records:?}");

    // A number is not text: the record fails before any request.
    let config = json!({
        "columns": [
            {"name": "n", "column_type": "sampler", "sampler_type": "uniform",
             "params": {"low": 1, "high": 2}},
            {"name": "e_n", "column_type": "embedding", "target_column": "n",
             "model_alias": "embedder"}
        ]
    });
    let (_, job) = app
        .create_job(&json!({"config": config, "num_records": 1}))
        .await;
    let id = job["id"].as_str().unwrap();
    app.wait_for_job(id, Duration::from_secs(60)).await;
    let records = app.all_records(id).await;
    let error = &records[0]["error"];
    assert_eq!(error["code"], "embedding_input_invalid", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("column 'e_n': the target column holds a number"),
        "{error}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_columns_need_an_openai_compatible_embedding_model() {
    let (app, mock) = start(Backend::Sqlite, json!({"rules": []})).await;
    let submit = |alias: &str, target: &str| {
        json!({"config": {"columns": [
            {"name": "t", "column_type": "expression", "expr": "x"},
            {"name": "e", "column_type": "embedding", "target_column": target,
             "model_alias": alias}
        ], "model_configs": [{"alias": "claude-embed", "model": "c", "provider": "claude",
            "inference_parameters": {"generation_type": "embedding"}}]}, "num_records": 1})
    };
    let (status, body) = app.create_job(&submit("writer", "t")).await;
    assert_eq!(status, 422, "{body}");
    let detail = &body["error"]["details"][0];
    assert_eq!(detail["code"], "model_type_mismatch", "{body}");
    assert_eq!(detail["column"], "e", "{body}");
    assert_eq!(detail["field"], "model_alias", "{body}");
    assert!(
        detail["message"].as_str().unwrap().contains(
            "'writer' is a chat-completion model; embedding columns need an embedding model"
        ),
        "{body}"
    );

    let (status, body) = app.create_job(&submit("embedder", "nope")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["details"][0]["code"], "unknown_reference",
        "{body}"
    );
    assert_eq!(
        body["error"]["details"][0]["field"], "target_column",
        "{body}"
    );
    app.stop().await;

    // An Anthropic provider has no embeddings API.
    let endpoint = mock.endpoint();
    let (app, _mock2) = app_with_mock_llm(Backend::Sqlite, json!({"rules": []}), |c| {
        c.model_providers.push(
            serde_json::from_value(json!({"name": "claude", "endpoint": endpoint,
                "provider_type": "anthropic"}))
            .unwrap(),
        );
    })
    .await;
    let (status, body) = app.create_job(&submit("claude-embed", "t")).await;
    assert_eq!(status, 422, "{body}");
    let detail = &body["error"]["details"][0];
    assert_eq!(detail["code"], "model_type_mismatch", "{body}");
    assert_eq!(detail["column"], "e", "{body}");
    assert!(
        detail["message"]
            .as_str()
            .unwrap()
            .contains("Anthropic provider 'claude'"),
        "{body}"
    );
    app.stop().await;
}
