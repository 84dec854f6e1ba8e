//! Model configs of every DataDesigner generation type: `embedding` and `image` configs are
//! accepted (DataDesigner's builder writes its embedding defaults into every config), a model
//! config no column uses is never called (its provider need not exist on the server), and an
//! LLM column on a model that is not a chat-completion one is refused, naming the column.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::MockLlm;

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm};

backends!(
    datadesigner_default_model_configs_are_accepted,
    default_model_configs
);

/// Model configs as data-designer 0.9.6's `get_builtin_model_configs()` serializes them (one
/// chat model and the three embedding models), for providers this server does not define.
fn datadesigner_defaults() -> Value {
    json!([
        {"alias": "nvidia-text", "model": "nvidia/nemotron-3.5-lightning-30b-a3b",
         "inference_parameters": {"generation_type": "chat-completion", "max_parallel_requests": 4,
            "timeout": null, "extra_body": {"chat_template_kwargs": {"enable_thinking": false}},
            "temperature": 1.0, "top_p": 0.95, "max_tokens": null},
         "provider": "nvidia", "skip_health_check": false},
        {"alias": "nvidia-embedding", "model": "nvidia/nemotron-3-embed-1b",
         "inference_parameters": {"generation_type": "embedding", "max_parallel_requests": 4,
            "timeout": null, "extra_body": {"input_type": "query"}, "encoding_format": "float",
            "dimensions": null},
         "provider": "nvidia", "skip_health_check": false},
        {"alias": "openai-embedding", "model": "text-embedding-3-large",
         "inference_parameters": {"generation_type": "embedding", "max_parallel_requests": 4,
            "timeout": null, "extra_body": null, "encoding_format": "float", "dimensions": null},
         "provider": "openai", "skip_health_check": false},
        {"alias": "openrouter-embedding", "model": "openai/text-embedding-3-large",
         "inference_parameters": {"generation_type": "embedding", "max_parallel_requests": 4,
            "timeout": null, "extra_body": null, "encoding_format": "float", "dimensions": null},
         "provider": "openrouter", "skip_health_check": false}
    ])
}

async fn start(backend: Backend) -> (TestApp, MockLlm) {
    app_with_mock_llm(backend, json!({"rules": []}), |_| {}).await
}

/// The defaults ride along unused: the job runs, and only the server's model is called.
async fn default_model_configs(backend: Backend) {
    let (app, mock) = start(backend).await;
    let config = json!({
        "columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category",
             "params": {"values": ["a", "b"]}},
            {"name": "text", "column_type": "llm-text", "model_alias": "writer",
             "prompt": "Write about {{ topic }}."}
        ],
        "model_configs": datadesigner_defaults(),
    });
    let (status, job) = app
        .create_job(
            &json!({"config": {"data_designer": config, "library_version": "0.9.6"},
            "num_records": 3}),
        )
        .await;
    assert_eq!(status, 202, "{job}");
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let models: Vec<String> = mock.requests().into_iter().map(|r| r.model).collect();
    assert_eq!(models, ["mock-writer"; 3], "no default model was called");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_column_needs_a_chat_completion_model() {
    let (app, _mock) = start(Backend::Sqlite).await;
    let submit = |model_configs: Value, alias: &str| {
        json!({"config": {
            "columns": [{"name": "text", "column_type": "llm-text", "model_alias": alias,
                "prompt": "Hi."}],
            "model_configs": model_configs,
        }, "num_records": 1})
    };
    // On the server's provider, so only the type is wrong.
    let embedding = json!([{"alias": "emb", "model": "e", "provider": "mock",
        "inference_parameters": {"dimensions": 256}}]);
    let (status, body) = app.create_job(&submit(embedding, "emb")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "model_type_mismatch", "{body}");
    let detail = &body["error"]["details"][0];
    assert_eq!(detail["column"], "text", "{body}");
    assert_eq!(detail["field"], "model_alias", "{body}");
    let message = detail["message"].as_str().unwrap();
    assert!(message.contains("'emb' is an embedding model"), "{message}");

    let image = json!([{"alias": "img", "model": "i", "provider": "mock",
        "inference_parameters": {"generation_type": "image"}}]);
    let (status, body) = app.create_job(&submit(image, "img")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "model_type_mismatch", "{body}");

    // A model a column uses still needs a provider the server defines.
    let (status, body) = app
        .create_job(&submit(datadesigner_defaults(), "nvidia-text"))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_model_config", "{body}");
    assert_eq!(
        body["error"]["details"][0]["field"], "model_configs[0].provider",
        "{body}"
    );

    // Fields of one generation type on another are refused, naming the field.
    let mixed = json!([{"alias": "emb", "model": "e", "provider": "mock",
        "inference_parameters": {"generation_type": "embedding", "temperature": 0.5}}]);
    let (status, body) = app.create_job(&submit(mixed, "writer")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_model_config", "{body}");
    assert!(
        body["error"]["details"][0]["field"]
            .as_str()
            .unwrap()
            .ends_with("inference_parameters.temperature"),
        "{body}"
    );
    app.stop().await;
}
