//! The tools: one per API operation, each calling what its REST handler calls.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::SynthgateMcp;
use super::params::{DatasetIdArgs, JobIdArgs, RecordIdArgs, RecordsArgs, TraceArgs, WaitJobArgs};
use super::progress::{self, Reporter};
use crate::api::datasets::{ListDatasetsQuery, dataset_detail, dataset_id, datasets_page};
use crate::api::dto::{
    CreateJobQuery, CreateJobRequest, JobConfigResponse, JobResponse, ListJobsQuery, RecordResponse,
};
use crate::api::extract::{self, BodyFormat};
use crate::api::jobs::{jobs_page, submit_request};
use crate::api::models::models_for;
use crate::api::preview::preview_response;
use crate::api::records::{record_traces, records_page};
use crate::api::tools::tools_for;
use crate::error::ApiError;
use crate::jobs::SubmitRequest;

/// Each tool's result type, by its OpenAPI component name (see `schemas`).
pub(super) const OUTPUTS: &[(&str, &str)] = &[
    ("preview_dataset", "PreviewResponse"),
    ("submit_job", "JobResponse"),
    ("get_job", "JobResponse"),
    ("wait_job", "JobResponse"),
    ("get_job_config", "JobConfigResponse"),
    ("list_jobs", "JobListResponse"),
    ("cancel_job", "JobResponse"),
    ("get_records", "RecordListResponse"),
    ("get_record", "RecordResponse"),
    ("get_record_trace", "TraceResponse"),
    ("list_models", "ModelsResponse"),
    ("list_tools", "ToolsResponse"),
    ("list_datasets", "DatasetListResponse"),
    ("get_dataset", "DatasetDetailResponse"),
];

/// `wait_job` waits this long unless told otherwise, and at most [`MAX_WAIT`].
const DEFAULT_WAIT: Duration = Duration::from_secs(60);
const MAX_WAIT: Duration = Duration::from_secs(600);

/// A tool's argument schema. Panics on a type whose schema is not an object: a bug that the
/// tool-listing tests catch, not an input.
fn input<T: JsonSchema + Any>() -> Arc<JsonObject> {
    schema_for_input::<T>().unwrap_or_else(|e| panic!("argument schema: {e}"))
}

/// Parses a tool's arguments as the REST API parses a body: a mismatch is `invalid_request`
/// naming the field, a tool error the model can correct.
fn parse<T: DeserializeOwned>(args: JsonObject) -> Result<T, ApiError> {
    extract::from_value(Value::Object(args))
}

/// Preview and submit read their arguments exactly as `POST /v1/jobs` reads a JSON body.
fn submit_args(args: JsonObject) -> Result<SubmitRequest, ApiError> {
    let no_query = CreateJobQuery {
        num_records: None,
        seed: None,
        name: None,
        cache: None,
    };
    submit_request(BodyFormat::Json, Value::Object(args), no_query)
}

#[tool_router(vis = "pub(super)")]
impl SynthgateMcp {
    #[tool(
        description = "Generate up to 10 records of a NeMo DataDesigner config now, LLM columns \
            included, and return them with the message traces of their LLM columns. Nothing is \
            stored: use it to try a config before submit_job. Same arguments as submit_job \
            (`num_records` at most 10). Reports progress per record when asked.",
        input_schema = input::<CreateJobRequest>()
    )]
    async fn preview_dataset(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let reporter = Reporter::for_request(&ctx);
        self.answer(
            "preview_dataset",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let req = submit_args(args)?;
                let (tx, rx) = tokio::sync::watch::channel((0, 0));
                let on_record = move |done, total| {
                    tx.send_replace((done, total));
                };
                let work = self.state.jobs.preview_reporting(req, &caller, &on_record);
                let preview = progress::records(reporter.as_ref(), work, rx).await?;
                Ok(preview_response(preview))
            },
        )
        .await
    }

    #[tool(
        description = "Submit a generation job: a NeMo DataDesigner config (the object \
            `builder.write_config` writes, or its inner `data_designer` object) and a record \
            count. The config is validated fully first; invalid configs get a tool error naming \
            the column and field. Returns the queued job; follow it with wait_job or get_job.",
        input_schema = input::<CreateJobRequest>()
    )]
    async fn submit_job(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "submit_job",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let (job, _) = self.state.jobs.submit(submit_args(args)?, &caller).await?;
                Ok(JobResponse::from(job))
            },
        )
        .await
    }

    #[tool(
        description = "A job: status (queued, running, completed, failed, cancelling, \
            cancelled), record counts, the first errors, token and tool-call usage, timestamps.",
        input_schema = input::<JobIdArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_job(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "get_job",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let id = extract::job_id(&parse::<JobIdArgs>(args)?.job_id)?;
                Ok(JobResponse::from(
                    self.state.jobs.summary(id, caller.owner()).await?,
                ))
            },
        )
        .await
    }

    #[tool(
        description = "Wait until a job finishes (completed, failed or cancelled) or \
            `timeout_sec` passes, then return it as get_job does. Reports progress (records \
            finished of the total) while waiting when asked.",
        input_schema = input::<WaitJobArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn wait_job(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let reporter = Reporter::for_request(&ctx);
        // The wait has its own bound; the last read after it gets the usual deadline.
        let limit = MAX_WAIT + self.request_timeout();
        self.answer("wait_job", &ctx, limit, |caller| async move {
            let a: WaitJobArgs = parse(args)?;
            let id = extract::job_id(&a.job_id)?;
            let wait = match a.timeout_sec {
                None => DEFAULT_WAIT,
                Some(s) if (1..=MAX_WAIT.as_secs()).contains(&s) => Duration::from_secs(s),
                Some(_) => {
                    return Err(ApiError::InvalidRequest(format!(
                        "field 'timeout_sec': must be between 1 and {}",
                        MAX_WAIT.as_secs()
                    )));
                }
            };
            let job = progress::wait_job(
                &self.state.jobs,
                id,
                caller.owner(),
                wait,
                &self.state.shutdown,
                reporter.as_ref(),
            );
            Ok(JobResponse::from(job.await?))
        })
        .await
    }

    #[tool(
        description = "The DataDesigner config and run config a job was submitted with, as \
            stored: what to change and resubmit to run it again.",
        input_schema = input::<JobIdArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_job_config(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "get_job_config",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let id = extract::job_id(&parse::<JobIdArgs>(args)?.job_id)?;
                let job = self.state.jobs.get(id, caller.owner()).await?;
                Ok(JobConfigResponse {
                    job_id: job.id,
                    config: job.config,
                    run_config: job.run_config,
                })
            },
        )
        .await
    }

    #[tool(
        description = "The caller's jobs, newest first, a page at a time (pass `next_cursor` \
            back as `cursor`).",
        input_schema = input::<ListJobsQuery>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_jobs(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "list_jobs",
            &ctx,
            self.request_timeout(),
            |caller| async move { jobs_page(&self.state, &caller, parse(args)?).await },
        )
        .await
    }

    #[tool(
        description = "Cancel a job: no further record starts; records in flight finish. A job \
            that already finished gets the error `job_finished`.",
        input_schema = input::<JobIdArgs>(),
        annotations(destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn cancel_job(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "cancel_job",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let id = extract::job_id(&parse::<JobIdArgs>(args)?.job_id)?;
                Ok(JobResponse::from(
                    self.state.jobs.cancel(id, caller.owner()).await?,
                ))
            },
        )
        .await
    }

    #[tool(
        description = "A page of a job's records by index: id, status, column values, error. \
            A record is listed once it has a result (completed or failed). Pass `next_cursor` \
            back as `cursor` for the next page.",
        input_schema = input::<RecordsArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_records(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "get_records",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let a: RecordsArgs = parse(args)?;
                let id = extract::job_id(&a.job_id)?;
                let which = crate::jobs::RecordsOf {
                    status: a.status.map(Into::into),
                    selection: None,
                };
                let traces = a.include_traces == Some(true);
                records_page(&self.state, &caller, id, a.cursor, a.limit, which, traces).await
            },
        )
        .await
    }

    #[tool(
        description = "One record: its values, status, attempts, and error if it failed.",
        input_schema = input::<RecordIdArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_record(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "get_record",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let id = extract::record_id(&parse::<RecordIdArgs>(args)?.record_id)?;
                Ok(RecordResponse::from(
                    self.state.jobs.record(id, caller.owner()).await?,
                ))
            },
        )
        .await
    }

    #[tool(
        description = "The message traces of a record's LLM columns (system, user, assistant \
            with tool calls, tool results), for columns with `with_trace`; `column` selects one.",
        input_schema = input::<TraceArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_record_trace(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "get_record_trace",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let a: TraceArgs = parse(args)?;
                let id = extract::record_id(&a.record_id)?;
                record_traces(&self.state, &caller, id, a.column.as_deref()).await
            },
        )
        .await
    }

    #[tool(
        description = "The server's model aliases this key may use in `model_alias`, with \
            provider, model id, generation type, limits and the tool aliases a chat model can \
            use.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_models(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "list_models",
            &ctx,
            self.request_timeout(),
            |caller| async move { Ok(models_for(&self.state.config, &caller)) },
        )
        .await
    }

    #[tool(
        description = "The server's tool aliases this key may use in `tool_alias`, with the \
            tools each offers (name, description, argument schema), and the MCP providers' \
            connection state.",
        annotations(read_only_hint = true)
    )]
    async fn list_tools(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "list_tools",
            &ctx,
            self.request_timeout(),
            |caller| async move { Ok(tools_for(&self.state, &caller).await) },
        )
        .await
    }

    #[tool(
        description = "The caller's uploaded seed datasets, newest first (a config's \
            `seed_type: local` path names one by file name).",
        input_schema = input::<ListDatasetsQuery>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_datasets(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "list_datasets",
            &ctx,
            self.request_timeout(),
            |caller| async move { datasets_page(&self.state, &caller, parse(args)?).await },
        )
        .await
    }

    #[tool(
        description = "A seed dataset: its columns with their types, size, hash, and its first \
            10 rows.",
        input_schema = input::<DatasetIdArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_dataset(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.answer(
            "get_dataset",
            &ctx,
            self.request_timeout(),
            |caller| async move {
                let id = dataset_id(&parse::<DatasetIdArgs>(args)?.dataset_id)?;
                dataset_detail(&self.state, &caller, id).await
            },
        )
        .await
    }
}
