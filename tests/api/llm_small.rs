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
