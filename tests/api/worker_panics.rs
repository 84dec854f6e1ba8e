//! The worker pool against a real SQLite database, with a chat model that panics: the pool and
//! the job service are built here by hand because a panicking model cannot be put behind the
//! service's HTTP client.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use synthgate::config::{LimitsConfig, WorkersConfig};
use synthgate::domain::models::ModelConfig;
use synthgate::domain::record::{RecordErrorCode, RecordStage};
use synthgate::domain::{JobStatus, RecordStatus};
use synthgate::jobs::{Catalog, JobService};
use synthgate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError};
use synthgate::queue::Database;
use synthgate::store::{CreateOutcome, DEFAULT_ACQUIRE_TIMEOUT, NewJob, RecordSelect};
use synthgate::tools::ToolHub;
use synthgate::worker::WorkerPool;

/// A model whose every call panics, as a bug anywhere under generation would.
struct PanickingModel;

#[async_trait::async_trait]
impl ChatModel for PanickingModel {
    async fn chat(
        &self,
        _model: &ModelConfig,
        _req: &ChatRequest,
        _cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        panic!("secret internal detail 0xdeadbeef");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_record_fails_and_frees_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Database> = synthgate::queue::open(
        None,
        &dir.path().join("t.db"),
        Some(4),
        DEFAULT_ACQUIRE_TIMEOUT,
    )
    .await
    .unwrap();
    let model: ModelConfig =
        serde_json::from_value(json!({"alias": "m", "model": "x", "provider": "p"})).unwrap();
    let catalog = Catalog::new(vec![model], vec!["p".into()], Vec::new(), Vec::new());
    let jobs = JobService::new(
        store.clone(),
        catalog,
        LimitsConfig::default(),
        Arc::new(PanickingModel),
        ToolHub::empty(),
    );
    let job = NewJob {
        config: json!({"columns": [
            {"name": "answer", "column_type": "llm-text", "model_alias": "m", "prompt": "Hi."}
        ]}),
        output_columns: vec!["answer".into()],
        // No early shutdown: every record fails, and the job must still complete.
        run_config: json!({}),
        ..crate::store::new_job(None, 3)
    };
    let CreateOutcome::Created(job) = store.create_job(&job).await.unwrap() else {
        panic!("job not created");
    };
    // One slot: a panicking record that kept its slot would stop the other two for good.
    let cfg = WorkersConfig {
        count: 1,
        max_in_flight: Some(1),
        poll_interval_ms: 20,
        write_interval_ms: 10,
        ..Default::default()
    };
    let pool = WorkerPool::new(store.clone(), jobs, cfg, "w".into());
    let shutdown = CancellationToken::new();
    let tasks = tokio_util::task::TaskTracker::new();
    let running = tasks.spawn(pool.run(shutdown.clone(), Duration::from_secs(5)));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let row = loop {
        let row = store.get_job(job.id, None).await.unwrap().unwrap();
        if row.status.is_terminal() {
            break row;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job still {:?}: a panicking record kept its lease",
            row.status
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(row.status, JobStatus::Completed);
    let records = store
        .list_records(job.id, None, RecordSelect::default(), 10)
        .await
        .unwrap();
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(r.status, RecordStatus::Failed, "{r:?}");
        let e = r.error.as_ref().unwrap();
        assert_eq!(e.code, RecordErrorCode::InternalError);
        assert_eq!(e.stage, Some(RecordStage::Worker));
        assert!(!e.message.contains("deadbeef"), "{}", e.message);
        assert_eq!(r.attempts, 1, "failed, not retried");
    }
    shutdown.cancel();
    running.await.unwrap();
}
