//! `GET /v1/models`: a key sees the server's model aliases it may use, with provider, model,
//! generation type, limits and reachable tool aliases, and never an endpoint or a secret.

use serde_json::{Value, json};
use synthgate::config::Config;

use super::{KEY_A, call};
use crate::db::Backend;
use crate::helpers::spawn_app_with;

/// May use only model `cheap` and tool config `safe`.
const CAROL: &str = "key-c-0123456789abcdef";

/// Every secret and address the config below holds; none may appear in a response.
const SECRETS: [&str; 7] = [
    "sk-model-secret",
    "hdr-secret",
    "body-secret",
    "mcp-key-secret",
    "mcp-hdr-secret",
    "127.0.0.1:9",
    "/usr/bin/true",
];

fn config(c: &mut Config) {
    let v = json!({
        "model_providers": [
            {"name": "p", "endpoint": "http://127.0.0.1:9/v1", "api_key": "sk-model-secret",
             "extra_headers": {"X-Secret": "hdr-secret"}, "extra_body": {"token": "body-secret"}},
            {"name": "q", "endpoint": "http://127.0.0.1:9/anthropic", "provider_type": "anthropic"},
        ],
        "model_configs": [
            {"alias": "writer", "model": "big-model", "provider": "p", "mcp_servers": ["web"],
             "inference_parameters": {"max_tokens": 100, "timeout": 30, "max_parallel_requests": 2,
                                      "extra_body": {"token": "body-secret"}}},
            {"alias": "cheap", "model": "small-model", "provider": "q",
             "tool_call_strategy": "prompt_based"},
            {"alias": "embed", "model": "embedder", "provider": "p",
             "inference_parameters": {"generation_type": "embedding", "dimensions": 8}},
        ],
        "mcp_providers": [
            {"name": "web", "provider_type": "streamable_http", "endpoint": "http://127.0.0.1:9/mcp",
             "api_key": "mcp-key-secret", "headers": {"X-Mcp": "mcp-hdr-secret"}},
            {"name": "files", "command": "/usr/bin/true"},
        ],
        "tools": [{"name": "calc", "endpoint": "http://127.0.0.1:9/calc"}],
        "tool_configs": [
            {"tool_alias": "safe", "providers": ["files"]},
            {"tool_alias": "webby", "providers": ["web"]},
            {"tool_alias": "calc", "providers": ["calc"]},
        ],
        "auth": {"api_keys": [
            {"name": "alice", "key": KEY_A},
            {"name": "carol", "key": CAROL, "allow_models": ["cheap"], "allow_tools": ["safe"]},
        ]},
    });
    c.model_providers = serde_json::from_value(v["model_providers"].clone()).unwrap();
    c.model_configs = serde_json::from_value(v["model_configs"].clone()).unwrap();
    c.mcp_providers = serde_json::from_value(v["mcp_providers"].clone()).unwrap();
    c.tools = serde_json::from_value(v["tools"].clone()).unwrap();
    c.tool_configs = serde_json::from_value(v["tool_configs"].clone()).unwrap();
    c.auth = serde_json::from_value(v["auth"].clone()).unwrap();
    assert_eq!(
        c.problems(),
        Vec::<String>::new(),
        "the test config is valid"
    );
}

fn assert_no_secret(body: &Value) {
    let text = body.to_string();
    for s in SECRETS {
        assert!(!text.contains(s), "{s} leaked: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_lists_the_aliases_a_key_may_use_without_secrets() {
    let app = spawn_app_with(Backend::Sqlite, config).await;

    let (status, body) = call(&app, "GET", "/v1/models", None, None).await;
    assert_eq!(status, 401, "{body}");

    // Alice has no lists: every model, each with what it is and what it may reach.
    let (status, body) = call(&app, "GET", "/v1/models", Some(KEY_A), None).await;
    assert_eq!(status, 200, "{body}");
    assert_no_secret(&body);
    assert_eq!(
        body,
        json!({"models": [
            {"alias": "writer", "provider": "p", "provider_type": "openai", "model": "big-model",
             "generation_type": "chat-completion",
             "limits": {"max_parallel_requests": 2, "timeout_sec": 30, "max_tokens": 100},
             "mcp_servers": ["web"],
             // `safe` goes to `files` only, which writer's mcp_servers excludes; inline
             // tools are never filtered.
             "tool_aliases": ["webby", "calc"]},
            {"alias": "cheap", "provider": "q", "provider_type": "anthropic", "model": "small-model",
             "generation_type": "chat-completion", "limits": {"max_parallel_requests": 4},
             "tool_call_strategy": "prompt_based",
             "tool_aliases": ["safe", "webby", "calc"]},
            {"alias": "embed", "provider": "p", "provider_type": "openai", "model": "embedder",
             "generation_type": "embedding",
             "limits": {"max_parallel_requests": 4, "dimensions": 8}},
        ]})
    );

    // Carol may use `cheap` and tool config `safe` only.
    let (status, body) = call(&app, "GET", "/v1/models", Some(CAROL), None).await;
    assert_eq!(status, 200, "{body}");
    assert_no_secret(&body);
    assert_eq!(
        body,
        json!({"models": [
            {"alias": "cheap", "provider": "q", "provider_type": "anthropic", "model": "small-model",
             "generation_type": "chat-completion", "limits": {"max_parallel_requests": 4},
             "tool_call_strategy": "prompt_based", "tool_aliases": ["safe"]},
        ]})
    );
    app.stop().await;
}
