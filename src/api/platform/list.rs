//! `GET .../workspaces/{workspace}/jobs/create`: the workspace's jobs, a page at a time, with
//! the platform's paging, `sort` and `filter`, applied by the database in the one query that
//! reads the page (the first door's store filters).
//!
//! The platform writes a filter three ways; two are served, the third refused by name:
//! brackets (`filter[status]=completed`, `filter[status][in]=active,error`,
//! `filter[created_at][gte]=2026-01-01T00:00:00Z`) and a JSON object
//! (`filter={"status": {"$in": ["active"]}}`, `$and` of such objects); its text grammar
//! (`status:"completed" AND name~"x"`) is not. Fields: `status` (`$eq`, `$in`, `$nin`),
//! `name`, `project`, `workspace` (`$eq`), `created_at` and `updated_at` (`$gte`, `$lte`).

use axum::Json;
use axum::extract::{RawQuery, State};
use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use super::errors::PlatformErrorBody;
use super::views::{PlatformJob, check_name, in_workspace, platform_job};
use crate::api::data_designer::views::{
    DEFAULT_PROJECT, META, PROJECT, PlatformStatus, platform_status,
};
use crate::api::extract::{self, ApiPath};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::domain::job::{JobFilter, JobOrder, TextField, TextMatch, TextTest};
use crate::error::ApiError;
use crate::state::AppState;

/// Jobs a page when the query names no `page_size` (the platform's default).
const DEFAULT_PAGE_SIZE: u32 = 10;

/// A page of jobs (the platform's `Page`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformJobPage {
    pub data: Vec<PlatformJob>,
    pub pagination: PlatformPagination,
    /// The order served.
    pub sort: String,
    /// The filter applied, each condition as `{field: {"$op": value}}`; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub filter: Option<Value>,
}

/// Where a page sits (the platform's `PaginationData`, less the total, which is not counted).
#[derive(Debug, Serialize, ToSchema)]
pub struct PlatformPagination {
    /// From 1.
    pub page: u32,
    pub page_size: u32,
    /// Jobs on this page.
    pub current_page_size: usize,
    /// `page + 1` while more follow, else `page`: a client pages on until they are equal.
    pub total_pages: u32,
}

/// One condition of a filter.
#[derive(Debug, Clone, PartialEq)]
struct Condition {
    field: String,
    op: Op,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    In,
    NotIn,
    Gte,
    Lte,
}

impl Op {
    fn parse(op: &str) -> Option<Self> {
        Some(match op.trim_start_matches('$') {
            "eq" => Self::Eq,
            "in" => Self::In,
            "nin" => Self::NotIn,
            "gte" => Self::Gte,
            "lte" => Self::Lte,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Eq => "$eq",
            Self::In => "$in",
            Self::NotIn => "$nin",
            Self::Gte => "$gte",
            Self::Lte => "$lte",
        }
    }
}

fn bad(msg: String) -> ApiError {
    ApiError::InvalidRequest(msg)
}

/// The query's parameters: `page`, `page_size`, `sort` and the filter's conditions.
struct ListQuery {
    page: u32,
    page_size: Option<u32>,
    sort: Option<String>,
    conditions: Vec<Condition>,
}

fn parse_query(raw: Option<&str>) -> Result<ListQuery, ApiError> {
    let mut q = ListQuery {
        page: 1,
        page_size: None,
        sort: None,
        conditions: Vec::new(),
    };
    let number = |k: &str, v: &str| -> Result<u32, ApiError> {
        v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
            bad(format!(
                "query parameter '{k}': '{v}' is not a whole number from 1"
            ))
        })
    };
    for (k, v) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match k.as_ref() {
            "page" => q.page = number(&k, &v)?,
            "page_size" => q.page_size = Some(number(&k, &v)?),
            "sort" => q.sort = Some(v.into_owned()),
            "filter" => q.conditions.extend(json_filter(&v)?),
            key => match key.strip_prefix("filter[") {
                Some(rest) => q.conditions.push(bracket(key, rest, &v)?),
                None => return Err(bad(format!("unknown query parameter '{key}'"))),
            },
        }
    }
    Ok(q)
}

/// `filter[field]=v` or `filter[field][op]=v` (`rest` is what follows `filter[`).
fn bracket(key: &str, rest: &str, value: &str) -> Result<Condition, ApiError> {
    let malformed = || {
        bad(format!(
            "query parameter '{key}': expected filter[field] or filter[field][op]"
        ))
    };
    let (field, tail) = rest.split_once(']').ok_or_else(malformed)?;
    let op = match tail {
        "" => Op::Eq,
        t => {
            let op = t
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .ok_or_else(malformed)?;
            Op::parse(op)
                .ok_or_else(|| bad(format!("query parameter '{key}': unknown operator '{op}'")))?
        }
    };
    let values = if matches!(op, Op::In | Op::NotIn) {
        value
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect()
    } else {
        vec![value.to_owned()]
    };
    check(Condition {
        field: field.to_owned(),
        op,
        values,
    })
}

/// `filter={...}`: an object of `field: value` or `field: {"$op": value}`, or `$and` of such.
fn json_filter(raw: &str) -> Result<Vec<Condition>, ApiError> {
    if !raw.trim_start().starts_with('{') {
        return Err(bad(format!(
            "query parameter 'filter': the text syntax ('{raw}') is not served; write \
             filter[field]=value, filter[field][$in]=a,b or a JSON object"
        )));
    }
    let value: Value = serde_json::from_str(raw)
        .map_err(|e| bad(format!("query parameter 'filter': not a JSON object: {e}")))?;
    let mut out = Vec::new();
    conditions_of(&value, &mut out)?;
    Ok(out)
}

fn conditions_of(value: &Value, out: &mut Vec<Condition>) -> Result<(), ApiError> {
    let Some(object) = value.as_object() else {
        return Err(bad(
            "query parameter 'filter': expected a JSON object".into()
        ));
    };
    for (field, test) in object {
        match field.as_str() {
            "$and" => {
                let Some(items) = test.as_array() else {
                    return Err(bad("query parameter 'filter': '$and' takes a list".into()));
                };
                for item in items {
                    conditions_of(item, out)?;
                }
            }
            op if op.starts_with('$') => {
                return Err(bad(format!(
                    "query parameter 'filter': '{op}' is not served (only '$and')"
                )));
            }
            _ => {
                match test.as_object() {
                    Some(ops) => {
                        for (op, v) in ops {
                            let parsed = Op::parse(op).filter(|_| op.starts_with('$')).ok_or_else(|| {
                            bad(format!("query parameter 'filter': unknown operator '{op}' on '{field}'"))
                        })?;
                            out.push(check(Condition {
                                field: field.clone(),
                                op: parsed,
                                values: scalars(field, v)?,
                            })?);
                        }
                    }
                    None => out.push(check(Condition {
                        field: field.clone(),
                        op: Op::Eq,
                        values: scalars(field, test)?,
                    })?),
                }
            }
        }
    }
    Ok(())
}

/// A JSON value or list of values as text.
fn scalars(field: &str, v: &Value) -> Result<Vec<String>, ApiError> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(bad(format!(
            "query parameter 'filter': '{field}' takes text values"
        ))),
    };
    match v {
        Value::Array(items) => items.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// Refuses a field or operator that is not served, and an impossible value count.
fn check(c: Condition) -> Result<Condition, ApiError> {
    let allowed: &[Op] = match c.field.as_str() {
        "status" => &[Op::Eq, Op::In, Op::NotIn],
        "name" | "project" | "workspace" => &[Op::Eq],
        "created_at" | "updated_at" => &[Op::Gte, Op::Lte],
        f => {
            return Err(bad(format!(
                "filter field '{f}' is not served: status, name, project, workspace, created_at, updated_at"
            )));
        }
    };
    if !allowed.contains(&c.op) {
        return Err(bad(format!(
            "filter field '{}' does not take '{}'",
            c.field,
            c.op.name()
        )));
    }
    if c.values.is_empty() || (!matches!(c.op, Op::In | Op::NotIn) && c.values.len() != 1) {
        return Err(bad(format!(
            "filter field '{}' with '{}': wrong number of values",
            c.field,
            c.op.name()
        )));
    }
    let unknown = c
        .values
        .iter()
        .find(|v| !PlatformStatus::NAMES.contains(&v.as_str()));
    if let Some(v) = unknown.filter(|_| c.field == "status") {
        return Err(bad(format!(
            "filter field 'status': '{v}' is not one of {}",
            PlatformStatus::NAMES.join(", ")
        )));
    }
    Ok(c)
}

/// The store filter of the conditions, in `workspace`; `None` when no job can pass (a status
/// condition and its negation).
fn job_filter(workspace: &str, conditions: &[Condition]) -> Result<Option<JobFilter>, ApiError> {
    let mut filter = JobFilter {
        text: vec![in_workspace(workspace)],
        ..JobFilter::default()
    };
    let mut statuses: Option<Vec<JobStatus>> = None;
    for c in conditions {
        let v = &c.values[0];
        match (c.field.as_str(), c.op) {
            ("status", op) => {
                let named =
                    |s: &JobStatus| c.values.iter().any(|v| platform_status(*s).as_str() == v);
                let these: Vec<JobStatus> = JobStatus::ALL
                    .into_iter()
                    .filter(|s| named(s) != (op == Op::NotIn))
                    .collect();
                // Several status conditions must all hold: their intersection.
                statuses = Some(match statuses {
                    None => these,
                    Some(before) => before.into_iter().filter(|s| these.contains(s)).collect(),
                });
            }
            ("name", _) => filter.name = Some(v.clone()),
            ("project", _) => filter.text.push(TextMatch {
                field: TextField::Metadata(vec![META.to_owned(), PROJECT.to_owned()]),
                when_missing: DEFAULT_PROJECT.to_owned(),
                test: TextTest::Equals(v.clone()),
            }),
            ("workspace", _) => filter.text.push(in_workspace(v)),
            (field, op) => {
                let at = Some(extract::parse_time(
                    &format!("filter[{field}][{}]", op.name()),
                    v,
                )?);
                match (field, op) {
                    ("created_at", Op::Gte) => filter.created_from = at,
                    ("created_at", _) => filter.created_to = at,
                    ("updated_at", Op::Gte) => filter.updated_from = at,
                    _ => filter.updated_to = at,
                }
            }
        }
    }
    if let Some(statuses) = statuses {
        if statuses.is_empty() {
            return Ok(None);
        }
        filter.statuses = statuses;
    }
    Ok(Some(filter))
}

/// A list query string read as the handler reads it (`page`, `page_size`, `sort`, `filter`),
/// then made the store filter of `workspace`: the fuzz target's entry (`crate::fuzzing`).
pub(crate) fn read_query(workspace: &str, raw: &str) -> Result<Option<JobFilter>, ApiError> {
    job_filter(workspace, &parse_query(Some(raw))?.conditions)
}

/// The conditions as the answer echoes them.
fn echo(conditions: &[Condition]) -> Option<Value> {
    if conditions.is_empty() {
        return None;
    }
    let mut out = Map::new();
    for c in conditions {
        let v = if matches!(c.op, Op::In | Op::NotIn) {
            json!(c.values)
        } else {
            json!(c.values[0])
        };
        let entry = out.entry(c.field.clone()).or_insert_with(|| json!({}));
        entry[c.op.name()] = v;
    }
    Some(Value::Object(out))
}

/// List a workspace's jobs
///
/// The key's jobs in the workspace that pass the filter, in the order `sort` names (newest
/// first by default), `page_size` (default 10) at a time. `total_pages` is `page + 1` while
/// more follow, else `page`; the total is not counted.
#[utoipa::path(get, path = "/apis/data-designer/v2/workspaces/{workspace}/jobs/create",
    operation_id = "platform_list_jobs", tag = "nemo-platform",
    params(("workspace" = String, Path, description = "Workspace"),
        ("page" = Option<u32>, Query, description = "From 1"),
        ("page_size" = Option<u32>, Query, description = "Default 10, most `limits.max_page_size`"),
        ("sort" = Option<String>, Query, description = "`created_at`, `-created_at` (default), `updated_at` or `-updated_at`"),
        ("filter" = Option<String>, Query, description = "A JSON object of conditions; or `filter[field]=value`, `filter[field][op]=value` (see the module docs)")),
    responses(
        (status = 200, description = "A page of jobs", body = PlatformJobPage),
        (status = 422, description = "A malformed page, sort, filter or workspace (`invalid_request`)", body = PlatformErrorBody),
    ))]
pub async fn list_jobs(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(workspace): ApiPath<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<PlatformJobPage>, ApiError> {
    check_name("workspace", &workspace)?;
    let q = parse_query(raw.as_deref())?;
    let order = match q.sort.as_deref() {
        None => JobOrder::CreatedDesc,
        Some(sort) => JobOrder::parse(sort).ok_or_else(|| {
            bad(format!(
                "query parameter 'sort': '{sort}' is not one of {}",
                JobOrder::NAMES.join(", ")
            ))
        })?,
    };
    let size = q
        .page_size
        .unwrap_or(DEFAULT_PAGE_SIZE)
        .min(state.config.limits.max_page_size);
    let (data, more): (Vec<PlatformJob>, bool) = match job_filter(&workspace, &q.conditions)? {
        Some(filter) => {
            let listed = state
                .jobs
                .numbered_jobs(caller.owner(), &filter, order, q.page - 1, size)
                .await?;
            (listed.items.iter().map(platform_job).collect(), listed.more)
        }
        None => (Vec::new(), false),
    };
    Ok(Json(PlatformJobPage {
        pagination: PlatformPagination {
            page: q.page,
            page_size: size,
            current_page_size: data.len(),
            total_pages: if more { q.page + 1 } else { q.page },
        },
        data,
        sort: q.sort.unwrap_or_else(|| "-created_at".into()),
        filter: echo(&q.conditions),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(query: &str) -> Result<Vec<Condition>, ApiError> {
        parse_query(Some(query)).map(|q| q.conditions)
    }

    #[test]
    fn brackets_and_json_say_the_same() {
        let a = conditions(
            "filter%5Bstatus%5D%5Bin%5D=active,error&filter[created_at][gte]=2026-01-01T00:00:00Z",
        )
        .unwrap();
        let b = conditions(
            "filter=%7B%22status%22%3A%7B%22%24in%22%3A%5B%22active%22%2C%22error%22%5D%7D%2C%22created_at%22%3A%7B%22%24gte%22%3A%222026-01-01T00%3A00%3A00Z%22%7D%7D",
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(
            echo(&a).unwrap(),
            json!({"status": {"$in": ["active", "error"]}, "created_at": {"$gte": "2026-01-01T00:00:00Z"}})
        );
        let f = job_filter("default", &a).unwrap().unwrap();
        assert_eq!(f.statuses, [JobStatus::Running, JobStatus::Failed]);
        assert!(f.created_from.is_some());
    }

    #[test]
    fn what_is_not_served_is_refused_by_name() {
        for (query, says) in [
            ("filter=status:%22completed%22", "text syntax"),
            ("filter[id]=x", "'id' is not served"),
            ("filter[status]=failed", "'failed' is not one of"),
            ("filter[name][in]=a,b", "does not take '$in'"),
            ("filter={\"$or\":[]}", "'$or' is not served"),
            ("filter[status", "expected filter[field]"),
            ("limit=3", "unknown query parameter 'limit'"),
            ("page=0", "whole number from 1"),
        ] {
            let e = conditions(query).unwrap_err();
            assert_eq!(e.code(), "invalid_request");
            assert!(e.to_string().contains(says), "{query}: {e}");
        }
    }

    #[test]
    fn a_status_and_its_negation_select_nothing() {
        let c = conditions("filter[status]=completed&filter[status][nin]=completed").unwrap();
        assert!(job_filter("default", &c).unwrap().is_none());
    }
}
