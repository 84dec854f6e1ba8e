//! LLM columns end to end: the gateway generates `llm-text`, `llm-structured` and `llm-judge`
//! columns against the scripted mock LLM (a test double) over real HTTP, stores the traces, and
//! serves them by record id.

use std::time::Duration;

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::{MockLlm, Script};

use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app_with};

async fn app_with_mock(backend: Backend, script: Value) -> (TestApp, MockLlm) {
    let script: Script = serde_json::from_value(script).unwrap();
    let mock = MockLlm::start(script).await.unwrap();
    let endpoint = mock.endpoint();
    let app = spawn_app_with(backend, move |c| {
        c.llm.retry_base_delay_ms = 10;
        c.model_providers = vec![
            serde_json::from_value(
                json!({"name": "mock", "endpoint": endpoint, "api_key": "sk-test-never-shown"}),
            )
            .unwrap(),
        ];
        c.model_configs = vec![
            serde_json::from_value(
                json!({"alias": "writer", "model": "mock-writer", "provider": "mock",
                "inference_parameters": {"max_parallel_requests": 4, "temperature": 0.5}}),
            )
            .unwrap(),
        ];
    })
    .await;
    (app, mock)
}

fn llm_config() -> Value {
    json!({"columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category",
         "params": {"values": ["math", "history"]}},
        {"name": "answer", "column_type": "llm-text", "model_alias": "writer",
         "system_prompt": "You are terse.", "prompt": "Explain {{ topic }}.",
         "with_trace": "all_messages", "extract_reasoning_content": true},
        {"name": "summary", "column_type": "llm-structured", "model_alias": "writer",
         "prompt": "Summarize: {{ answer }}", "with_trace": "last_message",
         "output_format": {"type": "object", "properties": {"title": {"type": "string"},
             "score": {"type": "integer", "minimum": 1}}, "required": ["title", "score"]}},
        {"name": "grade", "column_type": "llm-judge", "model_alias": "writer",
         "prompt": "Grade: {{ answer }}",
         "scores": [{"name": "clarity", "description": "Is it clear?", "options": {"1": "no", "2": "yes"}}]}
    ]})
}

async fn text_structured_judge_with_traces(backend: Backend) {
    let (app, mock) = app_with_mock(
        backend,
        json!({"rules": [
            {"when": {"user_contains": "Explain"},
             "reply": {"text": "  Numbers and shapes.  ", "reasoning": "  think first  "}}
        ]}),
    )
    .await;
    let (status, job) = app
        .create_job(&json!({"config": llm_config(), "num_records": 20}))
        .await;
    assert_eq!(status, 202, "{job}");
    assert_eq!(
        job["columns"],
        json!([
            "topic",
            "answer",
            "answer__reasoning_content",
            "summary",
            "grade"
        ])
    );
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(60))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 20);
    // Usage per model alias: 3 LLM columns x 20 records, tokens as the mock reported them.
    let usage = &done["usage"]["writer"];
    assert_eq!(usage["requests"], 60, "{done}");
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(usage["completion_tokens"].as_u64().unwrap() > 0);
    let (status, metrics) = app.get_text("/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("synthgate_llm_requests_total{model_alias=\"writer\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("synthgate_records_finished_total{status=\"completed\"}"),
        "{metrics}"
    );

    let records = app.all_records(job["id"].as_str().unwrap()).await;
    let r = &records[0];
    let v = &r["values"];
    assert_eq!(v["answer"], "Numbers and shapes.", "content is stripped");
    assert_eq!(v["answer__reasoning_content"], "think first");
    // The mock answers a <response_schema> prompt with a minimal valid object.
    assert!(v["summary"]["title"].is_string(), "{v}");
    assert!(v["summary"]["score"].as_i64().unwrap() >= 1, "{v}");
    // The option as the config writes it (a string key), as DataDesigner returns it.
    assert_eq!(v["grade"]["clarity"]["score"], "1", "{v}");

    // Traces by record id, in DataDesigner's shape.
    let (status, t) = app
        .get(&format!("/v1/records/{}/trace", r["id"].as_str().unwrap()))
        .await;
    assert_eq!(status, 200, "{t}");
    let traces = t["traces"].as_array().unwrap();
    let columns: Vec<&str> = traces
        .iter()
        .map(|x| x["column"].as_str().unwrap())
        .collect();
    assert_eq!(columns.len(), 2, "grade keeps no trace: {columns:?}");
    let answer = traces.iter().find(|x| x["column"] == "answer").unwrap();
    let topic = v["topic"].as_str().unwrap();
    assert_eq!(
        answer["messages"],
        json!([
            {"role": "system", "content": [{"type": "text", "text": "You are terse."}]},
            {"role": "user", "content": [{"type": "text", "text": format!("Explain {topic}.")}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Numbers and shapes."}],
             "reasoning_content": "  think first  "}
        ])
    );
    let summary = traces.iter().find(|x| x["column"] == "summary").unwrap();
    let msgs = summary["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "last_message keeps only the final answer");
    assert_eq!(msgs[0]["role"], "assistant");
    let (status, one) = app
        .get(&format!(
            "/v1/records/{}/trace?column=summary",
            r["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(one["traces"].as_array().unwrap().len(), 1);
    let (status, err) = app
        .get(&format!(
            "/v1/records/{}/trace?column=grade",
            r["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 404);
    assert_eq!(err["error"]["code"], "trace_not_found");

    // `{column}__trace` in dataset rows and exports, on request only.
    let id = job["id"].as_str().unwrap();
    let (_, page) = app
        .get(&format!(
            "/v1/jobs/{id}/records?limit=1&include_traces=true"
        ))
        .await;
    let row = &page["records"][0]["values"];
    assert_eq!(row["answer__trace"], answer["messages"]);
    assert!(row.get("grade__trace").is_none());
    assert!(
        r["values"].get("answer__trace").is_none(),
        "traces only when asked"
    );
    let (_, jsonl) = app
        .get_text(&format!(
            "/v1/jobs/{id}/records?format=jsonl&include_traces=true"
        ))
        .await;
    let first: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(first["answer__trace"], answer["messages"]);
    let (_, csv) = app
        .get_text(&format!(
            "/v1/jobs/{id}/records?format=csv&include_traces=true"
        ))
        .await;
    assert_eq!(
        csv.lines().next().unwrap(),
        "topic,answer,answer__reasoning_content,summary,grade,answer__trace,summary__trace"
    );

    // What the model saw: system + user prompt, with the JSON instructions for structured.
    let requests = mock.requests();
    assert_eq!(requests.len(), 60, "one request per LLM column per record");
    let structured = requests
        .iter()
        .find(|q| q.body.to_string().contains("Summarize"))
        .unwrap();
    let user = structured.body["messages"][0]["content"].to_string();
    assert!(user.contains("<response_schema>"), "{user}");
    assert_eq!(structured.body["temperature"], 0.5);
    // max_parallel_requests of the alias bounds the mock's in-flight requests.
    let stats = mock.stats();
    assert!(stats.models["mock-writer"].max_in_flight <= 4, "{stats:?}");
    app.stop().await;
}
backends!(llm_columns, text_structured_judge_with_traces);

async fn invalid_json_is_corrected_then_fails_cleanly(backend: Backend) {
    // The first structured answer is not JSON; with one correction step the second is used.
    let (app, mock) = app_with_mock(
        backend,
        json!({"rules": [
            {"when": {"assistant_turns": 0}, "reply": {"text": "no json here"}, "times": 1}
        ]}),
    )
    .await;
    let config = json!({"columns": [
        {"name": "s", "column_type": "llm-structured", "model_alias": "writer", "prompt": "Give JSON",
         "with_trace": "all_messages",
         "output_format": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}
    ]});
    let (_, job) = app
        .create_job(&json!({"config": config, "num_records": 1,
            "run_config": {"max_conversation_correction_steps": 1, "max_conversation_restarts": 0}}))
        .await;
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(done["counts"]["completed"], 1, "{done}");
    let rec = &app.all_records(job["id"].as_str().unwrap()).await[0];
    let (_, t) = app
        .get(&format!(
            "/v1/records/{}/trace",
            rec["id"].as_str().unwrap()
        ))
        .await;
    let roles: Vec<&str> = t["traces"][0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user", "assistant"],
        "the correction is in the trace"
    );

    // With no corrections or restarts allowed, an unparsable answer fails the record with a code.
    mock.set_script(
        serde_json::from_value(json!({"rules": [{"reply": {"text": "still no json"}}]})).unwrap(),
    );
    let (_, job) = app
        .create_job(&json!({"config": config, "num_records": 1,
            "run_config": {"max_conversation_restarts": 0, "disable_early_shutdown": true}}))
        .await;
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(done["counts"]["failed"], 1, "{done}");
    assert_eq!(
        done["first_errors"][0]["error"]["code"],
        "llm_output_invalid"
    );
    assert_eq!(done["first_errors"][0]["error"]["column"], "s");
    app.stop().await;
}
backends!(
    llm_corrections,
    invalid_json_is_corrected_then_fails_cleanly
);

fn text_only() -> Value {
    json!({"columns": [
        {"name": "n", "column_type": "sampler", "sampler_type": "uniform", "params": {"low": 0, "high": 1}},
        {"name": "t", "column_type": "llm-text", "model_alias": "writer", "prompt": "Say {{ n }}"}
    ]})
}

async fn transient_errors_are_retried_until_every_record_completes(backend: Backend) {
    // Every 20th request fails with 500 (5 %), every 50th with 429 + Retry-After: 1.
    let (app, mock) = app_with_mock(
        backend,
        json!({"faults": {"error_every": 20, "error_status": 500, "rate_limit_every": 50, "retry_after": "1"}}),
    )
    .await;
    let (_, job) = app
        .create_job(&json!({"config": text_only(), "num_records": 1000}))
        .await;
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(120))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["counts"]["completed"], 1000);
    assert_eq!(done["counts"]["failed"], 0);
    let stats = mock.stats();
    let requests = stats.models["mock-writer"].requests;
    assert!(
        requests > 1000,
        "faults were injected and retried: {requests} requests"
    );
    assert!(stats.models["mock-writer"].max_in_flight <= 4, "{stats:?}");
    app.stop().await;
}
backends!(
    llm_retries,
    transient_errors_are_retried_until_every_record_completes
);

async fn permanent_auth_failure_fails_fast_without_the_key(backend: Backend) {
    let (app, mock) = app_with_mock(
        backend,
        json!({"rules": [{"reply": {"status": 401,
            "body": {"error": {"message": "Incorrect API key provided: sk-test-never-shown"}}}}]}),
    )
    .await;
    let (_, job) = app
        .create_job(&json!({"config": text_only(), "num_records": 5,
            "run_config": {"disable_early_shutdown": true}}))
        .await;
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(done["counts"]["failed"], 5, "{done}");
    let err = &done["first_errors"][0]["error"];
    assert_eq!(err["code"], "llm_auth_failed");
    assert!(
        !done.to_string().contains("sk-test-never-shown"),
        "key leaked: {done}"
    );
    assert_eq!(
        mock.stats().models["mock-writer"].requests,
        5,
        "a 401 is not retried"
    );
    app.stop().await;
}
backends!(llm_auth, permanent_auth_failure_fails_fast_without_the_key);

async fn preview_returns_records_with_traces_and_stores_nothing(backend: Backend) {
    let (app, _mock) = app_with_mock(backend, json!({})).await;
    let resp = app
        .client
        .post(app.url("/v1/preview"))
        .json(&json!({"config": llm_config(), "num_records": 3, "seed": 9}))
        .send()
        .await
        .unwrap();
    let (status, body) = crate::helpers::status_json(resp).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["seed"], 9);
    let records = body["records"].as_array().unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(records[0]["status"], "completed", "{body}");
    assert!(
        records[0]["values"]["answer"]
            .as_str()
            .unwrap()
            .starts_with("mock reply")
    );
    assert_eq!(records[0]["traces"].as_array().unwrap().len(), 2);
    let (_, jobs) = app.get("/v1/jobs").await;
    assert_eq!(jobs["jobs"], json!([]), "preview stored a job");
    let resp = app
        .client
        .post(app.url("/v1/preview"))
        .json(&json!({"config": llm_config(), "num_records": 11}))
        .send()
        .await
        .unwrap();
    let (status, err) = crate::helpers::status_json(resp).await;
    assert_eq!(status, 422);
    assert_eq!(err["error"]["code"], "num_records_out_of_range");
    app.stop().await;
}
backends!(
    preview,
    preview_returns_records_with_traces_and_stores_nothing
);

async fn anthropic_provider_gets_the_messages_shape(backend: Backend) {
    let mock = MockLlm::start(Script::default()).await.unwrap();
    let endpoint = mock.endpoint();
    let app = spawn_app_with(backend, move |c| {
        c.model_providers = vec![
            serde_json::from_value(json!({"name": "claude", "endpoint": endpoint,
                "provider_type": "anthropic", "api_key": "sk-ant-test"}))
            .unwrap(),
        ];
        c.model_configs = vec![
            serde_json::from_value(
                json!({"alias": "c", "model": "claude-mock", "provider": "claude"}),
            )
            .unwrap(),
        ];
    })
    .await;
    let config = json!({"columns": [
        {"name": "t", "column_type": "llm-text", "model_alias": "c",
         "system_prompt": "Be brief.", "prompt": "Hello", "with_trace": "all_messages"}
    ]});
    let (_, job) = app
        .create_job(&json!({"config": config, "num_records": 2}))
        .await;
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(done["counts"]["completed"], 2, "{done}");
    let req = &mock.requests()[0];
    assert_eq!(req.body["system"], "Be brief.", "{}", req.body);
    assert_eq!(req.body["messages"][0]["role"], "user");
    assert!(
        req.body["max_tokens"].as_u64().unwrap() > 0,
        "Anthropic requires max_tokens"
    );
    assert_eq!(req.headers["x-api-key"], "sk-ant-test");
    let rec = &app.all_records(job["id"].as_str().unwrap()).await[0];
    assert_eq!(rec["values"]["t"], "mock reply: Hello");
    app.stop().await;
}
backends!(anthropic, anthropic_provider_gets_the_messages_shape);

async fn code_column_extracts_the_fenced_code(backend: Backend) {
    let (app, _mock) = app_with_mock(
        backend,
        json!({"rules": [{"when": {"user_contains": "Write"},
            "reply": {"text": "Sure:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."}}]}),
    )
    .await;
    let config = json!({"columns": [
        {"name": "code", "column_type": "llm-code", "model_alias": "writer", "code_lang": "python",
         "prompt": "Write an add function"}
    ]});
    let (_, job) = app
        .create_job(&json!({"config": config, "num_records": 2}))
        .await;
    let done = app
        .wait_for_job(job["id"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(done["counts"]["completed"], 2, "{done}");
    let rec = &app.all_records(job["id"].as_str().unwrap()).await[0];
    assert_eq!(rec["values"]["code"], "def add(a, b):\n    return a + b");
    app.stop().await;
}
backends!(llm_code, code_column_extracts_the_fenced_code);
