//! `synthgate records JOB_ID`: streams a job's dataset as JSONL, CSV or Parquet to stdout or a file,
//! chunk by chunk, so a dataset of any size passes through in constant memory.
//!
//! A download to a file goes through `FILE.part`. When the server gave the export an `ETag`
//! (the job had finished), it is kept beside the part as `FILE.part.etag`, and a download that
//! broke off resumes: the same command asks for the rest (`Range` from the part's length,
//! `If-Range` with the ETag), and the server sends the rest, or all of it if the export is no
//! longer the one the part holds.

use std::ffi::OsString;
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use futures::StreamExt;
use reqwest::{Method, Response, header};
use tokio::io::AsyncWriteExt;

use super::client::{Api, RequestError, ServerArgs, report};
use super::terminal::note;

/// Dataset formats the server streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordsFormat {
    /// One JSON object per line.
    Jsonl,
    /// Comma-separated values with a header row.
    Csv,
    /// A Parquet file (binary: give `-o FILE` or redirect stdout).
    Parquet,
}

impl RecordsFormat {
    /// The `format` query value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Jsonl => "jsonl",
            Self::Csv => "csv",
            Self::Parquet => "parquet",
        }
    }
}

/// Which records `synthgate records` downloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordsStatus {
    /// The dataset: completed records' values.
    Completed,
    /// The error file: failed records.
    Failed,
}

/// Arguments of `synthgate records`.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordsArgs {
    /// Id of the job whose records to download.
    pub job_id: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = RecordsFormat::Jsonl)]
    pub format: RecordsFormat,
    /// Write to this file instead of stdout (through `FILE.part`, renamed when complete).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Add each LLM column's message trace as `{column}__trace`.
    #[arg(long)]
    pub include_traces: bool,
    /// `completed` (the dataset, the default) or `failed`: the error file, one JSON line per
    /// failed record with its error and the values it had (JSONL only).
    #[arg(long, value_enum, default_value_t = RecordsStatus::Completed)]
    pub status: RecordsStatus,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Downloads the dataset. Exit code 0 when all of it was written, 2 otherwise.
pub async fn records(args: RecordsArgs) -> anyhow::Result<ExitCode> {
    Ok(run(args).await.unwrap_or_else(|e| report(&e)))
}

async fn run(args: RecordsArgs) -> Result<ExitCode, RequestError> {
    if args.format == RecordsFormat::Parquet
        && args.output.is_none()
        && std::io::IsTerminal::is_terminal(&std::io::stdout())
    {
        return Err(RequestError::Local(
            "a Parquet file is binary: give -o FILE or redirect stdout".into(),
        ));
    }
    let api = Api::new(&args.server)?;
    let query = records_query(&args);
    let request = || {
        api.request(Method::GET, &["v1", "jobs", &args.job_id, "records"])
            .query(&query)
    };

    match &args.output {
        Some(path) => {
            let part = part_path(path);
            let resume = resume_point(&part).await;
            let response = match &resume {
                None => api.send(request()).await?,
                Some((from, etag)) => {
                    let ranged = request()
                        .header(header::RANGE, format!("bytes={from}-"))
                        .header(header::IF_RANGE, etag.as_str());
                    match api.send(ranged).await {
                        // The part is longer than the export: it is not this export's start.
                        Err(RequestError::Server(e)) if e.status == 416 => {
                            api.send(request()).await?
                        }
                        other => other?,
                    }
                }
            };
            let from = match (&resume, response.status().as_u16()) {
                (Some((from, _)), 206) => {
                    note!("resuming {} at byte {from}", path.display());
                    Some(*from)
                }
                _ => None,
            };
            let bytes = write_file(response, path, from).await?;
            note!("wrote {bytes} bytes to {}", path.display());
        }
        None => match copy_body(
            api.send(request()).await?,
            &mut Sink::Stdout {
                terminal: std::io::IsTerminal::is_terminal(&std::io::stdout()),
                split: Vec::new(),
            },
        )
        .await
        {
            Ok(_) => {}
            // The reader went away (`| head`): it has what it wanted.
            Err(CopyError::Write(e)) if e.kind() == ErrorKind::BrokenPipe => {}
            Err(e) => return Err(e.into_request_error("stdout")),
        },
    }
    Ok(ExitCode::SUCCESS)
}

/// The query of the download: format, and the traces and error file when asked for.
fn records_query(args: &RecordsArgs) -> Vec<(&'static str, &'static str)> {
    let mut query = vec![("format", args.format.as_str())];
    if args.include_traces {
        query.push(("include_traces", "true"));
    }
    if args.status == RecordsStatus::Failed {
        query.push(("status", "failed"));
    }
    query
}

/// Where a broken-off download to `part` resumes: its length and the ETag it was written under
/// (`None`: nothing to resume).
async fn resume_point(part: &Path) -> Option<(u64, String)> {
    let etag = tokio::fs::read_to_string(etag_path(part)).await.ok()?;
    let len = tokio::fs::metadata(part).await.ok()?.len();
    let etag = etag.trim().to_owned();
    (len > 0 && !etag.is_empty()).then_some((len, etag))
}

/// Writes the body to `path` through a sibling `.part` file, so an interrupted download never
/// leaves a truncated file under the final name. `from`: the body is the rest of the part,
/// from that byte (a `206`); otherwise the part is written anew. An interrupted download
/// whose export has an ETag keeps its part, to resume.
async fn write_file(
    response: Response,
    path: &Path,
    from: Option<u64>,
) -> Result<u64, RequestError> {
    let part = part_path(path);
    let tag = etag_path(&part);
    let local = |e: std::io::Error| RequestError::Local(format!("{}: {e}", part.display()));
    // The whole export's length a `206` names (`bytes FROM-LAST/TOTAL`): what the file must
    // come to once the rest is appended.
    let mut complete_len = None;
    if let Some(from) = from {
        let range = response
            .headers()
            .get(header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let starts = range.starts_with(&format!("bytes {from}-"));
        complete_len = range
            .rsplit_once('/')
            .and_then(|(_, total)| total.parse::<u64>().ok());
        if !starts {
            return Err(RequestError::Local(format!(
                "the server resumed {} somewhere other than byte {from}; remove {} and download again",
                path.display(),
                part.display()
            )));
        }
    }
    let etag = response
        .headers()
        .get(header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let file = match from {
        Some(_) => tokio::fs::OpenOptions::new().append(true).open(&part).await,
        None => tokio::fs::File::create(&part).await,
    }
    .map_err(local)?;
    match &etag {
        Some(etag) => tokio::fs::write(&tag, etag).await.map_err(local)?,
        None => {
            let _ = tokio::fs::remove_file(&tag).await;
        }
    }
    let mut sink = Sink::File(file);
    let copied = copy_body(response, &mut sink).await;
    let finished = match (copied, sink) {
        // A resumed download must end where the server said the export ends; a short answer
        // would otherwise be renamed into place as if it were whole.
        (Ok(bytes), _) if complete_len.is_some_and(|total| from.unwrap_or(0) + bytes != total) => {
            Err(RequestError::Local(format!(
                "the server's ranged answer ended at byte {} of {}; run the same command again",
                from.unwrap_or(0) + bytes,
                complete_len.unwrap_or(0)
            )))
        }
        (Ok(bytes), Sink::File(file)) => file.sync_all().await.map(|()| bytes).map_err(local),
        (Ok(bytes), Sink::Stdout { .. }) => Ok(bytes),
        (Err(e), _) => Err(e.into_request_error(&part.display().to_string())),
    };
    match finished {
        Ok(bytes) => {
            tokio::fs::rename(&part, path)
                .await
                .map_err(|e| RequestError::Local(format!("{}: {e}", path.display())))?;
            let _ = tokio::fs::remove_file(&tag).await;
            Ok(bytes + from.unwrap_or(0))
        }
        Err(e) if etag.is_some() => {
            note!(
                "the download broke off; {} is kept: run the same command again to resume",
                part.display()
            );
            Err(e)
        }
        Err(e) => {
            let _ = tokio::fs::remove_file(&part).await;
            Err(e)
        }
    }
}

/// `data.jsonl.part` → `data.jsonl.part.etag`: the ETag the part was written under.
fn etag_path(part: &Path) -> PathBuf {
    let mut name: OsString = part.as_os_str().to_owned();
    name.push(".etag");
    PathBuf::from(name)
}

/// `data.jsonl` → `data.jsonl.part`.
fn part_path(path: &Path) -> PathBuf {
    let mut name: OsString = path.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

/// Where copying a body failed: reading from the server or writing locally.
#[derive(Debug)]
enum CopyError {
    Read(reqwest::Error),
    /// No byte arrived for [`READ_IDLE`].
    Stalled,
    Write(std::io::Error),
}

/// How long a download may go without a byte before it is given up (the server sends export
/// bytes as it reads them; a stall this long is a dead connection or server).
const READ_IDLE: std::time::Duration = std::time::Duration::from_secs(120);

impl CopyError {
    fn into_request_error(self, target: &str) -> RequestError {
        match self {
            Self::Read(e) => RequestError::Transport(e),
            Self::Stalled => RequestError::Local(format!(
                "no byte arrived for {} s while writing {target}; run the same command again",
                READ_IDLE.as_secs()
            )),
            Self::Write(e) => RequestError::Local(format!("writing {target}: {e}")),
        }
    }
}

/// Where the records go.
enum Sink {
    File(tokio::fs::File),
    /// Written with blocking calls, as CLIs do: this download is the only work in flight, and
    /// tokio's async stdout would need another tokio feature for no gain. On a terminal the
    /// text passes `terminal::safe` (a record's values are the server's, or a model's, text),
    /// holding back a character split between two chunks; redirected, it goes as it came.
    Stdout {
        terminal: bool,
        split: Vec<u8>,
    },
}

impl Sink {
    async fn write_chunk(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        match self {
            Self::File(file) => file.write_all(chunk).await,
            Self::Stdout { terminal, split } => {
                let mut out = std::io::stdout().lock();
                if *terminal {
                    split.extend_from_slice(chunk);
                    let whole = match std::str::from_utf8(split) {
                        Ok(_) => split.len(),
                        // A character cut at the chunk's end waits for the next chunk.
                        Err(e) if e.error_len().is_none() => e.valid_up_to(),
                        Err(_) => split.len(),
                    };
                    let text = String::from_utf8_lossy(&split[..whole]);
                    out.write_all(super::terminal::safe(&text).as_bytes())?;
                    split.drain(..whole);
                } else {
                    out.write_all(chunk)?;
                }
                out.flush()
            }
        }
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::File(file) => file.flush().await,
            Self::Stdout { split, .. } => {
                let mut out = std::io::stdout().lock();
                out.write_all(&std::mem::take(split))?;
                out.flush()
            }
        }
    }
}

/// Copies the body chunk by chunk as it arrives; returns the byte count.
async fn copy_body(response: Response, out: &mut Sink) -> Result<u64, CopyError> {
    let mut body = response.bytes_stream();
    let mut bytes = 0u64;
    loop {
        let Some(chunk) = tokio::time::timeout(READ_IDLE, body.next())
            .await
            .map_err(|_| CopyError::Stalled)?
        else {
            break;
        };
        let chunk = chunk.map_err(CopyError::Read)?;
        out.write_chunk(&chunk).await.map_err(CopyError::Write)?;
        bytes += chunk.len() as u64;
    }
    out.flush().await.map_err(CopyError::Write)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_file_sits_beside_the_target() {
        assert_eq!(
            part_path(Path::new("out/data.jsonl")),
            PathBuf::from("out/data.jsonl.part")
        );
        assert_eq!(part_path(Path::new("data")), PathBuf::from("data.part"));
    }

    #[test]
    fn traces_and_the_error_file_are_asked_for_in_the_query() {
        let mut args = RecordsArgs {
            job_id: "j".into(),
            format: RecordsFormat::Jsonl,
            output: None,
            include_traces: false,
            status: RecordsStatus::Completed,
            server: ServerArgs {
                url: "http://x".into(),
                api_key: None,
            },
        };
        assert_eq!(records_query(&args), [("format", "jsonl")]);
        args.include_traces = true;
        args.status = RecordsStatus::Failed;
        assert_eq!(
            records_query(&args),
            [
                ("format", "jsonl"),
                ("include_traces", "true"),
                ("status", "failed")
            ]
        );
    }

    #[test]
    fn formats_match_the_query_values() {
        assert_eq!(RecordsFormat::Jsonl.as_str(), "jsonl");
        assert_eq!(RecordsFormat::Csv.as_str(), "csv");
        assert_eq!(RecordsFormat::Parquet.as_str(), "parquet");
    }
}
