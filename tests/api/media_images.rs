//! `image` columns: images drawn by an image model on the mock LLM are stored beside the record
//! (never in its JSON values), served by `GET /v1/records/{id}/media/{column}/{index}` with
//! their content type, exported as references, inlined as base64 by a preview (which stores
//! nothing), and refused past `limits.max_image_bytes`.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::{Api, MockLlm, PNG};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm};

backends!(
    image_columns_store_and_serve_their_images,
    images_end_to_end
);

async fn start(backend: Backend, max_image_bytes: usize) -> (TestApp, MockLlm) {
    app_with_mock_llm(backend, json!({"rules": []}), move |c| {
        c.limits.max_image_bytes = max_image_bytes;
        c.model_configs.push(
            serde_json::from_value(json!({"alias": "painter", "model": "dall-e-mock",
                "provider": "mock", "inference_parameters": {"generation_type": "image",
                "extra_body": {"size": "256x256"}}}))
            .unwrap(),
        );
    })
    .await
}

fn config() -> Value {
    json!({"columns": [
        {"name": "subject", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["cat", "owl"]}},
        {"name": "picture", "column_type": "image", "model_alias": "painter",
         "prompt": "A watercolour {{ subject }}."},
        {"name": "caption", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Describe the picture.", "multi_modal_context": [
            {"modality": "image", "column_name": "picture", "data_type": null,
             "image_format": null}]}
    ]})
}

async fn images_end_to_end(backend: Backend) {
    let (app, mock) = start(backend, 1 << 20).await;
    let (status, job) = app
        .create_job(&json!({"config": config(), "num_records": 2}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    let done = app.wait_for_job(id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["usage"]["painter"]["requests"], 2, "{done}");
    for r in app.all_records(id).await {
        let rid = r["id"].as_str().unwrap();
        let url = format!("/v1/records/{rid}/media/picture/0");
        assert_eq!(
            r["values"]["picture"],
            json!([{"media_id": format!("{rid}/picture/0"), "mime_type": "image/png",
                "url": url}]),
            "{r}"
        );
        let resp = app.client.get(app.url(&url)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "image/png");
        // Model-made bytes never run as a page of this origin.
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        let csp = resp.headers()["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("sandbox") && csp.contains("default-src 'none'"),
            "{csp}"
        );
        assert_eq!(resp.bytes().await.unwrap().as_ref(), PNG);
        let (status, body) = app.get(&format!("/v1/records/{rid}/media/picture/1")).await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["error"]["code"], "media_not_found", "{body}");
    }
    // The diffusion route: the images API with the prompt and extra_body.
    let sent: Vec<Value> = mock
        .requests()
        .into_iter()
        .filter(|r| r.api == Api::Images)
        .map(|r| r.body)
        .collect();
    assert_eq!(sent.len(), 2);
    assert!(
        sent[0]["prompt"]
            .as_str()
            .unwrap()
            .starts_with("A watercolour "),
        "{}",
        sent[0]
    );
    assert_eq!(sent[0]["size"], "256x256", "{}", sent[0]);
    // A later column's multi_modal_context gets the drawn image itself, as a data URI.
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let chat = mock
        .requests()
        .into_iter()
        .find(|r| r.api == Api::Openai)
        .expect("the caption request");
    assert_eq!(
        chat.body["messages"][0]["content"],
        json!([{"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}},
               {"type": "text", "text": "Describe the picture."}]),
        "{}",
        chat.body
    );
    // The export holds references, not image data.
    let (status, jsonl) = app
        .get_text(&format!("/v1/jobs/{id}/records?format=jsonl"))
        .await;
    assert_eq!(status, 200);
    assert!(jsonl.contains("/media/picture/0"), "{jsonl}");
    assert!(!jsonl.contains("iVBORw0KGgo"), "{jsonl}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_inline_images_and_limits_hold() {
    let (app, _mock) = start(Backend::Sqlite, 1 << 20).await;
    let resp = app
        .client
        .post(app.url("/v1/preview"))
        .json(&json!({"config": config(), "num_records": 1}))
        .send()
        .await
        .unwrap();
    let (status, body) = crate::helpers::status_json(resp).await;
    assert_eq!(status, 200, "{body}");
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    assert_eq!(body["records"][0]["status"], "completed", "{body}");
    assert_eq!(
        body["records"][0]["values"]["picture"],
        json!([b64]),
        "{body}"
    );

    // An image column on a chat model is refused, naming the column.
    let mut wrong = config();
    wrong["columns"][1]["model_alias"] = json!("writer");
    let (status, body) = app
        .create_job(&json!({"config": wrong, "num_records": 1}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["details"][0]["code"], "model_type_mismatch");
    assert_eq!(body["error"]["details"][0]["column"], "picture");
    app.stop().await;

    let (app, _mock) = start(Backend::Sqlite, 10).await;
    let (_, job) = app
        .create_job(&json!({"config": config(), "num_records": 1}))
        .await;
    let id = job["id"].as_str().unwrap();
    app.wait_for_job(id, Duration::from_secs(60)).await;
    let records = app.all_records(id).await;
    assert_eq!(
        records[0]["error"]["code"], "image_too_large",
        "{records:?}"
    );
    app.stop().await;
}

/// A model that is not a diffusion model draws on chat completions: the prompt after its image
/// context in the user message, the image read from `message.images`; no image is a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_route_image_models_get_the_context_and_answer_in_message_images() {
    let script = json!({"rules": [
        {"when": {"model": "mock-painter", "user_contains": "owl"}, "reply": {"text": "no"}},
        {"when": {"model": "mock-painter"}, "reply": {"text": "", "image": true}}
    ]});
    let (app, mock) = app_with_mock_llm(Backend::Sqlite, script, |c| {
        c.model_configs.push(
            serde_json::from_value(json!({"alias": "painter", "model": "mock-painter",
                "provider": "mock", "inference_parameters": {"generation_type": "image"}}))
            .unwrap(),
        );
    })
    .await;
    let job = |subject: &str| {
        json!({"config": {"columns": [
            {"name": "sketch", "column_type": "expression",
             "expr": "https://img.example/sketch.png"},
            {"name": "picture", "column_type": "image", "model_alias": "painter",
             "prompt": format!("Paint a {subject}."),
             "multi_modal_context": [{"column_name": "sketch"}]}
        ]}, "num_records": 1, "run_config": {"disable_early_shutdown": true}})
    };
    let (_, created) = app.create_job(&job("cat")).await;
    let id = created["id"].as_str().unwrap();
    app.wait_for_job(id, Duration::from_secs(60)).await;
    let records = app.all_records(id).await;
    assert_eq!(
        records[0]["values"]["picture"][0]["mime_type"], "image/png",
        "{records:?}"
    );
    let sent = &mock.requests()[0].body;
    assert_eq!(
        sent["messages"][0]["content"],
        json!([{"type": "image_url", "image_url": {"url": "https://img.example/sketch.png"}},
               {"type": "text", "text": "Paint a cat."}]),
        "{sent}"
    );

    let (_, created) = app.create_job(&job("owl")).await;
    let id = created["id"].as_str().unwrap();
    app.wait_for_job(id, Duration::from_secs(60)).await;
    let error = &app.all_records(id).await[0]["error"];
    assert_eq!(error["code"], "llm_invalid_response", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("No image data found in image generation response"),
        "{error}"
    );
    app.stop().await;
}
