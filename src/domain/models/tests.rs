//! `ModelConfig`, `ToolConfig` and their parts read as DataDesigner reads them.

use super::*;
use serde_json::json;

#[test]
fn model_config_defaults_match_datadesigner() {
    let m: ModelConfig =
        serde_json::from_value(json!({"alias": "a", "model": "m", "provider": "p"})).unwrap();
    assert_eq!(m.inference_parameters.max_parallel_requests, 4);
    assert_eq!(
        m.inference_parameters.kind(),
        Some(GenerationType::ChatCompletion)
    );
    assert!(m.problems().is_empty());
}

#[test]
fn generation_types_are_read_as_datadesigner_coerces_them() {
    let kind = |p: Value| {
        let m: ModelConfig = serde_json::from_value(
            json!({"alias": "a", "model": "m", "provider": "p", "inference_parameters": p}),
        )
        .unwrap();
        (m.inference_parameters.kind(), m.problems())
    };
    use GenerationType::*;
    assert_eq!(kind(json!({})), (Some(ChatCompletion), vec![]));
    assert_eq!(kind(json!({"dimensions": 8})), (Some(Embedding), vec![]));
    assert_eq!(
        kind(json!({"encoding_format": "base64"})),
        (Some(Embedding), vec![])
    );
    assert_eq!(
        kind(json!({"generation_type": "image", "extra_body": {"size": "1024x1024"}})),
        (Some(Image), vec![])
    );
    let fields = |p: Value| -> Vec<String> { kind(p).1.into_iter().map(|f| f.field).collect() };
    assert_eq!(
        fields(json!({"generation_type": "chat-completion", "dimensions": 8})),
        ["inference_parameters.dimensions"]
    );
    assert_eq!(
        fields(json!({"generation_type": "embedding", "max_tokens": 9, "encoding_format": "hex"})),
        [
            "inference_parameters.max_tokens",
            "inference_parameters.encoding_format"
        ]
    );
    assert_eq!(
        fields(json!({"generation_type": "image", "dimensions": 8})),
        ["inference_parameters.dimensions"]
    );
    let (none, problems) = kind(json!({"generation_type": "audio"}));
    assert_eq!(none, None);
    assert!(
        problems[0]
            .message
            .contains("chat-completion, embedding, image"),
        "{problems:?}"
    );
}

#[test]
fn temperature_out_of_range_uses_datadesigner_message() {
    let m: ModelConfig = serde_json::from_value(json!({
        "alias": "a", "model": "m", "provider": "p",
        "inference_parameters": {"temperature": 2.5}
    }))
    .unwrap();
    let p = m.problems();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].field, "inference_parameters.temperature");
    assert_eq!(
        p[0].message,
        "temperature defined in model config must be between 0.0 and 2.0"
    );
}

#[test]
fn distributions_parse_and_validate() {
    let m: ModelConfig = serde_json::from_value(json!({
        "alias": "a", "model": "m", "provider": "p",
        "inference_parameters": {
            "temperature": {"distribution_type": "uniform", "params": {"low": 0.5, "high": 0.2}},
            "top_p": {"distribution_type": "manual", "params": {"values": [0.9, 0.95], "weights": [1, 3]}}
        }
    }))
    .unwrap();
    let p = m.problems();
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].message.contains("low < high"));
}

#[test]
fn durations_are_bounded_and_never_panic() {
    let m: ModelConfig = serde_json::from_value(json!({
        "alias": "a", "model": "m", "provider": "p",
        "inference_parameters": {"timeout": 18_446_744_073_709_551_615_u64}
    }))
    .unwrap();
    let p = m.problems();
    assert_eq!(p[0].field, "inference_parameters.timeout", "{p:?}");
    let base: ToolConfig =
        serde_json::from_value(json!({"tool_alias": "t", "providers": []})).unwrap();
    for bad in [
        1e300,
        -1.0,
        0.0,
        5e-324,
        0.0009,
        f64::NAN,
        f64::INFINITY,
        86_400.5,
    ] {
        let t = ToolConfig {
            timeout_sec: Some(bad),
            ..base.clone()
        };
        assert_eq!(t.problems()[0].field, "timeout_sec", "{bad}");
    }
    let t = ToolConfig {
        timeout_sec: Some(86_400.0),
        ..base
    };
    assert!(t.problems().is_empty());
    assert_eq!(duration_from_secs(1e300), None);
    assert_eq!(duration_from_secs(-1.0), None);
    assert_eq!(duration_from_secs(f64::NAN), None);
    assert_eq!(duration_from_secs(1.5), Some(Duration::from_millis(1500)));
}

#[test]
fn reserved_extra_body_fields_are_found() {
    let extra = json!({"model": "x", "seed": 1, "messages": [], "top_k": 3});
    assert_eq!(
        reserved_extra_body_fields(extra.as_object().unwrap()),
        vec!["model", "messages"]
    );
    let ok = json!({"seed": 1, "temperature": 0.1, "chat_template_kwargs": {}});
    assert!(reserved_extra_body_fields(ok.as_object().unwrap()).is_empty());
}

#[test]
fn job_limit_is_never_read_from_input() {
    let err = serde_json::from_value::<ModelConfig>(
        json!({"alias": "a", "model": "m", "provider": "p", "job_limit": {"scope": "x", "cap": 1}}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("job_limit"), "{err}");
}

#[test]
fn tool_config_defaults_and_unknown_fields() {
    let t: ToolConfig =
        serde_json::from_value(json!({"tool_alias": "t", "providers": ["x"]})).unwrap();
    assert_eq!(t.max_tool_call_turns, 5);
    assert_eq!(t.timeout_sec, None);
    let err = serde_json::from_value::<ToolConfig>(
        json!({"tool_alias": "t", "providers": [], "bogus": 1}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("bogus"));
}

/// Round 3: `max_tool_call_turns` accepted 2^32-1, no budget at all.
#[test]
fn max_tool_call_turns_is_bounded() {
    let turns = |n: u64| {
        let t: ToolConfig = serde_json::from_value(
            json!({"tool_alias": "t", "providers": ["x"], "max_tool_call_turns": n}),
        )
        .unwrap();
        t.problems()
    };
    assert!(turns(100).is_empty());
    let problems = turns(u64::from(u32::MAX));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].field, "max_tool_call_turns");
    assert!(problems[0].message.contains("at most 100"));
}
