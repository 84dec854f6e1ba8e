//! Issues about the job as a whole: aliases, model and tool configs, features, seed config;
//! and the real DataDesigner config compiling.

use serde_json::json;

use super::*;

fn codes(issues: &[ConfigIssue]) -> Vec<&'static str> {
    issues.iter().map(|i| i.code).collect()
}

fn llm(name: &str, prompt: &str) -> Value {
    json!({"name": name, "column_type": "llm-text", "prompt": prompt, "model_alias": "server-model"})
}

#[test]
fn unknown_model_and_tool_alias_list_known_ones() {
    let mut a = llm("a", "hi");
    a["model_alias"] = json!("gpt");
    a["tool_alias"] = json!("toolz");
    let i = issues(json!({
        "columns": [a],
        "model_configs": [{"alias": "job-model", "model": "m", "provider": "p"}],
    }));
    assert_eq!(codes(&i), ["unknown_model_alias", "unknown_tool_alias"]);
    assert_eq!(
        i[0].message,
        "column 'a': field 'model_alias': model_alias 'gpt' is not defined in the job or on the server; \
         known aliases: job-model, server-model"
    );
    assert!(i[1].message.contains("known aliases: server-tools"));
    // Job-defined aliases are accepted.
    let mut b = llm("b", "hi");
    b["model_alias"] = json!("job-model");
    b["tool_alias"] = json!("job-tools");
    plan(json!({
        "columns": [b],
        "model_configs": [{"alias": "job-model", "model": "m", "provider": "p"}],
        "tool_configs": [{"tool_alias": "job-tools", "providers": ["x"]}],
    }));
}

#[test]
fn invalid_model_and_tool_configs() {
    let i = issues(json!({
        "columns": [expr("a", "1")],
        "model_configs": [
            {"alias": "m", "model": "x", "provider": "p", "inference_parameters": {"temperature": 3}},
            {"alias": "m", "model": "x", "provider": "p"},
        ],
        "tool_configs": [
            {"tool_alias": "t", "providers": [], "max_tool_call_turns": 0},
            {"tool_alias": "t", "providers": []},
        ],
    }));
    let got: Vec<_> = i
        .iter()
        .map(|i| (i.code, i.field.as_deref().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "invalid_model_config",
                "model_configs[0].inference_parameters.temperature"
            ),
            ("invalid_model_config", "model_configs[1].alias"),
            ("invalid_tool_config", "tool_configs[0].max_tool_call_turns"),
            ("invalid_tool_config", "tool_configs[1].tool_alias"),
        ]
    );
}

#[test]
fn seed_issues() {
    let seed = |source: Value, extra: Value| {
        let mut sc = json!({"source": source});
        for (k, v) in extra.as_object().unwrap() {
            sc[k] = v.clone();
        }
        json!({"columns": [expr("e", "1")], "seed_config": sc})
    };
    let i = issues(seed(
        json!({"seed_type": "hf", "path": "datasets/x"}),
        json!({}),
    ));
    assert_eq!(codes(&i), ["unsupported_seed_source"]);
    // Compiled without resolution (submit always resolves file sources first), the message
    // says both ways to give the rows.
    assert!(i[0].message.contains(
        "give the rows inline (seed_config.source = {seed_type: inline, rows: [...]}) or upload \
         them as a dataset"
    ));
    let rows = |rows: Value| json!({"seed_type": "inline", "rows": rows});
    let cases = [
        (rows(json!([])), json!({}), "seed_config.source.rows"),
        (
            rows(json!([{"a": 1}, 2])),
            json!({}),
            "seed_config.source.rows[1]",
        ),
        (
            rows(json!([{"a": 1}, {"b": 1}])),
            json!({}),
            "seed_config.source.rows[1]",
        ),
        (
            rows(json!([{"a": 1}])),
            json!({"selection_strategy": {"start": 0, "end": 1}}),
            "seed_config.selection_strategy",
        ),
        (
            rows(json!([{"a": 1}])),
            json!({"selection_strategy": {"start": 1, "end": 0}}),
            "seed_config.selection_strategy",
        ),
        (
            rows(json!([{"a": 1}])),
            json!({"selection_strategy": {"index": 0, "num_partitions": 2}}),
            "seed_config.selection_strategy",
        ),
        (
            rows(json!([{"a": 1}, {"a": 2}])),
            json!({"selection_strategy": {"index": 2, "num_partitions": 2}}),
            "seed_config.selection_strategy",
        ),
    ];
    for (source, extra, field) in cases {
        let i = issues(seed(source, extra));
        assert_eq!(codes(&i), ["invalid_seed_config"], "{field}");
        assert_eq!(i[0].field.as_deref(), Some(field));
    }
    // A seed-dataset column needs seed rows, and a field of that name.
    let i = column_issues(json!([{"name": "q", "column_type": "seed-dataset"}]));
    assert_eq!(codes(&i), ["invalid_seed_config"]);
    let i = issues(
        json!({"columns": [{"name": "q", "column_type": "seed-dataset"}],
        "seed_config": {"source": rows(json!([{"question": "x"}]))}}),
    );
    assert_eq!(codes(&i), ["invalid_seed_config"]);
    assert!(i[0].message.contains("fields: question"));
}

#[test]
fn the_real_config_compiles_with_server_aliases() {
    let yaml: Value = yaml_serde::from_str(crate::domain::dataset::fixtures::REAL_YAML).unwrap();
    let cfg = DatasetConfig::parse(&yaml).unwrap();
    let plan = Plan::compile(&cfg, &PlanContext::default(), 1).unwrap();
    assert_eq!(plan.output_columns(), ["topic", "answer", "summary"]);
    let (err, values) = failure(&plan, 0);
    assert_eq!(err.code, RecordErrorCode::InternalError);
    assert_eq!(err.column.as_deref(), Some("answer"));
    assert!(["math", "history"].contains(&values["topic"].as_str().unwrap()));
}
