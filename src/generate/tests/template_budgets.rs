//! Adversarial templates: each must fail its render with a budget error, quickly and within a
//! bounded amount of memory, instead of aborting the process or allocating gigabytes; and the
//! fuel budget is the record's, not each template's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::generate::template::{
    BUDGET_EXCEEDED, RECORD_RENDER_TIME, RecordBudget, RecordContext, Templates,
};

/// Each was measured on minijinja 3.0.5 or 3.1.0 unpatched: an abort on a failed
/// allocation, gigabytes of memory, or tens of seconds of CPU.
const BOMBS: &[&str] = &[
    // widths and repeats that cannot be allocated (aborted the process)
    "{{ n|indent(100000000000) }}",
    "{{ '%0100000000000d'|format(1) }}",
    "{{ '%-100000000000s'|format('a') }}",
    "{{ '%.100000000000f'|format(1.5) }}",
    "{{ {'a': 1}|tojson(indent=100000000) }}",
    // gigabytes inside the fuel budget
    "{% set a = 'x' * 100000000 %}{% set a = a ~ a %}{% set a = a ~ a %}{% set a = a ~ a %}{{ a|length }}",
    "{{ (['abcdefghij'] * 100000000)|join }}",
    "{% set s %}{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}{% endset %}{{ s|length }}",
    // shared items: a few bytes of fuel that print as gigabytes
    "{{ '' ~ (['x' * 100000] * 100000) }}",
    "{{ ['x' * 100000] * 100000 }}",
    "{{ (['x' * 100000] * 100000)|string|length }}",
    "{{ (['x' * 100000] * 100000)|join|length }}",
    "{{ (['x' * 100000] * 100000)|tojson|length }}",
    "{{ (['x' * 100000] * 100000)|pprint|length }}",
    "{{ '%s'|format(['x' * 100000] * 100000)|length }}",
    "{% set s %}{{ ['x' * 100000] * 100000 }}{% endset %}{{ s|length }}",
    "{{ (['x' * 100000] * 100000)|sort|length }}",
    "{{ dict(a=['x' * 100000] * 100000) ~ 'a' }}",
    // lazy list concatenation, doubled past the depth where minijinja materializes it
    // (unpatched: 1.6 GB and minutes, past every deadline and after the client left)
    "{% set ns = namespace(l=[1]) %}{% for i in range(33) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
    "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}",
    // pretty-printing a structure that shares itself at every level (unpatched: 19 s past
    // the deadline, its indentation unpaid)
    "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l|pprint|length }}",
    "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l|string|length }}",
    // strings built by methods and filters whose output outgrows what fuel paid for
    // (issue 49 Q4: 2.9 GB and 9.7 s from 470 bytes)
    "{% set s = 'x' * 30000000 %}{{ ''.join([s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s])|length }}",
    "{% set s = 'x' * 30000000 %}{{ '{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}'.format(s)|length }}",
    "{{ '{0:>60000000}{0:>60000000}{0:>60000000}{0:>60000000}{0:>60000000}{0:>60000000}{0:>60000000}{0:>60000000}{0:>60000000}{0:>60000000}'.format(1)|length }}",
    "{% set s = 'x' * 30000000 %}{{ '%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s'|format(s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s)|length }}",
    "{% set s = ',' * 30000000 %}{{ s|split(',')|length }}",
    "{% set s = ',' * 30000000 %}{{ s.split(',')|length }}",
    "{% set s = '\\n' * 30000000 %}{{ s.splitlines()|length }}",
    "{% set s = '\\n' * 30000000 %}{{ s|lines|length }}",
    "{% set s = 'a b ' * 15000000 %}{{ s|wordcount }}{{ s.split()|length }}",
    "{% set s = 'x' * 30000000 %}{% for i in range(100000) %}{{ s.count('y') }}{% endfor %}",
    "{% set s = 'x' * 30000000 %}{% for i in range(100000) %}{{ s.upper()|length }}{% endfor %}",
    "{% set s = 'x' * 1000000 %}{{ s.replace('x', s)|length }}",
    "{% set s = 'x' * 30000000 %}{% for i in range(100000) %}{{ s|wordcount }}{% endfor %}",
    "{% set s = 'x' * 30000000 %}{% for i in range(100000) %}{{ s|striptags|length }}{% endfor %}",
    // CPU: many instructions
    "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
];

/// `l = [s]`, doubled `times` times (lazily, sharing `s`), then `tail`. Unrolled: a `set`
/// inside a `for` loop does not outlive the loop.
fn doubled(s_len: usize, times: usize, tail: &str) -> String {
    format!(
        "{{% set s = 'x' * {s_len} %}}{{% set l = [s] %}}{}{tail}",
        "{% set l = l + l %}".repeat(times)
    )
}

fn bombs() -> Vec<String> {
    let mut all: Vec<String> = BOMBS.iter().map(|b| (*b).to_owned()).collect();
    all.push(doubled(100_000, 20, "{{ l|join|length }}"));
    all.push(doubled(100_000, 20, "{{ l }}"));
    all.push(doubled(100_000, 20, "{{ l|tojson|length }}"));
    all.push(doubled(100_000, 20, "{{ l|unique|list|length }}"));
    all.push(doubled(1_000_000, 14, "{{ l|sort|length }}"));
    all.push(doubled(100_000, 20, "{{ l|max|length }}"));
    all.push(doubled(
        100_000,
        20,
        "{% for x in l %}{% if 'y' in x %}{% endif %}{% endfor %}",
    ));
    all
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn bombs_fail_within_budget() {
    let ctx = RecordContext {
        names: Arc::new(HashMap::from([("n".to_owned(), 0)])),
        values: vec![Some(minijinja::Value::from(1))],
    }
    .into_value();
    for bomb in &bombs() {
        let mut t = Templates::new();
        t.add("b", bomb).unwrap();
        let started = Instant::now();
        let err = t
            .render("b", &ctx, &RecordBudget::new())
            .expect_err(&format!("rendered <- {bomb}"));
        let took = started.elapsed();
        assert!(err.starts_with(BUDGET_EXCEEDED), "{err} <- {bomb}");
        // The deadline is the last line of defence (a few filters do work proportional to
        // shared data within one instruction); without the budgets these took from 17 s
        // to minutes, or aborted.
        assert!(
            took < RECORD_RENDER_TIME + Duration::from_secs(5),
            "took {took:?} <- {bomb}"
        );
    }
    // Unpatched, several of these peaked at 4 to 20 GB (or aborted). One render may hold
    // its fuel's worth of data (64 MiB) plus a copy while it is charged.
    let peak_mib = peak_rss_kib() / 1024;
    assert!(peak_mib < 512, "peak RSS {peak_mib} MiB");
}

#[test]
fn a_record_shares_one_fuel_budget_across_its_templates() {
    let mut t = Templates::new();
    // About a third of a render's fuel each: several fit in one render's budget, but not
    // in one record's budget when there are many of them.
    t.add("loop", "{% for i in range(100000) %}{% endfor %}ok")
        .unwrap();
    let ctx = RecordContext {
        names: Arc::new(HashMap::new()),
        values: vec![],
    }
    .into_value();
    let budget = RecordBudget::new();
    let mut rendered = 0;
    let err = loop {
        match t.render("loop", &ctx, &budget) {
            Ok(_) => rendered += 1,
            Err(e) => break e,
        }
        assert!(rendered < 1000, "the record budget never ran out");
    };
    assert!(err.starts_with(BUDGET_EXCEEDED), "{err}");
    assert!(rendered >= 3, "rendered {rendered}");
    // A fresh record starts with the full budget again.
    assert_eq!(t.render("loop", &ctx, &RecordBudget::new()).unwrap(), "ok");
}

/// The time budget counts rendering only: a record that waited (for an LLM, say) still has it
/// all, and one whose renders used it up stops its next render at once.
#[test]
fn rendering_time_is_what_renders_used() {
    let mut t = Templates::new();
    t.add("loop", "{% for i in range(20000) %}{% endfor %}ok")
        .unwrap();
    let ctx = RecordContext {
        names: Arc::new(HashMap::new()),
        values: vec![],
    }
    .into_value();
    let budget = RecordBudget::new();
    assert_eq!(t.render("loop", &ctx, &budget).unwrap(), "ok");
    budget.spend_time(RECORD_RENDER_TIME);
    let err = t.render("loop", &ctx, &budget).unwrap_err();
    assert!(
        err.starts_with(BUDGET_EXCEEDED) && err.contains("ran for more than"),
        "{err}"
    );
}

/// Python's `str.format` (through pycompat) and the `format` filter share minijinja's format
/// parser: a huge width or precision allocated its padding before any budget saw it
/// (`'{:>2000000000}'.format(1)`: 2 GB and 5 s). Refused at parse now, for both styles, as
/// out of fuel (more than a template's fuel pays for).
#[test]
fn huge_format_widths_are_refused_before_allocating() {
    for t in [
        "{{ '{:>2000000000}'.format(1) }}",
        "{{ '{:.2000000000f}'.format(1.5) }}",
        "{{ '%2000000000d' | format(1) }}",
    ] {
        let started = std::time::Instant::now();
        let plan = super::plan_columns(serde_json::json!([super::expr("out", t)]));
        let (e, _) = super::failure(&plan, 0);
        assert!(
            e.message.contains("larger than 67108864"),
            "{t}: {}",
            e.message
        );
        assert!(e.message.contains(BUDGET_EXCEEDED), "{t}: {}", e.message);
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{t}");
    }
}
