//! Parsing tests through [`DatasetConfig::parse`], starting with the config DataDesigner 0.9.7
//! really writes (behaviour reference §1.7).

use serde_json::{Value, json};

use super::fixtures::{REAL_YAML, real_json};
use super::*;

fn parse(v: Value) -> DatasetConfig {
    DatasetConfig::parse(&v).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn issues(v: Value) -> Vec<ConfigIssue> {
    DatasetConfig::parse(&v).expect_err("should not parse")
}

fn check_real(cfg: &DatasetConfig) {
    let names: Vec<&str> = cfg.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["topic", "answer", "summary"]);
    let ColumnKind::Sampler(s) = &cfg.columns[0].kind else {
        panic!("topic is not a sampler")
    };
    assert_eq!(s.sampler_type, SamplerType::Category);
    let SamplerParams::Category(c) = &s.params else {
        panic!("not category params")
    };
    assert_eq!(c.values, [Scalar(json!("math")), Scalar(json!("history"))]);
    assert!(s.conditional_params.is_empty() && s.convert_to.is_none());
    let ColumnKind::Llm(answer) = &cfg.columns[1].kind else {
        panic!("answer is not llm")
    };
    assert_eq!(answer.kind, LlmKind::Text);
    assert_eq!(answer.model_alias, "nvidia-text");
    assert_eq!(answer.tool_alias.as_deref(), Some("my-tools"));
    assert_eq!(answer.with_trace, TraceType::AllMessages);
    assert!(
        cfg.columns
            .iter()
            .all(|c| !c.drop && c.propagate_skip && c.skip.is_none())
    );
    let ColumnKind::Llm(summary) = &cfg.columns[2].kind else {
        panic!("summary is not llm")
    };
    let LlmKind::Structured { output_format } = &summary.kind else {
        panic!("not structured")
    };
    assert_eq!(output_format["required"], json!(["title", "score"]));
    assert_eq!(summary.with_trace, TraceType::None);
    let m = &cfg.model_configs[0];
    assert_eq!(
        (m.alias.as_str(), m.provider.as_str()),
        ("nvidia-text", "nvidia")
    );
    assert_eq!(m.inference_parameters.max_parallel_requests, 8);
    assert_eq!(m.inference_parameters.timeout, Some(120));
    let t = &cfg.tool_configs[0];
    assert_eq!(
        t.allow_tools.as_deref(),
        Some(&["get_fact".to_owned(), "add_numbers".to_owned()][..])
    );
    assert_eq!(t.timeout_sec, Some(45.0));
    assert!(cfg.seed_config.is_none() && cfg.constraints.is_none());
    assert!(cfg.raw.get("columns").is_some() && cfg.raw.get("data_designer").is_none());
}

#[test]
fn parses_the_real_serialized_yaml() {
    let v: Value = yaml_serde::from_str(REAL_YAML).unwrap();
    check_real(&parse(v));
}

#[test]
fn parses_the_real_json_wrapped_and_inner() {
    let wrapped = real_json();
    check_real(&parse(wrapped.clone()));
    check_real(&parse(wrapped["data_designer"].clone()));
    let from_yaml: Value = yaml_serde::from_str(REAL_YAML).unwrap();
    assert_eq!(parse(from_yaml).columns, parse(wrapped).columns);
}

#[test]
fn field_type_errors_name_column_and_field() {
    let i = issues(json!({"columns": [
        {"name": "price", "column_type": "sampler", "sampler_type": "uniform", "params": {"low": "a", "high": 2}}
    ]}));
    assert_eq!(i.len(), 1);
    assert_eq!(i[0].code, "invalid_config");
    assert_eq!(i[0].column.as_deref(), Some("price"));
    assert_eq!(i[0].field.as_deref(), Some("params.low"));
    assert_eq!(
        i[0].message,
        "column 'price': field 'params.low': invalid type: string \"a\", expected f64"
    );
}

#[test]
fn every_column_issue_is_collected_in_order() {
    let i = issues(json!({"columns": [
        {"name": "a", "column_type": "expression", "expr": "{{ x }}", "bogus": 1, "other": 2},
        {"column_type": "expression", "expr": "x"},
        {"name": "c", "column_type": "mystery"},
        {"name": "d", "column_type": "llm-text", "model_alias": "m"},
        {"name": "e", "column_type": "expression", "expr": "   "},
    ]}));
    let got: Vec<(&str, Option<&str>, Option<&str>)> = i
        .iter()
        .map(|i| (i.code, i.column.as_deref(), i.field.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("invalid_config", Some("a"), Some("bogus")),
            ("invalid_config", Some("a"), Some("other")),
            ("invalid_config", None, Some("columns[1].name")),
            ("unknown_column_type", Some("c"), Some("column_type")),
            ("invalid_config", Some("d"), Some("prompt")),
            ("invalid_config", Some("e"), Some("expr")),
        ]
    );
    assert!(i[0].message.contains("unknown field `bogus`"));
    assert_eq!(
        i[2].message,
        "column at index 1: field 'name': missing field `name`"
    );
    assert!(
        i[3].message
            .contains("sampler, expression, seed-dataset, llm-text"),
        "{}",
        i[3].message
    );
}

#[test]
fn llm_family_fields_are_checked_per_type() {
    let base = |extra: Value| {
        let mut col =
            json!({"name": "x", "column_type": "llm-text", "prompt": "p", "model_alias": "m"});
        for (k, v) in extra.as_object().unwrap() {
            col[k] = v.clone();
        }
        json!({"columns": [col]})
    };
    // code_lang belongs to llm-code only.
    assert_eq!(
        issues(base(json!({"code_lang": "python"})))[0]
            .field
            .as_deref(),
        Some("code_lang")
    );
    let i = issues(base(
        json!({"column_type": "llm-code", "code_lang": "brainfuck"}),
    ));
    assert!(i[0].message.contains("unknown code_lang 'brainfuck'"));
    let i = issues(base(
        json!({"column_type": "llm-structured", "output_format": "json"}),
    ));
    assert_eq!(i[0].field.as_deref(), Some("output_format"));
    let i = issues(base(json!({"column_type": "llm-judge", "scores": []})));
    assert_eq!(
        i[0].message,
        "column 'x': field 'scores': must contain at least one score"
    );
    let i = issues(base(
        json!({"column_type": "llm-judge", "scores": [{"name": "q", "description": "d", "options": {"1": 2}}]}),
    ));
    assert_eq!(i[0].field.as_deref(), Some("scores[0].options.1"));
    let i = issues(base(json!({"with_trace": "sometimes"})));
    assert!(i[0].message.contains("unknown variant `sometimes`"));
    let i = issues(base(
        json!({"multi_modal_context": [{"column_name": "img", "data_type": "base64"}]}),
    ));
    assert_eq!(
        i[0].field.as_deref(),
        Some("multi_modal_context[0].image_format")
    );

    let ok = parse(base(
        json!({"column_type": "llm-judge", "with_trace": true, "extract_reasoning_content": true,
        "scores": [{"name": "q", "description": "d", "options": {"1": "bad", "2": "good"}}],
        "multi_modal_context": [{"column_name": "img"}]}),
    ));
    let ColumnKind::Llm(l) = &ok.columns[0].kind else {
        panic!()
    };
    assert_eq!(l.with_trace, TraceType::AllMessages);
    assert_eq!(
        l.multi_modal_context.as_ref().unwrap()[0].modality,
        Modality::Image
    );
    let ok = parse(base(json!({"with_trace": false})));
    let ColumnKind::Llm(l) = &ok.columns[0].kind else {
        panic!()
    };
    assert_eq!(l.with_trace, TraceType::None);
}

#[test]
fn skip_is_rejected_on_samplers_and_checked_elsewhere() {
    let i = issues(json!({"columns": [
        {"name": "s", "column_type": "sampler", "sampler_type": "uuid", "params": {}, "skip": {"when": "{{ a }}"}},
        {"name": "e", "column_type": "expression", "expr": "x", "skip": {"when": "{{ a }}", "value": [1]}},
        {"name": "f", "column_type": "expression", "expr": "x", "skip": {"when": "{{ a }}", "unless": 1}},
    ]}));
    let fields: Vec<_> = i.iter().map(|i| i.field.as_deref().unwrap()).collect();
    assert_eq!(fields, ["skip", "skip.value", "skip.unless"]);
    let cfg = parse(json!({"columns": [
        {"name": "e", "column_type": "expression", "expr": "x", "skip": {"when": "{{ a }}", "value": 0}, "propagate_skip": false}
    ]}));
    assert_eq!(cfg.columns[0].skip.as_ref().unwrap().value, json!(0));
    assert!(!cfg.columns[0].propagate_skip);
}

#[test]
fn sampler_shapes_are_checked() {
    let i = issues(json!({"columns": [
        {"name": "a", "column_type": "sampler", "sampler_type": "gaussian_ish", "params": {}},
        {"name": "b", "column_type": "sampler", "sampler_type": "uniform", "params": {"low": 0, "high": 1},
         "conditional_params": {"x == 1": {"low": "z", "high": 2}}},
        {"name": "c", "column_type": "sampler", "sampler_type": "bernoulli", "params": {"p": 0.5, "sampler_type": "binomial"}},
        {"name": "d", "column_type": "sampler", "sampler_type": "category", "params": []},
    ]}));
    let fields: Vec<_> = i.iter().map(|i| i.field.as_deref().unwrap()).collect();
    assert_eq!(
        fields,
        [
            "sampler_type",
            "conditional_params.x == 1.low",
            "params.sampler_type",
            "params"
        ]
    );
    assert!(i[0].message.contains("known types: bernoulli"));
}

#[test]
fn top_level_keys_and_configs_are_checked() {
    let i = issues(
        json!({"data_designer": {"columns": [], "colums": []}, "library_version": 1, "extra": true}),
    );
    let got: Vec<_> = i
        .iter()
        .map(|i| (i.code, i.field.as_deref().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("invalid_config", "extra"),
            ("invalid_config", "library_version"),
            ("invalid_config", "colums")
        ]
    );
    let i = issues(
        json!({"columns": [], "model_configs": [{"alias": "a", "model": "m", "provider": "p",
        "inference_parameters": {"temprature": 1}}], "tool_configs": [{"tool_alias": "t"}]}),
    );
    assert_eq!(i[0].code, "invalid_model_config");
    assert_eq!(
        i[0].field.as_deref(),
        Some("model_configs[0].inference_parameters.temprature")
    );
    assert_eq!(i[1].code, "invalid_tool_config");
    assert_eq!(i[1].field.as_deref(), Some("tool_configs[0].providers"));
    let i = issues(json!("columns"));
    assert_eq!(i[0].code, "invalid_config");
}

#[test]
fn seed_config_shapes() {
    let cfg = parse(json!({"columns": [], "seed_config": {
        "source": {"seed_type": "inline", "rows": [{"a": 1}]},
        "sampling_strategy": "shuffle", "selection_strategy": {"start": 0, "end": 0}}}));
    let sc = cfg.seed_config.unwrap();
    assert_eq!(
        sc.source,
        SeedSource::Inline {
            rows: vec![json!({"a": 1})]
        }
    );
    assert_eq!(sc.sampling_strategy, SamplingStrategy::Shuffle);
    assert_eq!(
        sc.selection_strategy,
        Some(SelectionStrategy::IndexRange { start: 0, end: 0 })
    );
    let cfg = parse(
        json!({"seed_config": {"source": {"seed_type": "local", "path": "x.parquet"},
        "selection_strategy": {"index": 1}}}),
    );
    let sc = cfg.seed_config.unwrap();
    assert_eq!(
        sc.source,
        SeedSource::Local {
            path: "x.parquet".into()
        }
    );
    assert_eq!(sc.sampling_strategy, SamplingStrategy::Ordered);
    assert_eq!(
        sc.selection_strategy,
        Some(SelectionStrategy::PartitionBlock {
            index: 1,
            num_partitions: 1
        })
    );
    let i = issues(
        json!({"seed_config": {"source": {"seed_type": "inline", "rows": [], "path": "x"}}}),
    );
    assert_eq!(i[0].field.as_deref(), Some("seed_config.source.path"));
    let i = issues(json!({"seed_config": {"source": {"rows": []}, "sampling_strategy": "random"}}));
    assert_eq!(i[0].field.as_deref(), Some("seed_config.sampling_strategy"));
    let i = issues(json!({"seed_config": {"source": {"rows": []}}}));
    assert_eq!(i[0].field.as_deref(), Some("seed_config.source.seed_type"));
    let i = issues(
        json!({"seed_config": {"source": {"seed_type": "inline", "rows": []}, "selection_strategy": {"start": -1, "end": 2}}}),
    );
    assert_eq!(
        i[0].field.as_deref(),
        Some("seed_config.selection_strategy.start")
    );
}

#[test]
fn odd_inputs_never_panic() {
    let odd = [
        json!(null),
        json!(1),
        json!([]),
        json!({"data_designer": null}),
        json!({"data_designer": []}),
        json!({"columns": {}}),
        json!({"columns": [null, 1, "x", [], {}]}),
        json!({"columns": [{"name": 5, "column_type": 5}]}),
        json!({"columns": [{"name": "a", "column_type": "sampler", "sampler_type": "category", "params": {"values": [{}], "weights": "x"}}]}),
        json!({"columns": [{"name": "a", "column_type": "sampler", "sampler_type": 7, "params": null}]}),
        json!({"columns": [{"name": "a", "column_type": "llm-judge", "prompt": "", "model_alias": "", "scores": [{}]}]}),
        json!({"seed_config": {"source": 5}}),
        json!({"seed_config": []}),
        json!({"seed_config": {"source": {"seed_type": "inline", "rows": 3}, "selection_strategy": 4}}),
        json!({"model_configs": {}, "tool_configs": [1]}),
    ];
    for v in odd {
        if let Err(issues) = DatasetConfig::parse(&v) {
            assert!(!issues.is_empty());
            assert!(issues.iter().all(|i| !i.message.is_empty()), "{v}");
        }
    }
}

#[test]
fn file_backed_seed_sources_parse_with_datadesigners_defaults() {
    let source = |src: serde_json::Value| {
        parse(json!({"columns": [], "seed_config": {"source": src}}))
            .seed_config
            .unwrap()
            .source
    };
    assert_eq!(
        source(json!({"seed_type": "hf", "path": "datasets/a/b/*.parquet", "token": "hf_x"})),
        SeedSource::Hf {
            path: "datasets/a/b/*.parquet".into(),
            token: Some(crate::domain::dataset::SeedToken(
                secrecy::SecretString::from("hf_x")
            )),
            endpoint: "https://huggingface.co".into(),
        }
    );
    let fs = crate::domain::dataset::FileSystemSource {
        path: "docs".into(),
        file_pattern: "*".into(),
        recursive: true,
    };
    assert_eq!(
        source(json!({"seed_type": "directory", "path": "docs"})),
        SeedSource::Directory(fs.clone())
    );
    assert_eq!(
        source(json!({"seed_type": "file_contents", "path": "docs", "encoding": "latin-1"})),
        SeedSource::FileContents {
            files: fs,
            encoding: "latin-1".into()
        }
    );
    assert_eq!(
        source(json!({"seed_type": "df"})),
        SeedSource::Other {
            seed_type: "df".into()
        }
    );
    let i =
        issues(json!({"seed_config": {"source": {"seed_type": "local", "path": "a.csv", "x": 1}}}));
    assert_eq!(i[0].field.as_deref(), Some("seed_config.source.x"));
}

#[test]
fn the_data_designer_services_seed_shape_names_a_datastore_file() {
    let seed = parse(json!({"columns": [], "seed_config": {
        "dataset": "default/cities/seed.parquet", "sampling_strategy": "shuffle",
        "selection_strategy": {"start": 0, "end": 1}}}))
    .seed_config
    .unwrap();
    assert_eq!(
        seed.source,
        SeedSource::Datastore {
            dataset: "default/cities/seed.parquet".into()
        }
    );
    assert_eq!(seed.sampling_strategy, SamplingStrategy::Shuffle);
    assert!(seed.selection_strategy.is_some());
    for (seed_config, field, says) in [
        (
            json!({"dataset": "a/b/c.csv", "source": {"seed_type": "local", "path": "c.csv"}}),
            "seed_config.dataset",
            "not both",
        ),
        (
            json!({"sampling_strategy": "ordered"}),
            "seed_config.source",
            "missing field",
        ),
        (
            json!({"dataset": "a/b/c.csv", "selection_strategy": {"start": "x"}}),
            "seed_config.selection_strategy.start",
            "",
        ),
    ] {
        let issues = DatasetConfig::parse(&json!({"columns": [], "seed_config": seed_config}))
            .expect_err("refused");
        assert!(
            issues
                .iter()
                .any(|i| i.field.as_deref() == Some(field) && i.message.contains(says)),
            "{seed_config}: {issues:?}"
        );
    }
}
