//! The columns a template reads (`Templates::references`): every expression and statement form.

use crate::generate::template::Templates;

/// Every place a template can read a variable reports it: a column read only through a
/// slice (`{{ xs[:3] }}`), a `{% set %}` of its own name or a macro default was not, so it
/// was left out of the record's context and of the column's dependencies (issue 50 item 1).
#[test]
fn references_find_a_column_in_every_expression_form() {
    let forms = [
        "{{ c }}",
        "{{ c[:3] }}",
        "{{ c[1:] }}",
        "{{ c[::2] }}",
        "{{ c[-2:] }}",
        "{{ xs[c:] }}",
        "{{ xs[:c] }}",
        "{{ xs[::c] }}",
        "{{ (c | list)[:2] }}",
        "{{ c[:2] | length }}",
        "{{ c[0] }}",
        "{{ xs[c] }}",
        "{{ c.a }}",
        "{{ c.a.b }}",
        "{{ c['a'] }}",
        "{{ -c }}",
        "{{ not c }}",
        "{{ c + 1 }}",
        "{{ 'x' ~ c }}",
        "{{ c == 1 }}",
        "{{ 1 < c < 3 }}",
        "{{ 1 if c else 2 }}",
        "{{ 1 if x else c }}",
        "{{ c | upper }}",
        "{{ xs | join(c) }}",
        "{{ xs | join(sep=c) }}",
        "{{ c is defined }}",
        "{{ xs is sameas(c) }}",
        "{{ c.split(',') }}",
        "{{ range(c) }}",
        "{{ range(*c) }}",
        "{{ dict(**c) }}",
        "{{ [c] }}",
        "{{ (c, 1) }}",
        "{{ {'k': c} }}",
        "{% for x in c %}{{ x }}{% endfor %}",
        "{% for x in xs if x == c %}{% endfor %}",
        "{% for x in xs %}{% else %}{{ c }}{% endfor %}",
        "{% if c %}{% endif %}",
        "{% if x %}{% else %}{{ c }}{% endif %}",
        "{% with y = c %}{{ y }}{% endwith %}",
        "{% with c = c %}{{ c }}{% endwith %}",
        "{% set y = c %}{{ y }}",
        "{% set c = c ~ '!' %}{{ c }}",
        "{% set y %}{{ c }}{% endset %}{{ y }}",
        "{% set c %}{{ c }}!{% endset %}{{ c }}",
        "{% set y | replace('a', c) %}a{% endset %}{{ y }}",
        "{% filter replace('a', c) %}a{% endfilter %}",
        "{% autoescape c %}x{% endautoescape %}",
        "{% macro m(a=c) %}{{ a }}{% endmacro %}{{ m() }}",
        "{% macro m() %}{{ c }}{% endmacro %}{{ m() }}",
        "{% macro m(a) %}{{ a }}{% endmacro %}{% call m(c) %}x{% endcall %}",
    ];
    for form in forms {
        let mut t = Templates::new();
        t.add("t", form).unwrap_or_else(|e| panic!("{form}: {e}"));
        let refs = t.references("t", |n| n == "c");
        assert!(refs.contains("c"), "{form}: references {refs:?}");
    }
    // And a name bound by the template itself is still not a reference.
    let mut t = Templates::new();
    t.add(
        "t",
        "{% set c = 1 %}{{ c }}{% for c in xs %}{{ c }}{% endfor %}",
    )
    .unwrap();
    assert!(!t.references("t", |_| false).contains("c"));
}
