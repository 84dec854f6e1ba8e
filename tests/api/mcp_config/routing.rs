//! Where tool definitions and calls go: prompt-based tool calling (tools in the system prompt,
//! `<tool_call>` blocks in the text), inline HTTP tools next to MCP ones, and a model's
//! `mcp_servers` access list.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use synthgate_testkit::mock_mcp::{MockMcpHttp, Options};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{JOB_TIMEOUT, job, offered, tool_texts, trace};
use crate::db::Backend;
use crate::mcp_support::{Events, app_with_tools, mock_mcp_stdio, run_job};

/// The text of a message's content, a string or text blocks.
fn text(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_based_tool_calling_keeps_standard_traces() {
    let events = Events::new();
    let (app, llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"user_contains": "<tool_response>"}, "reply": {"text": "done"}},
            {"when": {"system_contains": "<tools>"}, "reply": {"text":
                "Let me check.\n<tool_call>{\"name\": \"echo\", \"arguments\": {\"text\": \"hi\"}}</tool_call>"}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"]})],
        |c| {
            c.model_configs.push(
                serde_json::from_value(json!({"alias": "prompted", "model": "mock-prompted",
                    "provider": "mock", "tool_call_strategy": "prompt_based"}))
                .unwrap(),
            );
        },
    )
    .await;
    let spec = job(
        1,
        &[("answer", "prompted", "t", "Use the tools for {{ n }}.")],
        json!([]),
        json!([]),
    );
    let done = run_job(&app, &spec, JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let record = &app.all_records(done["id"].as_str().unwrap()).await[0];
    assert_eq!(record["values"]["answer"], "done", "{record}");
    assert_eq!(events.calls("echo"), 1);

    // What the model saw: no tools field, the tools in the system prompt, the call written
    // back as text and the result as a user turn.
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for r in &requests {
        assert!(r.body.get("tools").is_none(), "{}", r.body);
        assert!(r.body.get("tool_choice").is_none(), "{}", r.body);
        let messages = r.body["messages"].as_array().unwrap();
        assert!(messages.iter().all(|m| m["role"] != "tool"), "{}", r.body);
        assert!(
            messages.iter().all(|m| m.get("tool_calls").is_none()),
            "{}",
            r.body
        );
        assert_eq!(messages[0]["role"], "system", "{}", r.body);
        let system = text(&messages[0]);
        assert!(system.contains("<tools>"), "{system}");
        assert!(system.contains(r#""name":"echo""#), "{system}");
        assert!(system.contains(r#""name":"whoami""#), "{system}");
    }
    let second = requests[1].body["messages"].as_array().unwrap();
    let [.., call, result] = second.as_slice() else {
        panic!("{second:?}")
    };
    assert_eq!(call["role"], "assistant");
    assert!(text(call).contains("<tool_call>"), "{call}");
    assert_eq!(result["role"], "user");
    let result = text(result);
    assert!(
        result.contains("<tool_response>") && result.contains("hi"),
        "{result}"
    );

    // The trace keeps the standard shape.
    let t = trace(&app, record["id"].as_str().unwrap(), "answer").await;
    let roles: Vec<&str> = t.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"], "{t:?}");
    let c = &t[1]["tool_calls"][0];
    assert_eq!(c["function"]["name"], "echo", "{t:?}");
    let args: Value = serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"text": "hi"}));
    assert_eq!(text(&t[1]), "Let me check.");
    assert_eq!(t[2]["tool_call_id"], c["id"]);
    assert_eq!(tool_texts(&t), ["hi"]);
    assert_eq!(text(&t[3]), "done");
    app.stop().await;
}

/// Prompt-based calls in the `TOOL:` / `PARAMETERS:` format, the opt-in "use the X tool"
/// fallback, and a broken block answered with an extraction error the model sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_based_reads_tool_lines_and_the_opt_in_fallback() {
    let events = Events::new();
    let (app, _llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"user_contains": "<tool_response>"}, "reply": {"text": "done"}},
            {"when": {"user_contains": "lines"}, "reply": {"text":
                "Checking.\nTOOL: echo\nPARAMETERS: {\"text\":\n  \"from lines\"}"}},
            {"when": {"user_contains": "mention"}, "reply": {"text":
                "I will use the whoami tool."}},
            {"when": {"user_contains": "broken"}, "reply": {"text":
                "TOOL: echo\nPARAMETERS: {\"text\": oops}"}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![json!({"tool_alias": "t", "providers": ["mock"]})],
        |c| {
            for (alias, fallback) in [("prompted", false), ("mentioning", true)] {
                c.model_configs.push(
                    serde_json::from_value(json!({"alias": alias, "model": "mock-prompted",
                        "provider": "mock", "tool_call_strategy": "prompt_based",
                        "tool_call_fallback": fallback}))
                    .unwrap(),
                );
            }
        },
    )
    .await;
    let spec = job(
        1,
        &[
            ("lines", "prompted", "t", "lines {{ n }}"),
            ("mention", "mentioning", "t", "mention {{ n }}"),
            ("plain", "prompted", "t", "mention {{ n }}"),
            ("broken", "prompted", "t", "broken {{ n }}"),
        ],
        json!([]),
        json!([]),
    );
    let done = run_job(&app, &spec, JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let record = &app.all_records(done["id"].as_str().unwrap()).await[0];
    let id = record["id"].as_str().unwrap();
    let values = &record["values"];
    assert_eq!(values["lines"], "done", "{record}");
    assert_eq!(values["mention"], "done", "{record}");
    assert_eq!(
        values["plain"], "I will use the whoami tool.",
        "without tool_call_fallback a mention is prose: {record}"
    );
    assert_eq!(values["broken"], "done", "{record}");

    let t = trace(&app, id, "lines").await;
    let c = &t[1]["tool_calls"][0];
    assert_eq!(c["function"]["name"], "echo", "{t:?}");
    assert_eq!(text(&t[1]), "Checking.");
    assert_eq!(tool_texts(&t), ["from lines"]);

    let t = trace(&app, id, "mention").await;
    assert_eq!(t[1]["tool_calls"][0]["function"]["name"], "whoami", "{t:?}");
    assert_eq!(t[1]["tool_calls"][0]["function"]["arguments"], "{}");
    assert!(tool_texts(&t)[0].starts_with("pid="), "{t:?}");

    let t = trace(&app, id, "broken").await;
    let said = &tool_texts(&t)[0];
    assert!(
        said.starts_with(
            "Error: Your tool call could not be read: the JSON after PARAMETERS: is not valid"
        ),
        "{said}"
    );
    assert_eq!(events.calls("echo"), 1, "only the readable call ran");
    assert_eq!(events.calls("whoami"), 1);
    assert_eq!(
        done["tool_usage"]["broken"]["tool_calls"]["echo"]["extraction_error"], 1,
        "{done}"
    );
    app.stop().await;
}

/// What an inline tool's endpoint received, by path.
type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// A tool endpoint: `/lookup` answers `{"result": ...}` (a bare JSON string for SKU B2),
/// `/down` answers 500, `/huge` streams 17 MiB without a `Content-Length`.
async fn start_tool_server() -> (String, Received, CancellationToken) {
    async fn huge() -> Response {
        let chunks = (0..17).map(|_| Ok::<_, std::io::Error>(vec![b'x'; 1024 * 1024]));
        axum::body::Body::from_stream(futures::stream::iter(chunks)).into_response()
    }
    async fn lookup(State(seen): State<Received>, Json(body): Json<Value>) -> Response {
        seen.lock().unwrap().push(("lookup".into(), body.clone()));
        if body["sku"] == "B2" {
            return Json(json!("B2: out of stock")).into_response();
        }
        Json(json!({"result": {"sku": body["sku"], "price": 9.5}})).into_response()
    }
    async fn down(State(seen): State<Received>, Json(body): Json<Value>) -> Response {
        seen.lock().unwrap().push(("down".into(), body));
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "inventory database is down",
        )
            .into_response()
    }
    let seen = Received::default();
    let app = axum::Router::new()
        .route("/lookup", axum::routing::post(lookup))
        .route("/down", axum::routing::post(down))
        .route("/huge", axum::routing::post(huge))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    TaskTracker::new().spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
    });
    (base, seen, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_tools_post_to_their_endpoint_and_mix_with_mcp() {
    let (base, seen, stop) = start_tool_server().await;
    let events = Events::new();
    let schema = json!({"type": "object", "properties": {"sku": {"type": "string"}},
        "required": ["sku"], "additionalProperties": false});
    let (app, llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"user_contains": "ask-lookup"}, "reply": {"tool_calls": [
                {"name": "lookup", "arguments": {"sku": "A1"}}]}},
            {"when": {"user_contains": "ask-stock"}, "reply": {"tool_calls": [
                {"name": "stock", "arguments": {"sku": "A1"}}]}},
            {"when": {"user_contains": "ask-bad"}, "reply": {"tool_calls": [
                {"name": "lookup", "arguments": {"sku": 42}}]}},
            {"when": {"user_contains": "ask-huge"}, "reply": {"tool_calls": [
                {"name": "huge", "arguments": {"sku": "A1"}}]}},
            {"when": {"user_contains": "ask-mixed"}, "reply": {"tool_calls": [
                {"name": "echo", "arguments": {"text": "hi"}},
                {"name": "lookup", "arguments": {"sku": "B2"}}]}}
        ]}),
        vec![mock_mcp_stdio("mock", &events.path)],
        vec![
            json!({"tool_alias": "inline", "providers": ["lookup", "stock"]}),
            json!({"tool_alias": "mixed", "providers": ["mock", "lookup"]}),
            json!({"tool_alias": "big", "providers": ["huge"]}),
        ],
        |c| {
            c.tools = [
                json!({"name": "lookup", "description": "Looks up a SKU.",
                    "parameters": schema, "endpoint": format!("{base}/lookup")}),
                json!({"name": "stock", "description": "Stock level of a SKU.",
                    "parameters": schema, "endpoint": format!("{base}/down")}),
                json!({"name": "huge", "description": "Answers too much.",
                    "parameters": schema, "endpoint": format!("{base}/huge")}),
            ]
            .into_iter()
            .map(|t| serde_json::from_value(t).unwrap())
            .collect();
        },
    )
    .await;
    let spec = job(
        1,
        &[
            ("ok", "writer", "inline", "ask-lookup {{ n }}"),
            ("down", "writer", "inline", "ask-stock {{ n }}"),
            ("bad", "writer", "inline", "ask-bad {{ n }}"),
            ("mixed", "writer", "mixed", "ask-mixed {{ n }}"),
            ("huge", "writer", "big", "ask-huge {{ n }}"),
        ],
        json!([]),
        json!([]),
    );
    let done = run_job(&app, &spec, JOB_TIMEOUT).await;
    assert_eq!(done["status"], "completed", "{done}");
    let record = &app.all_records(done["id"].as_str().unwrap()).await[0];
    let id = record["id"].as_str().unwrap();
    for column in ["ok", "down", "bad", "mixed"] {
        assert_eq!(record["values"][column], "done", "{record}");
    }

    let ok = tool_texts(&trace(&app, id, "ok").await);
    assert_eq!(ok.len(), 1);
    let answer: Value = serde_json::from_str(&ok[0]).unwrap();
    assert_eq!(answer, json!({"result": {"sku": "A1", "price": 9.5}}));

    let down = tool_texts(&trace(&app, id, "down").await);
    assert!(
        down[0].starts_with("Error: Tool 'stock' failed with HTTP 500")
            && down[0].contains("inventory database is down"),
        "{down:?}"
    );

    // An answer past 16 MiB is not read to its end: the model is told, the record goes on.
    assert_eq!(record["values"]["huge"], "done", "{record}");
    let huge = tool_texts(&trace(&app, id, "huge").await);
    assert_eq!(
        huge,
        ["Error: Tool 'huge' failed: its answer is larger than 16 MiB."]
    );

    let bad = tool_texts(&trace(&app, id, "bad").await);
    assert!(
        bad[0].starts_with("Error: Invalid arguments for tool 'lookup'"),
        "{bad:?}"
    );

    // Results in call order: the MCP tool's, then the inline tool's JSON string unwrapped.
    let mixed = tool_texts(&trace(&app, id, "mixed").await);
    assert_eq!(mixed, ["hi", "B2: out of stock"]);
    assert_eq!(events.calls("echo"), 1);

    // The endpoints got the arguments as JSON; the invalid call never reached them.
    let got: BTreeSet<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(path, body)| format!("{path} {body}"))
        .collect();
    let want: BTreeSet<String> = [
        r#"lookup {"sku":"A1"}"#,
        r#"lookup {"sku":"B2"}"#,
        r#"down {"sku":"A1"}"#,
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(got, want);
    assert_eq!(seen.lock().unwrap().len(), 3);

    // Offered: the inline tools with their schemas; MCP tools first in the mixed config.
    let requests = llm.requests();
    let first_turn = |needle: &str| {
        requests
            .iter()
            .find(|r| {
                r.body.to_string().contains(needle)
                    && r.body["messages"].as_array().unwrap().len() == 1
            })
            .unwrap_or_else(|| panic!("no request for {needle}"))
            .body
            .clone()
    };
    let inline = first_turn("ask-lookup");
    assert_eq!(offered(&inline), ["lookup", "stock"]);
    assert_eq!(inline["tools"][0]["function"]["parameters"], schema);
    let names = offered(&first_turn("ask-mixed"));
    assert_eq!(
        names.last().map(String::as_str),
        Some("lookup"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    app.stop().await;
    stop.cancel();
}

/// Calls `toggle_tools` on an HTTP mock-mcp, so that server also lists `bonus`.
async fn toggle_bonus(url: &str) {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let client = ().serve(transport).await.unwrap();
    client
        .call_tool(CallToolRequestParams::new("toggle_tools"))
        .await
        .unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_mcp_servers_limit_which_providers_it_is_offered() {
    let one = Events::new();
    let two = Events::new();
    // Two mock-mcps with the same tools, except that p2 also lists `bonus`.
    let p2 = MockMcpHttp::start(Options {
        events: Some(two.path.clone()),
        ..Options::default()
    })
    .await
    .unwrap();
    let (app, llm) = app_with_tools(
        Backend::Sqlite,
        json!({"rules": [
            {"when": {"last_is_tool_result": true}, "reply": {"text": "done"}},
            {"when": {"has_tools": true}, "reply": {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}}
        ]}),
        vec![
            mock_mcp_stdio("p1", &one.path),
            json!({"name": "p2", "provider_type": "streamable_http", "endpoint": p2.url()}),
        ],
        vec![json!({"tool_alias": "both", "providers": ["p1", "p2"]})],
        |c| {
            c.model_configs.push(
                serde_json::from_value(json!({"alias": "only-p1", "model": "mock-p1",
                    "provider": "mock", "mcp_servers": ["p1"]}))
                .unwrap(),
            );
        },
    )
    .await;
    toggle_bonus(&p2.url()).await;
    let p2_sessions = two.count("init");

    // A server model limited to p1: p2 is neither listed nor called.
    let done = run_job(
        &app,
        &job(
            2,
            &[("a", "only-p1", "both", "Go {{ n }}.")],
            json!([]),
            json!([]),
        ),
        JOB_TIMEOUT,
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    let p1_offer = offered(&llm.requests()[0].body);
    assert!(p1_offer.iter().any(|n| n == "echo"), "{p1_offer:?}");
    assert!(!p1_offer.iter().any(|n| n == "bonus"), "{p1_offer:?}");
    let unique: BTreeSet<&String> = p1_offer.iter().collect();
    assert_eq!(unique.len(), p1_offer.len(), "{p1_offer:?}");
    assert_eq!(one.calls("echo"), 2);
    assert_eq!(two.count("init"), p2_sessions, "{:?}", two.lines());
    assert_eq!(
        two.count("list") + two.calls("echo"),
        0,
        "{:?}",
        two.lines()
    );

    // A job's own model config limited to p2: p2's tools, bonus included.
    llm.reset();
    let done = run_job(
        &app,
        &job(
            2,
            &[("b", "only-p2", "both", "Go {{ n }}.")],
            json!([{"alias": "only-p2", "model": "mock-p2", "provider": "mock",
                "mcp_servers": ["p2"]}]),
            json!([]),
        ),
        JOB_TIMEOUT,
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    let p2_offer = offered(&llm.requests()[0].body);
    assert!(p2_offer.iter().any(|n| n == "bonus"), "{p2_offer:?}");
    assert_eq!(p2_offer.len(), p1_offer.len() + 1, "{p2_offer:?}");
    assert_eq!(two.calls("echo"), 2);
    assert_eq!(one.calls("echo"), 2);

    // Unrestricted, the same tool config has duplicates: the access list was doing the work.
    let (status, body) = app
        .create_job(&job(
            1,
            &[("c", "writer", "both", "Go.")],
            json!([]),
            json!([]),
        ))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "duplicate_tool_name", "{body}");
    app.stop().await;
}
