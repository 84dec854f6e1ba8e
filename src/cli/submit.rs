//! `synthgate submit CONFIG`: uploads the local seed files the config names when the server
//! lacks them, sends the config (unchanged) as a new job, prints its id, and with `--wait`
//! follows it to the end with a progress bar.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use reqwest::{Method, header};
use serde_json::json;

use super::client::{Api, REQUEST_TIMEOUT, RequestError, ServerArgs, report};
use super::datasets::upload_line;
use super::events::JobView;
use super::rollout_seed;
use super::seed_files::{self, LocalSeed};
use super::terminal::{note, say};
use super::{upload, wait};

/// Arguments of `synthgate submit`.
#[derive(Debug, Clone, clap::Args)]
pub struct SubmitArgs {
    /// DataDesigner config: `.yaml`/`.yml` (sent as is) or `.json` (wrapped in a job request).
    pub config: PathBuf,
    /// Number of records to generate.
    #[arg(short = 'n', long = "num-records", value_name = "N")]
    pub num_records: Option<u64>,
    /// Seed for the job's samplers; the same seed reproduces the same sampled values.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// A name to find the job by later (`synthgate jobs list --name`).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The response cache of the key for the job's model calls: `off`, `read_write` (answer
    /// from it, cache the rest) or `refresh`. Default: the server's.
    #[arg(long, value_name = "MODE", value_parser = ["off", "read_write", "refresh"])]
    pub cache: Option<String>,
    /// Follow the job with a progress bar until it finishes; exit 0 only if it completed
    /// with at least one record that did not fail.
    #[arg(long)]
    pub wait: bool,
    /// Do not upload the config's local seed files (`seed_type: local`); the server must
    /// have them already.
    #[arg(long)]
    pub no_upload: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Submits the job. Prints the job id alone on stdout, everything else on stderr.
///
/// Exit code: 0 once accepted (with `--wait`: once it completed), 1 when a waited-for job ends
/// `failed` or `cancelled`, 2 when the request fails or the config file cannot be used.
pub async fn submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    Ok(run(args).await.unwrap_or_else(|e| report(&e)))
}

async fn run(args: SubmitArgs) -> Result<ExitCode, RequestError> {
    let contents = tokio::fs::read(&args.config)
        .await
        .map_err(|e| RequestError::Local(format!("cannot read {}: {e}", args.config.display())))?;
    let config = config_value(&args.config, &contents);
    let options = JobOptions {
        num_records: args.num_records,
        seed: args.seed,
        name: args.name.clone(),
        cache: args.cache.clone(),
    };
    let request = build_job_request(&args.config, contents, options)?;
    let api = Api::new(&args.server)?;
    if !args.no_upload
        && let Some(config) = &config
    {
        upload_seed_files(&api, config).await?;
    }

    let http = api
        .request(Method::POST, &["v1", "jobs"])
        .query(&request.query)
        .header(header::CONTENT_TYPE, request.content_type)
        .header(header::ACCEPT, "application/json")
        .body(request.body)
        .timeout(REQUEST_TIMEOUT);
    let job: JobView = api.send(http).await?.json().await?;

    // Only the id goes to stdout, so `id=$(synthgate submit ...)` works.
    say!("{}", job.id);
    note!(
        "submitted job {} ({} records, {})",
        job.id,
        job.num_records.unwrap_or(job.counts.total),
        job.status
    );
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }

    wait::wait_and_report(&api, &job).await
}

/// The config as JSON, to look for seed files in; `None` when it does not parse (the server
/// then says what is wrong with it).
fn config_value(path: &Path, contents: &[u8]) -> Option<serde_json::Value> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    match extension.as_str() {
        "yaml" | "yml" => yaml_serde::from_slice(contents).ok(),
        "json" => serde_json::from_slice(contents).ok(),
        _ => None,
    }
}

/// Makes sure the server has every local file the config's seed names. A path that matches
/// nothing here is not an error: the server may have the file already, or find it in an
/// allow-listed directory, and answers `seed_dataset_not_found` if not.
async fn upload_seed_files(api: &Api, config: &serde_json::Value) -> Result<(), RequestError> {
    let cwd = std::env::current_dir()
        .map_err(|e| RequestError::Local(format!("cannot read the current directory: {e}")))?;
    let home = std::env::home_dir();
    match rollout_seed::find(config, &cwd, home.as_deref()) {
        None => {}
        Some(Err(why)) => note!(
            "agent rollout seed: {why}; nothing uploaded, the server will look for an earlier \
             upload"
        ),
        Some(Ok(seed)) => {
            let dataset = rollout_seed::upload(api, &seed).await?;
            note!(
                "{} trajectories in {} stored as dataset {} ({} rows)",
                seed.format.name(),
                seed.folder.display(),
                dataset.id,
                dataset.num_rows
            );
        }
    }
    match seed_files::find_local_seed(config, &cwd, home.as_deref()) {
        LocalSeed::None => {}
        LocalSeed::Missing { path } => note!(
            "seed file {path} is not here to upload; the server will look for it among your \
             datasets"
        ),
        LocalSeed::Files { files, .. } => {
            for file in files {
                let (dataset, outcome) = upload::ensure_uploaded(
                    api,
                    &file.path,
                    &file.name,
                    Some(&file.upload_path),
                    None,
                )
                .await?;
                note!("{}", upload_line(&dataset, outcome));
            }
        }
    }
    Ok(())
}

/// The body, content type and query string of `POST /v1/jobs` for one config file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobRequest {
    pub content_type: &'static str,
    pub query: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// What a job is asked for besides its config.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JobOptions {
    pub num_records: Option<u64>,
    pub seed: Option<u64>,
    pub name: Option<String>,
    pub cache: Option<String>,
}

/// YAML is posted as is, with the record count, seed and name in the query string; JSON is
/// wrapped as `{"config": ..., "num_records": N, "seed": S, "name": ...}`. Other extensions
/// are refused.
pub(crate) fn build_job_request(
    path: &Path,
    contents: Vec<u8>,
    options: JobOptions,
) -> Result<JobRequest, RequestError> {
    let JobOptions {
        num_records,
        seed,
        name,
        cache,
    } = options;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("yaml" | "yml") => {
            let mut query = Vec::new();
            if let Some(n) = num_records {
                query.push(("num_records", n.to_string()));
            }
            if let Some(s) = seed {
                query.push(("seed", s.to_string()));
            }
            if let Some(name) = name {
                query.push(("name", name));
            }
            if let Some(cache) = cache {
                query.push(("cache", cache));
            }
            Ok(JobRequest {
                content_type: "application/yaml",
                query,
                body: contents,
            })
        }
        Some("json") => {
            let config: serde_json::Value = serde_json::from_slice(&contents).map_err(|e| {
                RequestError::Local(format!("{} is not valid JSON: {e}", path.display()))
            })?;
            let mut body = json!({ "config": config });
            if let Some(n) = num_records {
                body["num_records"] = json!(n);
            }
            if let Some(s) = seed {
                body["seed"] = json!(s);
            }
            if let Some(name) = name {
                body["name"] = json!(name);
            }
            if let Some(cache) = cache {
                body["cache"] = json!(cache);
            }
            Ok(JobRequest {
                content_type: "application/json",
                query: Vec::new(),
                body: serde_json::to_vec(&body).expect("a JSON value always serializes"),
            })
        }
        _ => Err(RequestError::Local(format!(
            "{}: unsupported file type; use .yaml, .yml or .json",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &[u8] = b"data_designer:\n  columns: []\n";

    #[test]
    fn yaml_is_sent_as_is_with_query_parameters() {
        let req = build_job_request(
            Path::new("cfg.yaml"),
            YAML.to_vec(),
            JobOptions {
                num_records: Some(100),
                seed: Some(7),
                name: None,
                cache: None,
            },
        )
        .unwrap();
        assert_eq!(req.content_type, "application/yaml");
        assert_eq!(req.body, YAML);
        assert_eq!(
            req.query,
            vec![("num_records", "100".to_owned()), ("seed", "7".to_owned())]
        );
        let req = build_job_request(
            Path::new("dir/CFG.YML"),
            YAML.to_vec(),
            JobOptions {
                num_records: Some(5),
                ..JobOptions::default()
            },
        )
        .unwrap();
        assert_eq!(req.query, vec![("num_records", "5".to_owned())]);
    }

    #[test]
    fn json_is_wrapped_in_a_job_request() {
        let file = br#"{"data_designer": {"columns": []}, "library_version": "0.9.7"}"#;
        let req = build_job_request(
            Path::new("cfg.json"),
            file.to_vec(),
            JobOptions {
                num_records: Some(10),
                seed: Some(3),
                name: Some("n".into()),
                cache: Some("read_write".into()),
            },
        )
        .unwrap();
        assert_eq!(req.content_type, "application/json");
        assert!(req.query.is_empty());
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(
            body,
            json!({
                "config": {"data_designer": {"columns": []}, "library_version": "0.9.7"},
                "num_records": 10,
                "seed": 3,
                "name": "n",
                "cache": "read_write",
            })
        );
        let req = build_job_request(
            Path::new("cfg.json"),
            b"{}".to_vec(),
            JobOptions {
                num_records: Some(1),
                ..JobOptions::default()
            },
        )
        .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(body, json!({"config": {}, "num_records": 1}));
    }

    #[test]
    fn a_name_goes_where_the_count_goes() {
        let named = || JobOptions {
            num_records: Some(2),
            name: Some("nightly run".into()),
            ..JobOptions::default()
        };
        let req = build_job_request(Path::new("cfg.yaml"), YAML.to_vec(), named()).unwrap();
        assert_eq!(
            req.query,
            vec![
                ("num_records", "2".to_owned()),
                ("name", "nightly run".to_owned())
            ]
        );
        let req = build_job_request(Path::new("cfg.json"), b"{}".to_vec(), named()).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(
            body,
            json!({"config": {}, "num_records": 2, "name": "nightly run"})
        );
    }

    #[test]
    fn bad_files_are_refused_locally() {
        let err = build_job_request(
            Path::new("cfg.json"),
            b"{oops".to_vec(),
            JobOptions {
                num_records: Some(1),
                ..JobOptions::default()
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        for name in ["cfg.toml", "cfg"] {
            let err = build_job_request(Path::new(name), YAML.to_vec(), JobOptions::default())
                .unwrap_err();
            assert!(err.to_string().contains("unsupported file type"), "{err}");
        }
    }
}
