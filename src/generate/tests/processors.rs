//! Processors and profilers at compile: what `drop_columns` removes, what `schema_transform`
//! renders, and the issues either can raise.

use serde_json::{Value, json};

use super::{expr, issues, plan, row, sampler};
use crate::domain::dataset::ConfigIssue;

fn fields(issues: &[ConfigIssue]) -> Vec<(&'static str, String)> {
    issues
        .iter()
        .map(|i| (i.code, i.field.clone().unwrap_or_default()))
        .collect()
}

fn columns() -> Value {
    json!([
        sampler("n", "category", json!({"values": [3]})),
        expr("tmp_a", "{{ n * 2 }}"),
        expr("tmp_b", "x"),
        expr("kept", "{{ tmp_a }}!"),
        {"name": "hidden", "column_type": "expression", "expr": "h", "drop": true},
    ])
}

#[test]
fn drop_columns_removes_names_and_globs_after_generation() {
    let p = plan(json!({
        "columns": columns(),
        "processors": [{"name": "drop", "processor_type": "drop_columns", "column_names": ["tmp_*", "n"]}],
    }));
    assert_eq!(p.output_columns(), ["kept"]);
    // Dropped columns are still generated and read by later ones.
    assert_eq!(row(&p, 0)["kept"], json!("6!"));
}

#[test]
fn schema_transform_renders_each_string_of_its_template() {
    let mut cols = columns();
    let extra = cols.as_array_mut().unwrap();
    extra.push(expr("meta", "{\"k\": [1, 2]}"));
    extra.push(
        json!({"name": "yes", "column_type": "expression", "expr": "{{ n > 1 }}", "dtype": "bool"}),
    );
    let p = plan(json!({
        "columns": cols,
        "processors": [{
            "name": "chat", "processor_type": "schema_transform",
            "template": {
                "messages": [{"role": "user", "content": "{{ kept }} and {{ n }}"}],
                "upper": "{{ kept | upper }}",
                "n_twice": "{{ n + n }}",
                "literal": 7,
                "obj": "{{ meta }}",
                "flag": "{{ yes }}",
            },
        }],
    }));
    assert_eq!(p.output_datasets(), ["chat"]);
    assert_eq!(
        p.output_dataset_columns("chat").unwrap(),
        ["flag", "literal", "messages", "n_twice", "obj", "upper"],
        "sorted: Postgres' jsonb does not keep key order"
    );
    let main = json!({"kept": "a\"b", "n": 3, "meta": "{\"k\": [1, 2]}", "yes": true});
    let out = p.render_output("chat", &main).unwrap().unwrap();
    assert_eq!(
        out,
        json!({
            "messages": [{"role": "user", "content": "a\"b and 3"}],
            "upper": "A\"B",
            "n_twice": "6",
            "literal": 7,
            "obj": "{\"k\": [1, 2]}",
            "flag": "true",
        })
    );
    assert!(p.render_output("other", &main).is_none());
}

#[test]
fn processor_issues_name_the_field() {
    let i = issues(json!({
        "columns": columns(),
        "processors": [
            {"name": "d", "processor_type": "drop_columns", "column_names": ["tmp_b", "nope", "zz*"]},
            {"name": "t", "processor_type": "schema_transform",
             "template": {"a": "{{ hidden }}", "b": ["{{ missing }}"], "c": "{{ tmp_b }}", "d": "{% if %}"}},
            {"name": "t", "processor_type": "schema_transform", "template": {"x": "{{ kept }}"}},
        ],
    }));
    assert_eq!(
        fields(&i),
        [
            ("invalid_processor", "processors[0].column_names[1]".into()),
            ("invalid_processor", "processors[1].template.a".into()),
            ("unknown_reference", "processors[1].template.b[0]".into()),
            ("invalid_template", "processors[1].template.d".into()),
            ("invalid_processor", "processors[2].name".into()),
            ("invalid_processor", "processors[1].template.c".into()),
        ]
    );
    assert!(
        i[1].message
            .contains("'hidden', which is not in the final dataset")
    );
}

#[test]
fn profilers_need_a_defined_model_alias() {
    let ok = plan(json!({
        "columns": columns(),
        "profilers": [{"model_alias": "server-model"}],
    }));
    assert_eq!(ok.output_columns().len(), 4);
    let i = issues(json!({
        "columns": columns(),
        "profilers": [{"model_alias": "nope", "summary_score_sample_size": null}],
    }));
    assert_eq!(
        fields(&i),
        [("invalid_profiler", "profilers[0].model_alias".into())]
    );
}
