//! Inline seed rows (ordered, shuffled, selected) and skip / propagate_skip / drop.

use std::collections::HashSet;

use serde_json::json;

use super::*;

fn seeded(columns: Value, rows: Value, extra: Value) -> Plan {
    let mut sc = json!({"source": {"seed_type": "inline", "rows": rows}});
    for (k, v) in extra.as_object().unwrap() {
        sc[k] = v.clone();
    }
    plan(json!({"columns": columns, "seed_config": sc}))
}

fn ids(plan: &Plan, range: std::ops::Range<u64>) -> Vec<i64> {
    range
        .map(|i| row(plan, i)["id"].as_i64().unwrap())
        .collect()
}

#[test]
fn seed_fields_become_first_columns_and_wrap_in_order() {
    let plan = seeded(
        json!([expr("label", "#{{ id }} {{ name }}")]),
        json!([{"id": 0, "name": "a"}, {"id": 1, "name": "b"}, {"id": 2, "name": "c"}]),
        json!({}),
    );
    assert_eq!(plan.output_columns(), ["id", "name", "label"]);
    assert_eq!(ids(&plan, 0..7), [0, 1, 2, 0, 1, 2, 0]);
    assert_eq!(row(&plan, 4)["label"], json!("#1 b"));
}

#[test]
fn listed_seed_columns_select_fields_in_config_order() {
    let plan = seeded(
        json!([expr("first", "{{ id }}"), {"name": "id", "column_type": "seed-dataset"}]),
        json!([{"id": 5, "unused": true}]),
        json!({}),
    );
    assert_eq!(plan.output_columns(), ["first", "id"]);
    assert_eq!(
        row(&plan, 0),
        json!({"first": "5", "id": 5}).as_object().unwrap().clone()
    );
}

#[test]
fn shuffle_uses_every_row_once_per_pass_with_a_new_order_each_pass() {
    let rows: Vec<Value> = (0..10).map(|i| json!({"id": i})).collect();
    let plan = seeded(
        json!([]),
        json!(rows),
        json!({"sampling_strategy": "shuffle"}),
    );
    let pass0 = ids(&plan, 0..10);
    let pass1 = ids(&plan, 10..20);
    for pass in [&pass0, &pass1] {
        assert_eq!(pass.iter().collect::<HashSet<_>>().len(), 10);
    }
    assert_ne!(pass0, (0..10).collect::<Vec<_>>());
    assert_ne!(pass0, pass1);
    // Deterministic per seed.
    let again = seeded(
        json!([]),
        json!(rows),
        json!({"sampling_strategy": "shuffle"}),
    );
    assert_eq!(ids(&again, 0..20), [pass0, pass1].concat());
}

#[test]
fn selection_strategies_pick_rows() {
    let rows: Vec<Value> = (0..10).map(|i| json!({"id": i})).collect();
    let range = seeded(
        json!([]),
        json!(rows),
        json!({"selection_strategy": {"start": 2, "end": 4}}),
    );
    assert_eq!(ids(&range, 0..4), [2, 3, 4, 2]);
    // 10 rows in 3 partitions: [0..3), [3..6), [6..10) — the last takes the remainder.
    let last = seeded(
        json!([]),
        json!(rows),
        json!({"selection_strategy": {"index": 2, "num_partitions": 3}}),
    );
    assert_eq!(ids(&last, 0..5), [6, 7, 8, 9, 6]);
    let mid = seeded(
        json!([]),
        json!(rows),
        json!({"selection_strategy": {"index": 1, "num_partitions": 3}, "sampling_strategy": "shuffle"}),
    );
    let mut got = ids(&mid, 0..3);
    got.sort();
    assert_eq!(got, [3, 4, 5]);
}

#[test]
fn skip_when_writes_the_skip_value_and_propagates() {
    let mut price = expr("price", "{{ base * 2 }}");
    price["skip"] = json!({"when": "{{ in_stock == 0 }}", "value": -1});
    let plan = seeded(
        json!([
            price,
            expr("label", "price {{ price }}"),
            {"name": "tolerant", "column_type": "expression", "expr": "{{ price }}", "propagate_skip": false},
            {"name": "gated", "column_type": "expression", "expr": "x", "skip": {"when": "{{ base > 100 }}"}},
        ]),
        json!([{"base": 5, "in_stock": 1}, {"base": 500, "in_stock": 0}]),
        json!({}),
    );
    let r = row(&plan, 0);
    assert_eq!(
        (&r["price"], &r["label"], &r["gated"]),
        (&json!("10"), &json!("price 10"), &json!("x"))
    );
    let r = row(&plan, 1);
    assert_eq!(r["price"], json!(-1));
    assert_eq!(
        r["label"],
        json!(null),
        "a reader of a skipped column is skipped too"
    );
    assert_eq!(
        r["tolerant"],
        json!("-1"),
        "propagate_skip: false still generates"
    );
    assert_eq!(r["gated"], json!(null), "skip value defaults to null");
}

#[test]
fn skip_reads_are_not_data_dependencies() {
    // `b` is skipped; `c` only gates on `b` in its skip.when, so it is not propagated.
    let mut b = expr("b", "{{ a }}");
    b["skip"] = json!({"when": "{{ a == 'x' }}"});
    let mut c = expr("c", "{{ a }}!");
    c["skip"] = json!({"when": "{{ b == 'never' }}"});
    let plan = seeded(json!([b, c]), json!([{"a": "x"}]), json!({}));
    let r = row(&plan, 0);
    assert_eq!((&r["b"], &r["c"]), (&json!(null), &json!("x!")));
}

#[test]
fn a_failing_skip_gate_skips_the_cell() {
    let mut e = expr("e", "generated");
    e["skip"] = json!({"when": "{{ a.missing.deeper }}"});
    let plan = seeded(json!([e]), json!([{"a": 1}]), json!({}));
    assert_eq!(row(&plan, 0)["e"], json!(null));
}

#[test]
fn dropped_columns_are_usable_but_not_output() {
    let mut secret = sampler("secret", "category", json!({"values": ["s3"]}));
    secret["drop"] = json!(true);
    let plan = plan_columns(json!([secret, expr("shown", "{{ secret }}")]));
    assert_eq!(plan.output_columns(), ["shown"]);
    assert_eq!(
        row(&plan, 0),
        json!({"shown": "s3"}).as_object().unwrap().clone()
    );
}
