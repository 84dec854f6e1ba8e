//! One test per issue code `Plan::compile` reports, with the column and field it names.

use serde_json::json;

use super::*;

fn codes(issues: &[ConfigIssue]) -> Vec<&'static str> {
    issues.iter().map(|i| i.code).collect()
}

fn llm(name: &str, prompt: &str) -> Value {
    json!({"name": name, "column_type": "llm-text", "prompt": prompt, "model_alias": "server-model"})
}

#[test]
fn no_columns() {
    let i = issues(json!({"columns": []}));
    assert_eq!(codes(&i), ["no_columns"]);
    let i = issues(json!({}));
    assert_eq!(codes(&i), ["no_columns"]);
}

#[test]
fn duplicate_column_and_side_column_clash() {
    let mut answer = llm("answer", "hi");
    answer["extract_reasoning_content"] = json!(true);
    let i = column_issues(json!([
        expr("a", "1"),
        expr("a", "2"),
        answer,
        expr("answer__reasoning_content", "x"),
    ]));
    assert_eq!(codes(&i), ["duplicate_column", "duplicate_column"]);
    assert_eq!(
        i[0].message,
        "column 'a': column name 'a' is used more than once"
    );
    assert_eq!(
        i[1].message,
        "column 'answer__reasoning_content': column name 'answer__reasoning_content' clashes with a side column of 'answer'"
    );
}

#[test]
fn invalid_template_includes_minijinja_message() {
    let i = column_issues(json!([expr("e", "{{ x + }}"), expr("x", "1")]));
    assert_eq!(codes(&i), ["invalid_template"]);
    assert_eq!(i[0].field.as_deref(), Some("expr"));
    assert!(
        i[0].message
            .starts_with("column 'e': field 'expr': syntax error"),
        "{}",
        i[0].message
    );
    // skip.when must reference a column.
    let mut e = expr("e", "1");
    e["skip"] = json!({"when": "in_stock == 0"});
    let i = column_issues(json!([e]));
    assert_eq!(codes(&i), ["invalid_template"]);
    assert_eq!(i[0].field.as_deref(), Some("skip.when"));
}

#[test]
fn unknown_reference_suggests_close_names() {
    let mut e = expr("e", "{{ topc }}");
    e["skip"] = json!({"when": "{{ nope }}"});
    let i = column_issues(json!([
        sampler("topic", "category", json!({"values": ["a"]})),
        e,
        sampler(
            "sub",
            "subcategory",
            json!({"category": "topik", "values": {"a": ["x"]}})
        ),
        sampler(
            "later",
            "timedelta",
            json!({"dt_min": 0, "dt_max": 2, "reference_column_name": "when"})
        ),
    ]));
    let got: Vec<_> = i
        .iter()
        .map(|i| {
            (
                i.code,
                i.column.as_deref().unwrap(),
                i.field.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("unknown_reference", "e", "skip.when"),
            ("unknown_reference", "e", "expr"),
            ("unknown_reference", "sub", "params.category"),
            ("unknown_reference", "later", "params.reference_column_name"),
        ]
    );
    assert_eq!(
        i[1].message,
        "column 'e': field 'expr': 'topc' is not a column; did you mean 'topic'?"
    );
    let mut l = llm("l", "hi");
    l["multi_modal_context"] = json!([{"column_name": "image"}]);
    let i = column_issues(json!([l]));
    assert_eq!(
        i[0].field.as_deref(),
        Some("multi_modal_context[0].column_name")
    );
    // A sampler condition over a missing column.
    let mut s = sampler("s", "uniform", json!({"low": 0, "high": 1}));
    s["conditional_params"] = json!({"level == 'hard'": {"low": 5, "high": 6}});
    let i = column_issues(json!([s]));
    assert_eq!(
        i[0].field.as_deref(),
        Some("conditional_params.level == 'hard'")
    );
    assert_eq!(i[0].code, "unknown_reference");
}

#[test]
fn dependency_cycle_shows_the_path() {
    let i = column_issues(json!([
        expr("first", "1"),
        expr("a", "{{ b }}"),
        expr("b", "{{ c }}"),
        expr("c", "{{ a }}"),
        expr("d", "{{ d }}"),
        expr("e", "{{ a }}"),
    ]));
    assert_eq!(codes(&i), ["dependency_cycle", "dependency_cycle"]);
    assert_eq!(i[0].column.as_deref(), Some("a"));
    assert!(
        i[0].message.contains("a -> b -> c -> a"),
        "{}",
        i[0].message
    );
    assert!(i[1].message.contains("d -> d"), "{}", i[1].message);
}

#[test]
fn invalid_sampler_params() {
    let i = column_issues(json!([
        sampler("u", "uniform", json!({"low": 5, "high": 1})),
        sampler(
            "c",
            "category",
            json!({"values": ["a", "b"], "weights": [1]})
        ),
        sampler("z", "category", json!({"values": ["a"], "weights": [0]})),
        sampler("p", "bernoulli", json!({"p": 1.5})),
        sampler("bn", "binomial", json!({"n": -1, "p": 0.5})),
        sampler("g", "gaussian", json!({"mean": 0, "stddev": 0})),
        sampler("po", "poisson", json!({"mean": -1})),
        sampler(
            "dt",
            "datetime",
            json!({"start": "2024-02-01", "end": "2024-01-01"})
        ),
        sampler(
            "dt2",
            "datetime",
            json!({"start": "soon", "end": "2024-01-01", "unit": "w"})
        ),
        sampler(
            "td",
            "timedelta",
            json!({"dt_min": 5, "dt_max": 5, "reference_column_name": "dt", "unit": "M"})
        ),
        sampler("e", "category", json!({"values": []})),
    ]));
    let got: Vec<_> = i
        .iter()
        .map(|i| (i.column.as_deref().unwrap(), i.field.as_deref().unwrap()))
        .collect();
    assert!(
        i.iter().all(|i| i.code == "invalid_sampler_params"),
        "{i:#?}"
    );
    assert_eq!(
        got,
        [
            ("u", "params.low"),
            ("c", "params.weights"),
            ("z", "params.weights"),
            ("p", "params.p"),
            ("bn", "params.n"),
            ("g", "params.stddev"),
            ("po", "params.mean"),
            ("dt", "params.end"),
            ("dt2", "params.unit"),
            ("dt2", "params.start"),
            ("td", "params.unit"),
            ("td", "params.dt_min"),
            ("e", "params.values"),
        ]
    );
    assert_eq!(
        i[0].message,
        "column 'u': field 'params.low': low (5) must be less than high (1)"
    );
}

#[test]
fn invalid_subcategory_parent_and_values() {
    let i = column_issues(json!([
        sampler("n", "uniform", json!({"low": 0, "high": 1})),
        sampler("cat", "category", json!({"values": ["a", "b", true]})),
        sampler("s1", "subcategory", json!({"category": "n", "values": {}})),
        sampler(
            "s2",
            "subcategory",
            json!({"category": "cat", "values": {"a": ["x"], "b": []}})
        ),
    ]));
    let got: Vec<_> = i
        .iter()
        .map(|i| (i.column.as_deref().unwrap(), i.field.as_deref().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("s1", "params.category"),
            ("s2", "params.values"),
            ("s2", "params.values.b")
        ]
    );
    assert!(
        i[1].message.contains("no entry for cat value(s): True"),
        "{}",
        i[1].message
    );
}

#[test]
fn invalid_convert_to() {
    let mut a = sampler("a", "uniform", json!({"low": 0, "high": 1}));
    a["convert_to"] = json!("decimal");
    let mut d = sampler(
        "d",
        "datetime",
        json!({"start": "2024-01-01", "end": "2025-01-01"}),
    );
    d["convert_to"] = json!("%Y %z");
    let i = column_issues(json!([a, d]));
    assert_eq!(
        codes(&i),
        ["invalid_sampler_params", "invalid_sampler_params"]
    );
    assert_eq!(i[0].field.as_deref(), Some("convert_to"));
    assert!(i[1].message.contains("without timezone"));
}

#[test]
fn self_reference_in_skip_when() {
    let mut e = expr("e", "1");
    e["skip"] = json!({"when": "{{ e > 1 }}"});
    let mut l = llm("l", "hi");
    l["extract_reasoning_content"] = json!(true);
    l["skip"] = json!({"when": "{{ l__reasoning_content }}"});
    let i = column_issues(json!([e, l]));
    assert_eq!(codes(&i), ["self_reference", "self_reference"]);
    assert_eq!(i[0].field.as_deref(), Some("skip.when"));
}

#[test]
fn all_issues_are_reported_together() {
    let i = issues(json!({
        "columns": [expr("a", "{{ missing }}"), sampler("b", "uniform", json!({"low": 1, "high": 0})), expr("c", "{{ c }}")],
        "processors": [{"name": "d", "processor_type": "drop_columns", "column_names": ["nope"]}],
    }));
    assert_eq!(
        codes(&i),
        [
            "unknown_reference",
            "invalid_sampler_params",
            "dependency_cycle",
            "invalid_processor"
        ]
    );
}
