//! Job endpoints: create, list, get, cancel.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::dto::{
    CreateJobQuery, CreateJobRequest, JobConfigResponse, JobListResponse, JobResponse,
    ListJobsQuery,
};
use super::extract::{self, ApiPath, ApiQuery, BodyFormat};
use crate::auth::Caller;
use crate::domain::JobStatus;
use crate::domain::job::JobFilter;
use crate::error::{ApiError, ErrorBody};
use crate::jobs::{NumRecords, SubmitRequest};
use crate::state::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_job, list_jobs))
        .routes(routes!(get_job, delete_job))
        .routes(routes!(get_job_config))
        .routes(routes!(cancel_job))
}

/// Submit a generation job
///
/// The body is either JSON (`{"config", "num_records", "seed"?, "metadata"?, "run_config"?}`)
/// or a DataDesigner YAML config file (`Content-Type: application/yaml`) with `?num_records=`.
/// The config is validated fully before anything is stored. An `Idempotency-Key` header makes
/// retries safe: the same key and body return the original job with `200`.
#[utoipa::path(
    post, path = "/v1/jobs", tag = "jobs",
    params(
        CreateJobQuery,
        ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, description = "Makes retries of this request safe (1 to 255 ASCII characters)"),
    ),
    request_body(content(
        (CreateJobRequest = "application/json"),
        (Object = "application/yaml"),
    )),
    responses(
        (status = 202, description = "Accepted; records are queued", body = JobResponse),
        (status = 200, description = "Same Idempotency-Key and body as an earlier request: that job", body = JobResponse),
        (status = 400, description = "Malformed JSON or YAML (`invalid_json`, `invalid_yaml`), or an object with a key twice (`duplicate_key`)", body = ErrorBody),
        (status = 409, description = "Idempotency-Key reused for another request (`idempotency_key_reused`)", body = ErrorBody),
        (status = 403, description = "The API key may not use a model or tool alias the job names (`alias_not_allowed`)", body = ErrorBody),
        (status = 413, description = "Body too large (`payload_too_large`)", body = ErrorBody),
        (status = 415, description = "Unsupported Content-Type (`unsupported_media_type`)", body = ErrorBody),
        (status = 429, description = "The API key has `limits.max_jobs_in_flight_per_key` jobs queued or running (`too_many_jobs`)", body = ErrorBody),
        (status = 422, description = "Invalid request or config; the code names the problem (`num_records_out_of_range`, `unknown_column_type`, `dependency_cycle`, `unknown_reference`, `duplicate_tool_name`, `unknown_tool`, ...) and `details` lists every problem", body = ErrorBody),
        (status = 503, description = "The database, or an MCP provider whose tools the job's columns use, is unreachable (`service_unavailable`, `mcp_unavailable`); retry later", body = ErrorBody),
    )
)]
pub async fn create_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(query): ApiQuery<CreateJobQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<JobResponse>), ApiError> {
    let format = extract::body_format(&headers)?;
    let value = state
        .jobs
        .cpu()
        .run(|| extract::decode_body(format, &body))
        .await?;
    let idempotency_key = headers
        .get("idempotency-key")
        .map(|v| {
            v.to_str().map(str::to_owned).map_err(|_| {
                ApiError::InvalidRequest("header 'Idempotency-Key' must be ASCII".into())
            })
        })
        .transpose()?;
    if idempotency_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.len() > 255)
    {
        return Err(ApiError::InvalidRequest(
            "header 'Idempotency-Key' must be 1 to 255 characters".into(),
        ));
    }
    let mut req = submit_request(format, value, query)?;
    req.idempotency_key = idempotency_key;
    let (job, created) = state.jobs.submit(req, &caller).await?;
    let status = if created {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(job.into())))
}

/// A YAML body is a DataDesigner config file, unless it has the JSON request's shape.
pub(super) fn submit_request(
    format: BodyFormat,
    value: Value,
    query: CreateJobQuery,
) -> Result<SubmitRequest, ApiError> {
    let wrapped = value.get("config").is_some() && value.get("num_records").is_some();
    if format == BodyFormat::Json || wrapped {
        if query.num_records.is_some()
            || query.seed.is_some()
            || query.name.is_some()
            || query.cache.is_some()
        {
            return Err(ApiError::InvalidRequest(
                "query parameters 'num_records', 'seed', 'name' and 'cache' are only for YAML config bodies; put them in the JSON body".into(),
            ));
        }
        if !value.is_object() {
            return Err(ApiError::InvalidJson(
                "request body must be a JSON object".into(),
            ));
        }
        let body: CreateJobRequest = extract::from_value(value)?;
        let num_records = integer_num_records(&body.num_records)?;
        return Ok(SubmitRequest {
            config: body.config,
            num_records,
            seed: body.seed,
            metadata: body.metadata,
            run_config: body.run_config,
            idempotency_key: None,
            owner: None,
            name: body.name,
            cache: body.cache,
            max_cost: body.max_cost,
        });
    }
    let raw = query.num_records.ok_or_else(|| {
        ApiError::InvalidRequest(
            "query parameter 'num_records' is required when the body is a YAML config".into(),
        )
    })?;
    let num_records = match raw.trim().parse::<i64>() {
        Ok(n) => NumRecords::Count(n),
        // An integer beyond i64 is a range problem, not a syntax one.
        Err(_) if is_integer_literal(raw.trim()) => NumRecords::Beyond,
        Err(_) => {
            return Err(ApiError::InvalidRequest(format!(
                "query parameter 'num_records' must be an integer, got '{raw}'"
            )));
        }
    };
    Ok(SubmitRequest {
        config: value,
        num_records,
        seed: query.seed,
        metadata: None,
        run_config: None,
        idempotency_key: None,
        owner: None,
        name: query.name,
        cache: query.cache,
        max_cost: None,
    })
}

/// `num_records` from a JSON number: integers beyond i64 are reported as out of range, not
/// as malformed; fractions are rejected.
fn integer_num_records(n: &serde_json::Number) -> Result<NumRecords, ApiError> {
    if let Some(i) = n.as_i64() {
        return Ok(NumRecords::Count(i));
    }
    if n.as_u64().is_some() {
        return Ok(NumRecords::Beyond);
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 => Ok(NumRecords::Beyond),
        _ => Err(ApiError::InvalidRequest(format!(
            "field 'num_records': must be an integer, got {n}"
        ))),
    }
}

fn is_integer_literal(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// List jobs
///
/// Newest first, paginated with `cursor`; `status`, `name`, `metadata` and the creation times
/// filter on the server, and a cursor continues the listing it came from (pass the same
/// filters with it).
#[utoipa::path(
    get, path = "/v1/jobs", tag = "jobs",
    params(ListJobsQuery),
    responses(
        (status = 200, description = "A page of jobs", body = JobListResponse),
        (status = 400, description = "Bad cursor (`invalid_cursor`)", body = ErrorBody),
        (status = 422, description = "Bad query parameter (`invalid_request`)", body = ErrorBody),
    )
)]
pub async fn list_jobs(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListJobsQuery>,
) -> Result<Json<JobListResponse>, ApiError> {
    Ok(Json(jobs_page(&state, &caller, q).await?))
}

/// A page of the caller's jobs (`GET /v1/jobs` and the MCP tool `list_jobs`).
pub(super) async fn jobs_page(
    state: &AppState,
    caller: &Caller,
    q: ListJobsQuery,
) -> Result<JobListResponse, ApiError> {
    let limit = page_limit(q.limit, 20, state.config.limits.max_page_size)?;
    let before = match &q.cursor {
        Some(c) => Some(extract::decode_cursor("job", c)?.parse().map_err(|_| {
            ApiError::InvalidCursor(format!("'{c}' was not issued by this endpoint"))
        })?),
        None => None,
    };
    let filter = job_filter(&q)?;
    let page = state
        .jobs
        .jobs(caller.owner(), before, limit, &filter)
        .await?;
    let jobs: Vec<JobResponse> = page.items.into_iter().map(Into::into).collect();
    let next_cursor = page
        .more
        .then(|| {
            jobs.last()
                .map(|j| extract::encode_cursor("job", &j.id.to_string()))
        })
        .flatten();
    Ok(JobListResponse { jobs, next_cursor })
}

/// The filters of a job listing, each refused with a message naming its parameter.
fn job_filter(q: &ListJobsQuery) -> Result<JobFilter, ApiError> {
    let statuses = match q.status.as_deref() {
        None => Vec::new(),
        Some(raw) => raw
            .split(',')
            .map(str::trim)
            .map(|s| {
                JobStatus::parse(s).ok_or_else(|| {
                    ApiError::InvalidRequest(format!(
                        "query parameter 'status': '{s}' is not one of queued, running, \
                         cancelling, completed, failed, cancelled"
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let metadata = match q.metadata.as_deref() {
        None => Vec::new(),
        Some(raw) => metadata_filter(raw)?,
    };
    let time = |param: &str, raw: &Option<String>| {
        raw.as_deref()
            .map(|r| extract::parse_time(param, r))
            .transpose()
    };
    Ok(JobFilter {
        statuses,
        name: q.name.clone(),
        metadata,
        created_after: time("created_after", &q.created_after)?,
        created_before: time("created_before", &q.created_before)?,
        ..JobFilter::default()
    })
}

/// Start of the error a metadata filter naming a key twice gets.
const DUPLICATE_KEY: &str = "key named twice";

/// A JSON object's entries in order, refusing a key named twice: `serde_json`'s map keeps the
/// last silently, so `{"team":"a","team":"b"}` filtered on `b` alone.
struct UniqueKeys(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = UniqueKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<UniqueKeys, A::Error> {
                let mut out: Vec<(String, Value)> = Vec::new();
                let mut seen = std::collections::HashSet::new();
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    if !seen.insert(key.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "{DUPLICATE_KEY}: {key:?}"
                        )));
                    }
                    out.push((key, value));
                }
                Ok(UniqueKeys(out))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// The most keys a metadata filter may name.
const METADATA_FILTER_KEYS: usize = 16;

/// `metadata=`: a JSON object of top-level keys and scalar values. A key holding `"` or `\`
/// is refused, since SQLite's JSON path cannot name it.
fn metadata_filter(raw: &str) -> Result<Vec<(String, Value)>, ApiError> {
    let bad = |why: &str| ApiError::InvalidRequest(format!("query parameter 'metadata': {why}"));
    let map = match serde_json::from_str::<UniqueKeys>(raw) {
        Ok(UniqueKeys(map)) => map,
        Err(e) if e.to_string().starts_with(DUPLICATE_KEY) => {
            return Err(bad(&e.to_string()));
        }
        Err(_) => {
            return Err(bad(
                "expected a JSON object of keys and values, e.g. {\"team\":\"search\"}",
            ));
        }
    };
    if map.len() > METADATA_FILTER_KEYS {
        return Err(bad(&format!(
            "{} keys; at most {METADATA_FILTER_KEYS}",
            map.len()
        )));
    }
    map.into_iter()
        .map(|(key, value)| {
            if key.is_empty() || key.contains(['"', '\\']) || key.chars().any(char::is_control) {
                return Err(bad(&format!(
                    "key {key:?} cannot be matched (empty, or holds a quote, backslash or \
                     control character)"
                )));
            }
            match value {
                Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok((key, value)),
                _ => Err(bad(&format!(
                    "key '{key}': only a string, number or boolean value can be matched"
                ))),
            }
        })
        .collect()
}

/// Get a job
///
/// Status, record counts, the first errors and timestamps.
#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job", body = JobResponse),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
    )
)]
pub async fn get_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobResponse>, ApiError> {
    let id = extract::job_id(&id)?;
    let summary = state.jobs.summary(id, caller.owner()).await?;
    let providers = state.jobs.provider_states(&summary.job).await;
    let mut job = JobResponse::from(summary);
    job.providers = providers;
    Ok(Json(job))
}

/// Get a job's config
///
/// The DataDesigner config (the inner `data_designer` object) and run config the job was
/// submitted with, as stored: what the web UI shows, and what to resubmit to run it again.
#[utoipa::path(
    get, path = "/v1/jobs/{id}/config", tag = "jobs",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job's config", body = JobConfigResponse),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
    )
)]
pub async fn get_job_config(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobConfigResponse>, ApiError> {
    let id = extract::job_id(&id)?;
    let job = state.jobs.get(id, caller.owner()).await?;
    Ok(Json(JobConfigResponse {
        job_id: job.id,
        config: job.config,
        run_config: job.run_config,
    }))
}

/// Cancel a job
///
/// No further record is claimed and pending records count as `cancelled`; records in flight
/// finish. The job is `cancelling` until they have, then `cancelled`, or `completed` if the
/// cancel stopped nothing (every record was already in flight). A job that has finished, or
/// whose records have all finished, is not cancelled: `409 job_finished`, decided in the same
/// transaction as the cancel, so a cancel racing the last record gets one answer or the other.
#[utoipa::path(
    post, path = "/v1/jobs/{id}/cancel", tag = "jobs",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job after the request", body = JobResponse),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
        (status = 409, description = "The job, or every one of its records, already finished (`job_finished`)", body = ErrorBody),
    )
)]
pub async fn cancel_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobResponse>, ApiError> {
    let id = extract::job_id(&id)?;
    Ok(Json(state.jobs.cancel(id, caller.owner()).await?.into()))
}

/// Delete a job
///
/// Deletes a finished job (`completed`, `failed` or `cancelled`) with its records, traces,
/// images and usage, in one transaction. A job still queued, running or cancelling is left as
/// it is: `409 job_not_finished` (cancel it first).
#[utoipa::path(
    delete, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = uuid::Uuid, Path, description = "Job id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Not a UUID (`invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such job (`job_not_found`)", body = ErrorBody),
        (status = 409, description = "The job has not finished (`job_not_finished`)", body = ErrorBody),
    )
)]
pub async fn delete_job(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<axum::http::StatusCode, ApiError> {
    let id = extract::job_id(&id)?;
    state.jobs.delete(id, caller.owner()).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// Validates `?limit=`.
pub(super) fn page_limit(limit: Option<u32>, default: u32, max: u32) -> Result<u32, ApiError> {
    match limit {
        None => Ok(default.min(max)),
        Some(0) => Err(ApiError::InvalidRequest(
            "query parameter 'limit' must be at least 1".into(),
        )),
        Some(n) if n > max => Err(ApiError::InvalidRequest(format!(
            "query parameter 'limit' must be at most {max}"
        ))),
        Some(n) => Ok(n),
    }
}
