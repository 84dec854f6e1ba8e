use super::*;
use serde_json::json;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The problems `Config::from_value` reports for `value`, which must be refused.
fn invalid(value: Value) -> Vec<String> {
    match Config::from_value(value, &[]) {
        Err(ConfigError::Invalid(problems)) => problems,
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("the config was accepted"),
    }
}

/// Asserts that `problems` mention every one of `needles`, and with `count` that they are that
/// many (so no needle hides a second problem).
fn assert_mentions(problems: &[String], needles: &[&str], count: Option<usize>) {
    let all = problems.join("\n");
    for needle in needles {
        assert!(all.contains(needle), "missing {needle} in:\n{all}");
    }
    if let Some(n) = count {
        assert_eq!(problems.len(), n, "{all}");
    }
}

#[test]
fn defaults_without_file() {
    let c = Config::from_value(Value::Null, &[]).unwrap();
    assert_eq!(c.server.port, 8080);
    assert!(c.database.url().is_none());
    assert_eq!(c.workers.count, 32);
}

/// The database pool: unset leaves the size to the backend (`store::sqlite::default_pool_size`,
/// `store::postgres::DEFAULT_POOL_SIZE`); a set size is kept; none is refused, naming the key.
#[test]
fn database_pool_size_is_the_backends_unless_set() {
    let c = Config::from_value(Value::Null, &[]).unwrap();
    assert_eq!(c.database.max_connections, None);
    let c = Config::from_value(json!({"database": {"max_connections": 3}}), &[]).unwrap();
    assert_eq!(c.database.max_connections, Some(3));
    let problems = invalid(json!({"database": {"max_connections": 0}}));
    assert_mentions(&problems, &["database.max_connections"], Some(1));
}

/// The writers a pool runs: one per core unless set, never more than the database takes side
/// by side (SQLite: one), never none.
#[test]
fn writers_are_bounded_by_the_database() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let default = WorkersConfig::default();
    assert_eq!(default.writers(1), 1, "SQLite: one writer");
    assert_eq!(default.writers(64), cores.min(64), "one per core");
    assert_eq!(default.writers(0), 1, "at least one");
    let set = WorkersConfig {
        writers: Some(3),
        ..WorkersConfig::default()
    };
    assert_eq!(set.writers(5), 3);
    assert_eq!(set.writers(2), 2, "the database's bound wins");
    assert_eq!(set.writers(1), 1);
}

#[test]
fn env_overrides_parse_scalars_and_create_sections() {
    let c = Config::from_value(
        json!({"server": {"port": 1}}),
        &env(&[
            ("SYNTHGATE__SERVER__PORT", "9001"),
            ("SYNTHGATE__SERVER__DOCS", "false"),
            ("SYNTHGATE__DATABASE__URL", "postgres://u@h/db"),
        ]),
    )
    .unwrap();
    assert_eq!(c.server.port, 9001);
    assert!(!c.server.docs);
    assert_eq!(c.database.url(), Some("postgres://u@h/db"));
}

#[test]
fn env_overrides_address_list_items() {
    let c = Config::from_value(
        json!({"model_providers": [{"name": "a", "endpoint": "http://x"}]}),
        &env(&[("SYNTHGATE__MODEL_PROVIDERS__0__ENDPOINT", "https://y/v1")]),
    )
    .unwrap();
    assert_eq!(c.model_providers[0].endpoint, "https://y/v1");
}

#[test]
fn substitution_forms() {
    let lookup = |n: &str| (n == "A").then(|| "1".to_string());
    assert_eq!(expand("x${A}y", &lookup).unwrap(), "x1y");
    assert_eq!(expand("${env:A}", &lookup).unwrap(), "1");
    assert_eq!(expand("${B:-dflt}", &lookup).unwrap(), "dflt");
    assert_eq!(expand("${B}", &lookup).unwrap_err(), "B");
}

#[test]
fn missing_variable_names_the_key() {
    let err = Config::from_value(json!({"database": {"url": "${NOPE_DB}"}}), &[]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("database.url"), "{msg}");
    assert!(msg.contains("NOPE_DB"), "{msg}");
}

#[test]
fn type_error_names_the_key() {
    let err = Config::from_value(json!({"server": {"port": "eighty"}}), &[]).unwrap_err();
    assert!(err.to_string().contains("`server.port`"), "{err}");
    let err = Config::from_value(json!({"server": {"prot": 1}}), &[]).unwrap_err();
    assert!(err.to_string().contains("prot"), "{err}");
}

#[test]
fn every_semantic_problem_is_reported() {
    let problems = invalid(json!({
        "workers": {"count": 0, "writers": 0},
        "model_configs": [{"alias": "m", "model": "x", "provider": "ghost"}],
        "mcp_providers": [{"name": "s", "provider_type": "stdio"}],
        "tool_configs": [{"tool_alias": "t", "providers": ["nope"]}]
    }));
    assert_mentions(
        &problems,
        &[
            "workers.count",
            "workers.writers",
            "model_configs[0].provider",
            "mcp_providers[0].command",
            "tool_configs[0].providers[0]",
        ],
        None,
    );
}

/// Every endpoint key takes an http(s) URL with a host, parsed: one that only starts like one
/// (`http://`, a space in the host) used to pass and then fail on every request.
#[test]
fn endpoints_must_parse_as_http_urls() {
    let problems = invalid(json!({
        "model_providers": [{"name": "a", "endpoint": "http://"},
                            {"name": "b", "endpoint": "https://exa mple.com/v1"},
                            {"name": "ok", "endpoint": "https://example.com/v1"}],
        "mcp_providers": [{"name": "m", "provider_type": "streamable_http",
                           "endpoint": "http://[::1/mcp"}],
        "tools": [{"name": "t", "endpoint": "ftp://h/t"}],
        "validators": {"remote_endpoints": ["https://:443/v"]},
        "datasets": {"hf": {"endpoint": "https://"}}
    }));
    assert_mentions(
        &problems,
        &[
            "`model_providers[0].endpoint`",
            "`model_providers[1].endpoint`",
            "`mcp_providers[0].endpoint`",
            "`tools[0].endpoint`",
            "`validators.remote_endpoints[0]`",
            "`datasets.hf.endpoint`",
        ],
        Some(6),
    );
    assert!(super::http_url("https://example.com/v1").is_some());
}

#[test]
fn a_provider_ca_file_must_exist() {
    let problems = invalid(json!({
        "model_providers": [{"name": "p", "endpoint": "https://h/v1",
                             "tls_ca_file": "/nonexistent/ca.pem"}],
    }));
    assert_mentions(
        &problems,
        &["`model_providers[0].tls_ca_file`", "/nonexistent/ca.pem"],
        Some(1),
    );
    let problems = invalid(json!({
        "mcp_providers": [{"name": "m", "provider_type": "streamable_http",
                           "endpoint": "https://h/mcp", "tls_ca_file": "/nonexistent/mcp-ca.pem"}],
    }));
    assert_mentions(
        &problems,
        &["`mcp_providers[0].tls_ca_file`", "/nonexistent/mcp-ca.pem"],
        Some(1),
    );
}

#[test]
fn bounds_reserved_fields_and_allow_lists_are_checked() {
    let problems = invalid(json!({
        "model_providers": [{"name": "p", "endpoint": "http://h/v1", "extra_body": {"stream": true}}],
        "model_configs": [{"alias": "m", "model": "x", "provider": "p",
            "inference_parameters": {"timeout": 100000, "extra_body": {"model": "y", "seed": 1}}}],
        "mcp_providers": [{"name": "s", "command": "x", "call_timeout_sec": 1e300}],
        "tool_configs": [{"tool_alias": "t", "providers": ["s"], "timeout_sec": 1e300}],
        "tools": [{"name": "i", "endpoint": "http://h/i", "timeout_sec": -1}],
        "limits": {"max_metadata_bytes": 0},
        "auth": {"api_keys": [{"name": "k", "key": "0123456789abcdef",
            "allow_models": ["m", "ghost"], "allow_tools": ["t", "mine"]}]}
    }));
    assert_mentions(
        &problems,
        &[
            "`model_providers[0].extra_body.stream`: extra_body may not set 'stream'",
            "`model_configs[0].inference_parameters.extra_body.model`",
            "`model_configs[0].inference_parameters.timeout`: must be between 1 and 86400",
            "`mcp_providers[0].call_timeout_sec`: must be at least 0.001 and at most 86400",
            "`tool_configs[0].timeout_sec`",
            "`tools[0].timeout_sec`",
            "`limits.max_metadata_bytes`",
            "`auth.api_keys[0].allow_models[1]`: 'ghost' is not an alias of the server's `model_configs`",
            "`auth.api_keys[0].allow_tools[1]`: 'mine'",
        ],
        Some(9),
    );
    assert_eq!(LimitsConfig::default().max_metadata_bytes, 16 * 1024);
}

#[test]
fn a_models_mcp_servers_must_name_configured_mcp_providers() {
    let cfg = |mcp_servers: Value| {
        json!({
            "model_providers": [{"name": "p", "endpoint": "http://h/v1"}],
            "model_configs": [
                {"alias": "ok", "model": "x", "provider": "p", "mcp_servers": ["web", "files"]},
                {"alias": "typo", "model": "x", "provider": "p", "mcp_servers": mcp_servers},
            ],
            "mcp_providers": [{"name": "web", "endpoint": "http://h/mcp"},
                              {"name": "files", "command": "x"}],
            "tools": [{"name": "calc", "endpoint": "http://h/calc"}],
        })
    };
    for valid in [json!([]), json!(["files"]), Value::Null] {
        Config::from_value(cfg(valid.clone()), &[]).unwrap_or_else(|e| panic!("{valid}: {e}"));
    }
    // A typo, and an inline tool's name (`mcp_servers` filters MCP providers only).
    let problems = invalid(cfg(json!(["web", "fles", "calc"])));
    assert_eq!(
        problems,
        [
            "config key `model_configs[1].mcp_servers[1]`: unknown MCP provider 'fles' (defined: files, web)",
            "config key `model_configs[1].mcp_servers[2]`: unknown MCP provider 'calc' (defined: files, web)",
        ]
    );
}

#[test]
fn max_sessions_is_bounded_and_for_shared_providers_only() {
    let cfg = |scope: &str, max_sessions: u32| {
        json!({"mcp_providers": [{"name": "files", "command": "x",
            "session_scope": scope, "max_sessions": max_sessions}]})
    };
    let c = Config::from_value(
        json!({"mcp_providers": [{"name": "f", "command": "x"}]}),
        &[],
    )
    .unwrap();
    assert_eq!(c.mcp_providers[0].max_sessions, 1, "one session by default");
    for ok in [cfg("shared", 1), cfg("shared", 32), cfg("per_record", 1)] {
        Config::from_value(ok.clone(), &[]).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for (bad, message) in [
        (cfg("shared", 0), "must be from 1 to 32"),
        (cfg("shared", 33), "must be from 1 to 32"),
        (
            cfg("per_job", 2),
            "only a `shared` provider opens sessions by load",
        ),
    ] {
        let problems = invalid(bad.clone());
        assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
        assert!(
            problems[0].starts_with("config key `mcp_providers[0].max_sessions`: ")
                && problems[0].contains(message),
            "{bad}: {problems:?}"
        );
    }
}

#[test]
fn llamafarm_spelling_is_accepted() {
    let c = Config::from_value(
        json!({"mcp_providers": [{"name": "h", "transport": "http", "base_url": "http://127.0.0.1:1/mcp"}]}),
        &[],
    )
    .unwrap();
    assert_eq!(c.mcp_providers[0].transport(), McpTransport::StreamableHttp);
    assert_eq!(
        c.mcp_providers[0].endpoint.as_deref(),
        Some("http://127.0.0.1:1/mcp")
    );
}

#[test]
fn shipped_config_file_is_valid() {
    let c = Config::load_with_env(Some(Path::new("config/synthgate.yaml")), &[]).unwrap();
    assert_eq!(c.server.port, 8080);
}

#[test]
fn connection_settings_default_and_are_bounded() {
    let c = Config::from_value(Value::Null, &[]).unwrap();
    assert_eq!(c.server.header_read_timeout_sec, 10);
    assert_eq!(c.server.idle_timeout_sec, 60);
    assert_eq!(c.server.max_connections, 1024);
    assert!(c.server.metrics_token.is_none());

    let err = Config::from_value(
        json!({"server": {"header_read_timeout_sec": 0, "idle_timeout_sec": 1e12 as u64,
            "max_connections": 0, "metrics_token": "short"}}),
        &[],
    )
    .unwrap_err()
    .to_string();
    for key in [
        "server.header_read_timeout_sec",
        "server.idle_timeout_sec",
        "server.max_connections",
        "server.metrics_token",
    ] {
        assert!(err.contains(key), "{key} not named in: {err}");
    }

    let c = Config::from_value(
        json!({"server": {"metrics_token": "${env:METRICS_TOKEN}"}}),
        &env(&[("METRICS_TOKEN", "0123456789abcdef")]),
    )
    .unwrap();
    assert_eq!(
        c.server
            .metrics_token
            .as_ref()
            .map(|t| secrecy::ExposeSecret::expose_secret(t).to_owned()),
        Some("0123456789abcdef".to_owned())
    );
}

#[test]
fn worker_leases_and_lease_expiries() {
    let c = Config::from_value(json!({"workers": {"count": 5}}), &[]).unwrap();
    assert_eq!(c.workers.in_flight_limit(), 20, "4 x count by default");
    assert_eq!(
        c.workers.lease_limit(),
        21,
        "a sixteenth more claimed ahead"
    );
    assert_eq!(c.workers.max_lease_expiries, 3);
    let c = Config::from_value(json!({"workers": {"max_in_flight": u32::MAX}}), &[]).unwrap();
    assert_eq!(c.workers.lease_limit(), u32::MAX, "saturates, never wraps");
    assert_eq!(
        c.workers.cpu_records_per_lease(),
        1,
        "leases past two batches: one each"
    );
    let c = Config::default();
    assert_eq!(c.workers.lease_limit(), 136);
    assert_eq!(
        c.workers.cpu_records_per_lease(),
        8,
        "136 leases cover two batches of 512 CPU-only records at 8 each"
    );
    let c = Config::from_value(
        json!({"workers": {"count": 2, "max_in_flight": 2, "max_lease_expiries": 1}}),
        &[],
    )
    .unwrap();
    assert_eq!(c.workers.in_flight_limit(), 2);
    assert_eq!(c.workers.lease_limit(), 2, "small limits claim none ahead");
    let problems = invalid(json!(
        {"workers": {"count": 4, "max_in_flight": 3, "max_lease_expiries": 0}}
    ));
    assert_mentions(
        &problems,
        &["workers.max_in_flight", "workers.max_lease_expiries"],
        None,
    );
}

#[test]
fn api_key_is_an_env_name_first_then_the_literal() {
    use secrecy::{ExposeSecret, SecretString};
    let env = |n: &str| (n == "MY_KEY").then(|| "from-env".to_owned());
    let k = resolve_api_key(&SecretString::from("MY_KEY"), env);
    assert_eq!(k.expose_secret(), "from-env");
    let k = resolve_api_key(&SecretString::from("sk-literal"), env);
    assert_eq!(k.expose_secret(), "sk-literal");
    // An empty variable does not count as set.
    let k = resolve_api_key(&SecretString::from("EMPTY"), |_| Some(String::new()));
    assert_eq!(k.expose_secret(), "EMPTY");
}

#[test]
fn oauth_blocks_are_checked() {
    let problems = invalid(json!({
        "mcp_providers": [
            {"name": "a", "provider_type": "sse", "endpoint": "http://h/sse",
             "oauth": {"client_id": "c", "client_secret": "s"}},
            {"name": "b", "provider_type": "streamable_http", "endpoint": "http://h/mcp",
             "api_key": "k", "oauth": {"client_id": " "}},
            {"name": "c", "provider_type": "streamable_http", "endpoint": "http://h/mcp",
             "oauth": {"client_id": "c", "client_secret": "s", "private_key": "p"}},
            {"name": "d", "provider_type": "streamable_http", "endpoint": "http://h/mcp",
             "oauth": {"client_id": "c", "private_key": "p", "signing_algorithm": "HS256"}},
            {"name": "e", "provider_type": "streamable_http", "endpoint": "http://h/mcp",
             "oauth": {"client_id": "c", "client_secret": "s", "signing_algorithm": "RS256"}},
            {"name": "ok", "provider_type": "streamable_http", "endpoint": "http://h/mcp",
             "oauth": {"client_id": "c", "private_key": "p", "signing_algorithm": "ES256",
               "scopes": ["x"], "max_scope_upgrades": 0}}
        ]
    }));
    assert_mentions(
        &problems,
        &[
            "`mcp_providers[0].oauth`: OAuth is served for streamable_http providers only",
            "`mcp_providers[1].oauth`: set either api_key (a static bearer key) or oauth, not both",
            "`mcp_providers[1].oauth.client_id`: must not be empty",
            "`mcp_providers[1].oauth`: client_secret (client_secret_basic/post) or private_key (private_key_jwt) is required",
            "`mcp_providers[2].oauth`: set either client_secret or private_key, not both",
            "`mcp_providers[3].oauth.signing_algorithm`: 'HS256' is not one of RS256, RS384, RS512, ES256, ES384",
            "`mcp_providers[4].oauth.signing_algorithm`: applies to private_key only",
        ],
        Some(7),
    );
}

#[test]
fn every_problem_is_reported_in_one_run() {
    // Five problems of five kinds: a wrong type, an unknown key, a bad enum value in a list
    // item after a removed one, an out-of-range value, and a key_env this environment lacks.
    let doc = "
workers: {count: many, cuont: 3}
model_providers:
  - {name: a, endpoint: 'http://a', provider_type: nope}
  - {name: b, endpoint: 'http://b', provider_type: smoke}
limits: {max_page_size: 0}
auth:
  api_keys: [{name: k, key_env: SYNTHGATE_TEST_UNSET_KEY}]
";
    let v: serde_json::Value = yaml_serde::from_str(doc).unwrap();
    let Err(ConfigError::Invalid(problems)) = Config::from_value(v, &[]) else {
        panic!("a config with five problems was accepted");
    };
    let keys: Vec<&str> = problems
        .iter()
        .map(|p| p.split('`').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        keys,
        [
            "workers.count",
            "workers.cuont",
            "model_providers[0].provider_type",
            "model_providers[1].provider_type",
            "limits.max_page_size",
            "auth.api_keys[0]",
        ],
        "{problems:#?}"
    );
    assert!(
        problems[5].contains("SYNTHGATE_TEST_UNSET_KEY"),
        "{problems:#?}"
    );
}

/// Round 3 (Q8): a retention of 1e8 days passed `config check`, and the sweep then panicked
/// on every run (the cut-off is before any date), so retention never ran.
#[test]
fn job_retention_days_is_bounded() {
    let problems = invalid(json!({"database": {"job_retention_days": 100_000_000}}));
    assert_mentions(
        &problems,
        &["database.job_retention_days", "at most 36500"],
        Some(1),
    );
    let c = Config::from_value(json!({"database": {"job_retention_days": 36_500}}), &[]).unwrap();
    assert_eq!(
        c.database.job_retention(),
        Some(std::time::Duration::from_secs(36_500 * 86_400))
    );
}
