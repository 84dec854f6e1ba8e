//! `synthgate datasets upload|list|show|delete`: the caller's seed datasets on the server.
//!
//! As for the other subcommands, stdout carries only data (the id of an uploaded dataset, the
//! table, the details) and everything else goes to stderr; exit code 0 on success, 2 when a
//! request fails (the server's `error.code` and `error.message` are printed).

use std::path::PathBuf;
use std::process::ExitCode;

use reqwest::{Method, header};

use super::client::{Api, REQUEST_TIMEOUT, RequestError, ServerArgs, report};
use super::dataset_view::{self, DatasetPage, DatasetView};
use super::terminal::{note, say, say_raw};
use super::upload::{self, Outcome};

/// Arguments of `synthgate datasets`.
#[derive(Debug, Clone, clap::Args)]
pub struct DatasetsArgs {
    #[command(subcommand)]
    pub command: DatasetsCommand,
}

/// The `datasets` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum DatasetsCommand {
    /// Upload a CSV, JSONL or Parquet file (skipped when the server has the same name and
    /// content already); prints the dataset id.
    Upload(UploadArgs),
    /// List your datasets, newest first.
    List(ListArgs),
    /// Show a dataset: its columns and first rows.
    Show(IdArgs),
    /// Delete a dataset (refused while a queued or running job uses it).
    Delete(IdArgs),
}

/// File formats the server imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DatasetFormat {
    /// Comma-separated values with a header row.
    Csv,
    /// One JSON object per line.
    Jsonl,
    /// A Parquet file.
    Parquet,
}

impl DatasetFormat {
    /// The `format` query value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Jsonl => "jsonl",
            Self::Parquet => "parquet",
        }
    }
}

/// Arguments of `synthgate datasets upload`.
#[derive(Debug, Clone, clap::Args)]
pub struct UploadArgs {
    /// The file to upload.
    pub file: PathBuf,
    /// Dataset name, which a config's `seed_type: local` path is matched against (default:
    /// the file's name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The path job configs name the file by (`data/seed.csv`), recorded with it: a
    /// config's `local` seed path is then matched against this path, not only the name
    /// (`synthgate submit` records it by itself). It must end in the dataset's name.
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// File format (default: from the name's extension; `.json` is read as JSON lines).
    #[arg(long, value_enum)]
    pub format: Option<DatasetFormat>,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Arguments of `synthgate datasets list`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Only datasets with this exact name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Arguments of `synthgate datasets show` and `delete`.
#[derive(Debug, Clone, clap::Args)]
pub struct IdArgs {
    /// The dataset id.
    pub id: String,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Runs a `datasets` subcommand. Exit code 0 on success, 2 when a request fails.
pub async fn datasets(args: DatasetsArgs) -> anyhow::Result<ExitCode> {
    let outcome = match args.command {
        DatasetsCommand::Upload(a) => upload(a).await,
        DatasetsCommand::List(a) => list(a).await,
        DatasetsCommand::Show(a) => show(a).await,
        DatasetsCommand::Delete(a) => delete(a).await,
    };
    Ok(outcome.map_or_else(|e| report(&e), |()| ExitCode::SUCCESS))
}

async fn upload(args: UploadArgs) -> Result<(), RequestError> {
    let name = match args.name {
        Some(name) => name,
        None => args
            .file
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_owned)
            .ok_or_else(|| {
                RequestError::Local(format!(
                    "{}: no file name to name the dataset by; give --name",
                    args.file.display()
                ))
            })?,
    };
    let api = Api::new(&args.server)?;
    let format = args.format.map(DatasetFormat::as_str);
    let (dataset, outcome) =
        upload::ensure_uploaded(&api, &args.file, &name, args.path.as_deref(), format).await?;
    say!("{}", dataset.id);
    note!("{}", upload_line(&dataset, outcome));
    Ok(())
}

/// What `datasets upload` and `submit` say about a file they made sure the server has.
pub(crate) fn upload_line(dataset: &DatasetView, outcome: Outcome) -> String {
    let verb = match outcome {
        Outcome::Found => "is on the server already as",
        Outcome::Sent => "uploaded as",
    };
    format!(
        "{} {verb} dataset {} ({}): {}",
        dataset.name,
        dataset.id,
        dataset.summary(),
        dataset.columns_line()
    )
}

async fn list(args: ListArgs) -> Result<(), RequestError> {
    let api = Api::new(&args.server)?;
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query: Vec<(&str, &str)> = Vec::new();
        if let Some(name) = &args.name {
            query.push(("name", name));
        }
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor));
        }
        let request = api
            .request(Method::GET, &["v1", "datasets"])
            .query(&query)
            .header(header::ACCEPT, "application/json")
            .timeout(REQUEST_TIMEOUT);
        let page: DatasetPage = api.send(request).await?.json().await?;
        all.extend(page.datasets);
        // A cursor that does not move would loop forever.
        match page.next_cursor {
            Some(next) if cursor.as_deref() != Some(next.as_str()) => cursor = Some(next),
            _ => break,
        }
    }
    say_raw!("{}", dataset_view::table(&all));
    Ok(())
}

async fn show(args: IdArgs) -> Result<(), RequestError> {
    let api = Api::new(&args.server)?;
    let dataset: DatasetView = api.get_json(&["v1", "datasets", &args.id]).await?;
    say_raw!("{}", dataset_view::details(&dataset));
    Ok(())
}

async fn delete(args: IdArgs) -> Result<(), RequestError> {
    let api = Api::new(&args.server)?;
    let request = api
        .request(Method::DELETE, &["v1", "datasets", &args.id])
        .timeout(REQUEST_TIMEOUT);
    api.send(request).await?;
    note!("deleted dataset {}", args.id);
    Ok(())
}
