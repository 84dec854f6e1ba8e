//! The `where`, `order by`, `limit` and `offset` of a job listing ([`JobSelect`]): one
//! statement per page asked, whatever the filter, on both backends. What each backend says its
//! own way (JSON paths, how `updated_at` is stored) is its [`JobsDialect`].

use chrono::{DateTime, Utc};
use sqlx::{Database, Encode, QueryBuilder, Type};
use uuid::Uuid;

use super::JobSelect;
use crate::domain::JobId;
use crate::domain::job::{JobFilter, JobOrder, TextField, TextMatch, TextTest};

/// The expressions of a job listing that differ between the backends.
pub(crate) trait JobsDialect<'a, DB: Database> {
    /// Pushes a test that `jobs.metadata`'s top-level `key` equals the JSON scalar `json`
    /// (given as JSON text).
    fn metadata_eq(&self, qb: &mut QueryBuilder<DB>, key: &'a str, json: String);

    /// Pushes the text at `path` of `jobs.metadata`: SQL null when it is missing.
    fn metadata_text(&self, qb: &mut QueryBuilder<DB>, path: &'a [String]);

    /// Binds `t` as the backend stores `jobs.created_at` and `jobs.updated_at`.
    fn push_time(&self, qb: &mut QueryBuilder<DB>, t: DateTime<Utc>);
}

/// Adds the `where`, `order by`, `limit` (and `offset`) of `select` to a query over `jobs`.
pub(crate) fn push_job_select<'a, DB: Database>(
    qb: &mut QueryBuilder<DB>,
    select: JobSelect<'a>,
    dialect: &impl JobsDialect<'a, DB>,
) where
    Uuid: Encode<'a, DB> + Type<DB>,
    &'a str: Encode<'a, DB> + Type<DB>,
    String: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let (owner, order, limit, offset) = match select {
        JobSelect::One { id, owner } => {
            qb.push(" where jobs.id = ").push_bind(id.0);
            (owner, None, None, 0)
        }
        JobSelect::Page {
            owner,
            before,
            limit,
            filter,
        } => {
            qb.push(" where true");
            if let Some(before) = before {
                qb.push(" and jobs.id < ").push_bind(before.0);
            }
            push_job_filter(qb, filter, dialect);
            (owner, Some(JobOrder::CreatedDesc), Some(limit), 0)
        }
        JobSelect::Numbered {
            owner,
            filter,
            order,
            offset,
            limit,
        } => {
            qb.push(" where true");
            push_job_filter(qb, filter, dialect);
            (owner, Some(order), Some(limit), offset)
        }
    };
    if let Some(owner) = owner {
        qb.push(" and jobs.owner = ").push_bind(owner);
    }
    if let Some(order) = order {
        qb.push(match order {
            JobOrder::CreatedDesc => " order by jobs.id desc",
            JobOrder::CreatedAsc => " order by jobs.id asc",
            JobOrder::UpdatedDesc => " order by jobs.updated_at desc, jobs.id desc",
            JobOrder::UpdatedAsc => " order by jobs.updated_at asc, jobs.id asc",
        });
    }
    if let Some(limit) = limit {
        qb.push(" limit ").push_bind(i64::from(limit));
    }
    if offset > 0 {
        qb.push(" offset ")
            .push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
    }
}

/// The conditions of a [`JobFilter`]. Creation times are bounds on the UUIDv7 ids (the
/// primary key's order), so they need no time column and read the same on both backends.
fn push_job_filter<'a, DB: Database>(
    qb: &mut QueryBuilder<DB>,
    filter: &'a JobFilter,
    dialect: &impl JobsDialect<'a, DB>,
) where
    Uuid: Encode<'a, DB> + Type<DB>,
    &'a str: Encode<'a, DB> + Type<DB>,
    String: Encode<'a, DB> + Type<DB>,
{
    if !filter.statuses.is_empty() {
        // Literals, not binds: statuses come from the enum, never from user text.
        let listed: Vec<String> = filter
            .statuses
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        qb.push(format_args!(" and jobs.status in ({})", listed.join(", ")));
    }
    if let Some(name) = &filter.name {
        qb.push(" and jobs.name = ").push_bind(name.as_str());
    }
    for (key, value) in &filter.metadata {
        qb.push(" and ");
        dialect.metadata_eq(qb, key, value.to_string());
    }
    if let Some(t) = filter.created_after {
        qb.push(" and jobs.id >= ").push_bind(JobId::first_at(t));
    }
    if let Some(t) = filter.created_before {
        qb.push(" and jobs.id < ").push_bind(JobId::first_at(t));
    }
    if let Some(t) = filter.created_from {
        qb.push(" and jobs.created_at >= ");
        dialect.push_time(qb, t);
    }
    if let Some(t) = filter.created_to {
        qb.push(" and jobs.created_at <= ");
        dialect.push_time(qb, t);
    }
    if let Some(t) = filter.updated_from {
        qb.push(" and jobs.updated_at >= ");
        dialect.push_time(qb, t);
    }
    if let Some(t) = filter.updated_to {
        qb.push(" and jobs.updated_at <= ");
        dialect.push_time(qb, t);
    }
    for m in &filter.text {
        push_text_match(qb, m, dialect);
    }
}

/// One [`TextMatch`]: the field (its default when missing) equal to a text, or containing one
/// of the terms. `like` with every wildcard of the terms escaped, on `lower()` of both sides:
/// the one case-insensitive substring test both backends spell alike. SQLite's `lower()` folds
/// ASCII letters only, Postgres's every letter.
fn push_text_match<'a, DB: Database>(
    qb: &mut QueryBuilder<DB>,
    m: &'a TextMatch,
    dialect: &impl JobsDialect<'a, DB>,
) where
    &'a str: Encode<'a, DB> + Type<DB>,
    String: Encode<'a, DB> + Type<DB>,
{
    let field = |qb: &mut QueryBuilder<DB>| {
        qb.push("coalesce(");
        match &m.field {
            TextField::Name => {
                qb.push("jobs.name");
            }
            TextField::Metadata(path) => dialect.metadata_text(qb, path),
        }
        qb.push(", ").push_bind(m.when_missing.as_str()).push(")");
    };
    match &m.test {
        TextTest::Equals(text) => {
            qb.push(" and ");
            field(qb);
            qb.push(" = ").push_bind(text.as_str());
        }
        TextTest::ContainsAny(terms) if terms.is_empty() => {}
        TextTest::ContainsAny(terms) => {
            qb.push(" and (");
            for (i, term) in terms.iter().enumerate() {
                if i > 0 {
                    qb.push(" or ");
                }
                qb.push("lower(");
                field(qb);
                qb.push(") like ")
                    .push_bind(like_pattern(term))
                    .push(" escape '\\'");
            }
            qb.push(")");
        }
    }
}

/// `%term%` in lower case, its own `%`, `_` and `\` escaped so they match themselves.
fn like_pattern(term: &str) -> String {
    let mut out = String::with_capacity(term.len() + 2);
    out.push('%');
    for c in term.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

#[cfg(test)]
mod tests {
    use super::like_pattern;

    #[test]
    fn a_term_matches_itself_and_only_itself() {
        assert_eq!(like_pattern("Eval"), "%eval%");
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }
}
