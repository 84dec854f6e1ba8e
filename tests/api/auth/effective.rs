//! Allow lists follow what a job really uses: a restricted key cannot redefine an allowed
//! model alias onto another model, nor an allowed tool alias onto more tools; `extra_body`
//! cannot replace what the service computes; `GET /v1/tools` shows a key what it may use;
//! the bearer scheme is case-insensitive.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use synthgate_testkit::mock_llm::MockLlm;

use super::{KEY_A, call, with_keys};
use crate::backends;
use crate::db::Backend;
use crate::helpers::{TestApp, spawn_app_with, status_json};
use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio};

/// May use only model `cheap` and tool config `safe`.
const DAVE: &str = "key-d-0123456789abcdef";

/// The mock LLM (calls the hidden tool `fail` when offered tools, then answers), two MCP
/// providers, server models `writer` and `cheap`, server tool configs `safe` (echo only) and
/// `all`; keys alice (no lists) and dave (`cheap`, `safe`).
async fn app(backend: Backend) -> (TestApp, MockLlm, Events) {
    let events = Events::new();
    let (app, mock) = app_with_tools(
        backend,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "fail", "arguments": {}}]}}
        ]}),
        vec![
            mock_mcp_stdio("mock", &events.path),
            mock_mcp_stdio("mock2", &events.path),
        ],
        vec![
            json!({"tool_alias": "safe", "providers": ["mock"], "allow_tools": ["echo"]}),
            json!({"tool_alias": "all", "providers": ["mock"]}),
        ],
        |c| {
            c.model_configs.push(
                serde_json::from_value(
                    json!({"alias": "cheap", "model": "mock-cheap", "provider": "mock"}),
                )
                .unwrap(),
            );
            c.auth = serde_json::from_value(json!({"api_keys": [
                {"name": "alice", "key": KEY_A},
                {"name": "dave", "key": DAVE, "allow_models": ["cheap"], "allow_tools": ["safe"]},
            ]}))
            .unwrap();
        },
    )
    .await;
    (app, mock, events)
}

/// A job of `n` records: one `llm-text` column on `model` (and `tool`), plus `extra` config
/// keys (`model_configs`, `tool_configs`).
fn job(model: &str, tool: Option<&str>, extra: Value) -> Value {
    let mut column = json!({"name": "answer", "column_type": "llm-text", "model_alias": model,
        "prompt": "Say hi.", "with_trace": "all_messages"});
    if let Some(t) = tool {
        column["tool_alias"] = json!(t);
    }
    let mut config = json!({"columns": [column]});
    config
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"num_records": 2, "config": config})
}

/// Submits as `key`, then waits for the job to finish; returns the finished job.
async fn run_as(app: &TestApp, key: &str, body: &Value) -> Value {
    let (status, job) = call(app, "POST", "/v1/jobs", Some(key), Some(body)).await;
    assert_eq!(status, 202, "{job}");
    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, j) = call(app, "GET", &path, Some(key), None).await;
        assert_eq!(status, 200, "{j}");
        if ["completed", "failed", "cancelled"].contains(&j["status"].as_str().unwrap()) {
            return j;
        }
        assert!(Instant::now() < deadline, "job never finished: {j}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `(status, code, first detail's field)` of a submit and of the same body as a preview, which
/// must agree.
async fn refusal(app: &TestApp, key: &str, body: &Value) -> (u16, String, Option<String>) {
    let mut out = Vec::new();
    for path in ["/v1/jobs", "/v1/preview"] {
        let (status, b) = call(app, "POST", path, Some(key), Some(body)).await;
        out.push((
            status,
            b["error"]["code"].as_str().unwrap_or_default().to_owned(),
            b["error"]["details"][0]["field"]
                .as_str()
                .map(str::to_owned),
        ));
    }
    assert_eq!(out[0], out[1], "submit and preview agree");
    out.remove(0)
}

async fn restricted_keys_call_only_the_models_they_may(backend: Backend) {
    let (app, mock, _events) = app(backend).await;
    // Dave redefines his allowed alias onto a model he may not use, or onto another server
    // model: refused, whatever else the definition says.
    for model in ["gpt-forbidden", "mock-writer"] {
        let body = job(
            "cheap",
            None,
            json!({"model_configs": [{"alias": "cheap", "model": model, "provider": "mock"}]}),
        );
        let (status, b) = call(&app, "POST", "/v1/jobs", Some(DAVE), Some(&body)).await;
        assert_eq!(
            (status, b["error"]["code"].as_str()),
            (403, Some("alias_not_allowed")),
            "{b}"
        );
        let msg = b["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("only as the server defines it") && msg.contains(model),
            "{msg}"
        );
        assert_eq!(refusal(&app, DAVE, &body).await.0, 403);
    }
    // He may re-tune the alias he is allowed, keeping its provider and model.
    let retuned = job(
        "cheap",
        None,
        json!({"model_configs": [{"alias": "cheap", "model": "mock-cheap", "provider": "mock",
            "inference_parameters": {"temperature": 0.25, "max_parallel_requests": 1}}]}),
    );
    let done = run_as(&app, DAVE, &retuned).await;
    assert_eq!(done["status"], "completed", "{done}");

    // extra_body may not replace a field the service computes, for any key; the field is named.
    for (field, value) in [
        ("model", json!("gpt-forbidden")),
        ("messages", json!([{"role": "user", "content": "other"}])),
        ("tools", json!([])),
        ("tool_choice", json!("required")),
        ("stream", json!(true)),
        ("n", json!(3)),
        ("system", json!("x")),
    ] {
        let body = job(
            "own",
            None,
            json!({"model_configs": [{"alias": "own", "model": "mock-writer", "provider": "mock",
                "inference_parameters": {"extra_body": {"seed": 7, field: value}}}]}),
        );
        let (status, code, at) = refusal(&app, KEY_A, &body).await;
        assert_eq!(
            (status, code.as_str(), at.as_deref()),
            (
                422,
                "reserved_extra_body_field",
                Some(format!("model_configs[0].inference_parameters.extra_body.{field}").as_str())
            )
        );
    }
    // Other extra_body fields still reach the provider.
    let seeded = job(
        "own",
        None,
        json!({"model_configs": [{"alias": "own", "model": "mock-writer", "provider": "mock",
            "inference_parameters": {"extra_body": {"seed": 7}}}]}),
    );
    let done = run_as(&app, KEY_A, &seeded).await;
    assert_eq!(done["status"], "completed", "{done}");

    // The mock saw only the allowed model for dave's job, with the job's tuning, and its own
    // conversation; the forbidden model was never called.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let (dave, alice) = requests.split_at(2);
    for r in dave {
        assert_eq!(r.model, "mock-cheap");
        assert_eq!(r.body["temperature"], 0.25);
    }
    for r in alice {
        assert_eq!(r.model, "mock-writer");
        assert_eq!(r.body["seed"], 7);
    }
    for r in &requests {
        assert_eq!(r.body["messages"][0]["content"], "Say hi.", "{r:?}");
    }
    app.stop().await;
}
backends!(
    restricted_models,
    restricted_keys_call_only_the_models_they_may
);

async fn tool_aliases_only_narrow_and_the_list_shows_what_a_key_may_use(backend: Backend) {
    let (app, _mock, events) = app(backend).await;
    let redefine = |cfg: Value| job("cheap", Some("safe"), json!({"tool_configs": [cfg]}));
    // Redefining the server's `safe` without its allow list, with a tool it hides, or with a
    // provider it does not route to: refused for every key, naming the field.
    for (cfg, field) in [
        (
            json!({"tool_alias": "safe", "providers": ["mock"]}),
            "tool_configs[0].allow_tools",
        ),
        (
            json!({"tool_alias": "safe", "providers": ["mock"], "allow_tools": ["echo", "fail"]}),
            "tool_configs[0].allow_tools[1]",
        ),
        (
            json!({"tool_alias": "safe", "providers": ["mock2"], "allow_tools": ["echo"]}),
            "tool_configs[0].providers[0]",
        ),
    ] {
        for key in [DAVE, KEY_A] {
            let (status, code, at) = refusal(&app, key, &redefine(cfg.clone())).await;
            assert_eq!(
                (status, code.as_str(), at.as_deref()),
                (422, "invalid_tool_config", Some(field)),
                "{cfg}"
            );
        }
    }
    // A tool alias of dave's own is not in his list, whatever it names.
    let own = job(
        "cheap",
        Some("mine"),
        json!({"tool_configs": [{"tool_alias": "mine", "providers": ["mock"], "allow_tools": ["echo"]}]}),
    );
    let (status, code, _) = refusal(&app, DAVE, &own).await;
    assert_eq!((status, code.as_str()), (403, "alias_not_allowed"));

    // Narrowing is fine: the model asks for the hidden `fail`, is told it is not permitted,
    // and `fail` never runs.
    let narrowed = redefine(json!({"tool_alias": "safe", "providers": ["mock"],
        "allow_tools": ["echo"], "max_tool_call_turns": 2}));
    let done = run_as(&app, DAVE, &narrowed).await;
    assert_eq!(done["status"], "completed", "{done}");
    let (_, page) = call(
        &app,
        "GET",
        &format!("/v1/jobs/{}/records", done["id"].as_str().unwrap()),
        Some(DAVE),
        None,
    )
    .await;
    let record = page["records"][0]["id"].as_str().unwrap();
    let (status, t) = call(
        &app,
        "GET",
        &format!("/v1/records/{record}/trace?column=answer"),
        Some(DAVE),
        None,
    )
    .await;
    assert_eq!(status, 200, "{t}");
    let tool_msg = t["traces"][0]["messages"][2]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(tool_msg.contains("not permitted"), "{tool_msg}");
    assert_eq!(events.calls("fail"), 0);

    // GET /v1/tools: dave sees his one tool config, its provider and only the tools it offers.
    let (status, tools) = call(&app, "GET", "/v1/tools", Some(DAVE), None).await;
    assert_eq!(status, 200, "{tools}");
    let aliases: Vec<&str> = tools["tool_configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tool_alias"].as_str().unwrap())
        .collect();
    assert_eq!(aliases, ["safe"], "{tools}");
    let offered: Vec<&str> = tools["tool_configs"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["echo"]);
    let providers = tools["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 1, "{tools}");
    assert_eq!(providers[0]["name"], "mock");
    assert_eq!(providers[0]["tools"], json!(["echo"]), "{tools}");
    assert!(!tools.to_string().contains("\"fail\""), "{tools}");
    // Alice (no list, so she may compose tool configs over any provider) sees everything.
    let (_, tools) = call(&app, "GET", "/v1/tools", Some(KEY_A), None).await;
    assert_eq!(
        tools["tool_configs"].as_array().unwrap().len(),
        2,
        "{tools}"
    );
    assert_eq!(tools["providers"].as_array().unwrap().len(), 2, "{tools}");
    let mock = tools["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "mock")
        .unwrap();
    assert!(
        mock["tools"].as_array().unwrap().contains(&json!("fail")),
        "{tools}"
    );
    app.stop().await;
}
backends!(
    restricted_tools,
    tool_aliases_only_narrow_and_the_list_shows_what_a_key_may_use
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive() {
    let app = spawn_app_with(Backend::Sqlite, with_keys).await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let resp = app
            .client
            .get(app.url("/v1/jobs"))
            .header("authorization", format!("{scheme} {KEY_A}"))
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        assert_eq!(status, 200, "{scheme}: {body}");
    }
    for header in [format!("Basic {KEY_A}"), format!("Bearer{KEY_A}")] {
        let resp = app
            .client
            .get(app.url("/v1/jobs"))
            .header("authorization", header.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{header}");
    }
    app.stop().await;
}
