//! The small LLM-column behaviours of DataDesigner: an `llm-code` reply without usable code
//! fails the record after the correction steps and restarts; `tool_choice` is sent and dropped
//! after the first tool turn; `multi_modal_context` reaches the model as image parts.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::MockLlm;

use crate::db::Backend;
use crate::helpers::{TestApp, app_with_mock_llm};

async fn run(app: &TestApp, config: Value, run_config: Value) -> Vec<Value> {
    let (status, job) = app
        .create_job(&json!({"config": config, "num_records": 1, "run_config": run_config}))
        .await;
    assert_eq!(status, 202, "{job}");
    let id = job["id"].as_str().unwrap();
    app.wait_for_job(id, Duration::from_secs(60)).await;
    app.all_records(id).await
}

fn chat_bodies(mock: &MockLlm) -> Vec<Value> {
    mock.requests().into_iter().map(|r| r.body).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_reply_without_code_fails_the_record() {
    let script = json!({"rules": [
        {"when": {"user_contains": "prose"}, "reply": {"text": "Sure, here is how you add numbers."}},
        {"when": {"user_contains": "wrong"}, "reply": {"text": "```javascript\nlet x = 1;\n```"}}
    ]});
    let (app, mock) = app_with_mock_llm(Backend::Sqlite, script, |_| {}).await;
    let code = |prompt: &str| {
        json!({"columns": [{"name": "code", "column_type": "llm-code", "model_alias": "writer",
            "code_lang": "python", "prompt": prompt}]})
    };
    let run_config =
        json!({"max_conversation_restarts": 1, "max_conversation_correction_steps": 1});
    let records = run(&app, code("Write prose"), run_config.clone()).await;
    let error = &records[0]["error"];
    assert_eq!(error["code"], "llm_output_invalid", "{error}");
    assert_eq!(error["column"], "code", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .ends_with("No parsable code response."),
        "{error}"
    );
    // One correction step and one restart: 2 conversations of 2 requests.
    assert_eq!(chat_bodies(&mock).len(), 4);

    // Without corrections (a correction turn's user text would not match the rule).
    let once = json!({"max_conversation_restarts": 0});
    let records = run(&app, code("Write the wrong language"), once).await;
    let message = records[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("Responded with code not matching the requested syntax (python)."),
        "{message}"
    );
    app.stop().await;
}

/// A 1×1 PNG, base64.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_modal_context_reaches_the_model_as_image_parts() {
    let (app, mock) = app_with_mock_llm(Backend::Sqlite, json!({"rules": []}), |c| {
        let endpoint = c.model_providers[0].endpoint.clone();
        c.model_providers.push(
            serde_json::from_value(
                json!({"name": "claude", "endpoint": endpoint, "provider_type": "anthropic"}),
            )
            .unwrap(),
        );
        c.model_configs.push(
            serde_json::from_value(
                json!({"alias": "claude", "model": "mock-claude", "provider": "claude"}),
            )
            .unwrap(),
        );
    })
    .await;
    let config = json!({"columns": [
        {"name": "photo", "column_type": "expression", "expr": PNG_B64},
        {"name": "links", "column_type": "expression",
         "expr": "[\"https://img.example/a.jpg\", \"https://img.example/b\"]"},
        {"name": "caption", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Describe the photos.", "multi_modal_context": [
            {"modality": "image", "column_name": "photo"},
            {"modality": "image", "column_name": "links", "data_type": "url"}]},
        {"name": "caption2", "column_type": "llm-text", "model_alias": "claude",
         "prompt": "Describe it.", "multi_modal_context": [
            {"column_name": "photo", "data_type": "base64", "image_format": "png"}]}
    ]});
    let records = run(&app, config, json!({})).await;
    assert!(records[0]["error"].is_null(), "{records:?}");
    let bodies = chat_bodies(&mock);
    let openai = bodies
        .iter()
        .find(|b| b["model"] == "mock-writer")
        .expect("the OpenAI request");
    let data_uri = format!("data:image/png;base64,{PNG_B64}");
    assert_eq!(
        openai["messages"][0],
        json!({"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_uri}},
            {"type": "image_url", "image_url": {"url": "https://img.example/a.jpg"}},
            {"type": "image_url", "image_url": {"url": "https://img.example/b"}},
            {"type": "text", "text": "Describe the photos."}
        ]}),
        "{openai}"
    );
    let anthropic = bodies
        .iter()
        .find(|b| b["model"] == "mock-claude")
        .expect("the Anthropic request");
    assert_eq!(
        anthropic["messages"][0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                "data": PNG_B64}},
            {"type": "text", "text": "Describe it."}
        ]),
        "{anthropic}"
    );

    // A value that is no image fails the record before any request.
    mock.reset();
    let bad = json!({"columns": [
        {"name": "photo", "column_type": "expression", "expr": "not an image"},
        {"name": "caption", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Describe.", "multi_modal_context": [{"column_name": "photo"}]}
    ]});
    let records = run(&app, bad, json!({})).await;
    assert_eq!(
        records[0]["error"]["code"], "multi_modal_context_invalid",
        "{records:?}"
    );
    assert!(mock.requests().is_empty());
    // Audio and video go as DataDesigner's blocks to an OpenAI-compatible server; Anthropic's
    // Messages API has none, so its record fails naming why, before any request.
    mock.reset();
    let media = json!({"columns": [
        {"name": "clip", "column_type": "expression", "expr": "https://a/b.mp3"},
        {"name": "movie", "column_type": "expression", "expr": "AAAAIGZ0eXBpc29t"},
        {"name": "heard", "column_type": "llm-text", "model_alias": "writer",
         "prompt": "Describe.", "multi_modal_context": [
            {"modality": "audio", "column_name": "clip", "data_type": "url"},
            {"modality": "video", "column_name": "movie", "data_type": "base64",
             "video_format": "webm"}]}
    ]});
    let records = run(&app, media.clone(), json!({})).await;
    assert!(records[0]["error"].is_null(), "{records:?}");
    assert_eq!(
        chat_bodies(&mock)[0]["messages"][0]["content"],
        json!([
            {"type": "audio_url", "audio_url": {"url": "https://a/b.mp3"}},
            {"type": "video_url", "video_url": {"url": "data:video/webm;base64,AAAAIGZ0eXBpc29t"}},
            {"type": "text", "text": "Describe."}
        ])
    );
    mock.reset();
    let mut to_claude = media.clone();
    to_claude["columns"][2]["model_alias"] = json!("claude");
    let records = run(&app, to_claude, json!({})).await;
    let message = records[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no audio context blocks"), "{records:?}");
    assert!(mock.requests().is_empty());
    // A format DataDesigner does not name is refused at submit, naming the field.
    let mut ogg = json!({"config": media, "num_records": 1});
    ogg["config"]["columns"][2]["multi_modal_context"][0] = json!({"modality": "audio", "column_name": "clip", "data_type": "base64", "audio_format": "ogg"});
    let (status, body) = app.create_job(&ogg).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["details"][0]["code"], "invalid_config",
        "{body}"
    );
    assert_eq!(
        body["error"]["details"][0]["field"], "multi_modal_context[0].audio_format",
        "{body}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_choice_is_sent_until_the_first_tool_turn() {
    use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio, run_job, tool_job};
    let events = Events::new();
    let script = json!({"rules": [
        {"when": {"assistant_turns": 0}, "reply": {"tool_calls": [
            {"name": "echo", "arguments": {"text": "hi"}}]}},
        {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}}
    ]});
    let (app, mock) = app_with_tools(
        Backend::Sqlite,
        script,
        vec![mock_mcp_stdio("m", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["m"]})],
        |c| {
            c.model_configs[0].inference_parameters.tool_choice = Some(json!("required"));
        },
    )
    .await;
    let done = run_job(&app, &tool_job("t", 1), Duration::from_secs(60)).await;
    assert_eq!(done["counts"]["completed"], 1, "{done}");
    let bodies = chat_bodies(&mock);
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert_eq!(bodies[0]["tool_choice"], "required", "{}", bodies[0]);
    assert!(bodies[1].get("tool_choice").is_none(), "{}", bodies[1]);
    assert!(bodies[1]["tools"].is_array(), "the tools stay offered");

    // Not a shape both protocols can send: refused, naming the field.
    let (status, body) = app
        .create_job(&json!({"config": {"columns": [
            {"name": "a", "column_type": "llm-text", "model_alias": "forced", "prompt": "x"}],
            "model_configs": [{"alias": "forced", "model": "m", "provider": "mock",
                "inference_parameters": {"tool_choice": "sometimes"}}]}, "num_records": 1}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["details"][0]["field"], "model_configs[0].inference_parameters.tool_choice",
        "{body}"
    );
    app.stop().await;
}

/// llama-cpp-python's server (the first real server tried) answers HTTP 500 to any message
/// whose content is a list of text parts, which is how every message was sent: every text
/// record failed with `llm_server_error`. mock-llm's `string_content_only` answers the same
/// way. Text-only content now goes as a string: records with a system prompt, a judge and a
/// multi-turn correction all complete, and no request carries a text part list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_reads_only_string_content_gets_strings() {
    let script = json!({
        "faults": {"string_content_only": true},
        "rules": [
            {"when": {"user_contains": "Rate"}, "reply": {"json": {"quality": {"reasoning": "ok", "score": 4}}}},
            {"when": {"user_contains": "Write"}, "reply": {"text": "A short poem."}}
        ]
    });
    let (app, mock) = app_with_mock_llm(Backend::Sqlite, script, |_| {}).await;
    let config = json!({"columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["cats", "dogs"]}},
        {"name": "poem", "column_type": "llm-text", "model_alias": "writer",
         "system_prompt": "You are terse.", "prompt": "Write about {{ topic }}.",
         "with_trace": "all_messages"},
        {"name": "grade", "column_type": "llm-judge", "model_alias": "writer",
         "prompt": "Rate {{ poem }}.",
         "scores": [{"name": "quality", "description": "How good",
                     "options": {"1": "bad", "4": "good"}}]}
    ]});
    let records = run(&app, config, json!({})).await;
    assert!(records[0]["error"].is_null(), "{records:?}");
    assert_eq!(records[0]["values"]["poem"], "A short poem.", "{records:?}");
    assert_eq!(
        records[0]["values"]["grade"]["quality"]["reasoning"], "ok",
        "{records:?}"
    );
    let bodies = chat_bodies(&mock);
    assert_eq!(bodies.len(), 2, "no retries: {bodies:#?}");
    for body in &bodies {
        for m in body["messages"].as_array().unwrap() {
            assert!(m["content"].is_string(), "{m}");
        }
    }
    // The trace keeps DataDesigner's block lists.
    let (status, trace) = app
        .get(&format!(
            "/v1/records/{}/trace?column=poem",
            records[0]["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 200, "{trace}");
    let first = &trace["traces"][0]["messages"][0];
    assert_eq!(first["content"][0]["text"], "You are terse.", "{trace}");
    app.stop().await;
}

/// A provider with `structured_output` gets a structured or judge column's schema as
/// `response_format`, in the form it asked for (llama-cpp-python's `json_object` with a
/// `schema`, or `json_schema`), beside the same prompt instructions; text columns and
/// providers left at `prompt` (DataDesigner's way) get none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_sends_the_columns_schema_as_response_format() {
    let script = json!({"rules": [
        {"when": {"user_contains": "Rate"}, "reply": {"json": {"fun": {"reasoning": "r", "score": "2"}}}},
        {"when": {"user_contains": "Describe"}, "reply": {"json": {"name": "Tom"}}},
        {"reply": {"text": "ok"}}
    ]});
    let (app, mock) = app_with_mock_llm(Backend::Sqlite, script, |c| {
        let endpoint = c.model_providers[0].endpoint.clone();
        c.model_providers.push(
            serde_json::from_value(json!({"name": "grammar", "endpoint": endpoint,
                "structured_output": "json_object"}))
            .unwrap(),
        );
        c.model_providers.push(
            serde_json::from_value(json!({"name": "strict", "endpoint": endpoint,
                "structured_output": "json_schema"}))
            .unwrap(),
        );
    })
    .await;
    let person = json!({"type": "object", "properties": {"name": {"type": "string"}},
                        "required": ["name"]});
    let config = json!({
        "model_configs": [
            {"alias": "g", "model": "model-g", "provider": "grammar"},
            {"alias": "s", "model": "model-s", "provider": "strict"}
        ],
        "columns": [
            {"name": "person", "column_type": "llm-structured", "model_alias": "g",
             "prompt": "Describe someone.", "output_format": person},
            {"name": "line", "column_type": "llm-text", "model_alias": "g", "prompt": "Say hi."},
            {"name": "grade", "column_type": "llm-judge", "model_alias": "s",
             "prompt": "Rate {{ line }}.",
             "scores": [{"name": "fun", "description": "Fun", "options": {"1": "no", "2": "yes"}}]},
            {"name": "plain", "column_type": "llm-structured", "model_alias": "writer",
             "prompt": "Describe another.", "output_format": person}
        ]
    });
    let records = run(&app, config, json!({})).await;
    assert!(records[0]["error"].is_null(), "{records:?}");
    assert_eq!(records[0]["values"]["person"]["name"], "Tom", "{records:?}");
    let bodies = chat_bodies(&mock);
    let by_prompt = |needle: &str| {
        bodies
            .iter()
            .find(|b| b["messages"].to_string().contains(needle))
            .unwrap_or_else(|| panic!("no request with {needle}: {bodies:#?}"))
            .clone()
    };
    let structured = by_prompt("Describe someone.");
    assert_eq!(
        structured["response_format"],
        json!({"type": "json_object", "schema": person})
    );
    // The prompt still carries DataDesigner's instructions.
    assert!(
        structured["messages"]
            .to_string()
            .contains("response_schema")
    );
    assert!(by_prompt("Say hi.").get("response_format").is_none());
    let judge = by_prompt("Rate ");
    assert_eq!(judge["response_format"]["type"], "json_schema", "{judge}");
    assert_eq!(judge["response_format"]["json_schema"]["name"], "response");
    assert_eq!(
        judge["response_format"]["json_schema"]["schema"]["required"],
        json!(["fun"])
    );
    assert!(
        by_prompt("Describe another.")
            .get("response_format")
            .is_none()
    );
    app.stop().await;
}

/// Issue 50 item 3: `system_prompt: ''` (a notebook's `SYSTEM_PROMPT = ""`) means no system
/// message, as in DataDesigner, which renders only a non-empty template; it failed every
/// record with "the system prompt rendered to empty text". A template that renders empty
/// from missing data still fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_system_prompt_sends_no_system_message() {
    let script = json!({"rules": [{"reply": {"text": "Fine."}}]});
    let (app, mock) = app_with_mock_llm(Backend::Sqlite, script, |_| {}).await;
    let config = json!({"columns": [
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
         "system_prompt": "", "prompt": "Say something."}
    ]});
    let records = run(&app, config, json!({})).await;
    assert_eq!(records[0]["status"], "completed", "{records:?}");
    let bodies = chat_bodies(&mock);
    assert_eq!(bodies.len(), 1, "{bodies:#?}");
    let roles: Vec<&str> = bodies[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user"], "{bodies:#?}");

    // A template that renders to nothing because a field is missing still fails its record.
    let config = json!({"columns": [
        {"name": "obj", "column_type": "expression", "expr": "{\"a\": 1}"},
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
         "system_prompt": "{{ obj.missing }}", "prompt": "Say something."}
    ]});
    let records = run(&app, config, json!({})).await;
    assert_eq!(records[0]["status"], "failed", "{records:?}");
    assert_eq!(records[0]["error"]["code"], "template_error", "{records:?}");
    assert!(
        records[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("system prompt rendered to empty text"),
        "{records:?}"
    );
    app.stop().await;
}
