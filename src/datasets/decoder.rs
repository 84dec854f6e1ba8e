//! Untrusted dataset files are decoded in a child process, so that no file can end the service.
//!
//! The readers of [`super::formats`] run third-party decoders (the `parquet` crate, csv,
//! serde_json) over bytes anyone with a key can upload, commit to `/v1/hf` or publish on the
//! Hub. Those decoders recurse per level of a file's nesting and allocate what a header
//! claims; a small crafted file overflowed the stack (an abort, taking every job and request
//! with it) or allocated gigabytes. Guards that re-read the file ahead of the decoder only
//! closed the payloads they knew: each disagreed with the decoder somewhere (a Thrift type it
//! ignores, a repeated field it keeps the last of). So the decoding itself runs where a crash
//! cannot reach the service:
//!
//! * the service starts this same executable with the hidden subcommand `decode-dataset`
//!   ([`run_child`]), with a clean environment (no secrets), the file's path and the reader's
//!   limits;
//! * the child caps its own memory (`datasets.decoder_memory_mib`, as `RLIMIT_DATA`: heap,
//!   anonymous mappings and thread stacks, not the executable's mapped code), CPU time
//!   (`datasets.decoder_cpu_sec`) and, by decoding on a thread of its own, its stack
//!   ([`STACK_BYTES`]); no core file is written;
//! * it streams each row back as one line of JSON, then the columns (or the reader's error);
//! * the service ([`decode`]) reads those lines back with serde_json, the same decoder that
//!   reads stored rows later, and refuses a row that nests deeper than [`MAX_VALUE_DEPTH`], so
//!   a stored row can always be read again. A child that dies (stack overflow, allocation past
//!   its limit, CPU time) fails that import with `invalid_dataset` and a message naming the
//!   limit; the service and every other request go on.
//!
//! A process per import costs a few milliseconds, against imports that take from tens of
//! milliseconds to minutes.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::formats::{self, RowSink};
use super::import::ImportError;
use super::rollout::RolloutFormat;
use super::rollout::upload::{RolloutOptions, decode_archive};
use super::{DatasetColumn, DatasetFormat};
use crate::config::DatasetLimits;

/// The decoding thread's stack. Rows of tables nest a few levels; the parquet crate recurses
/// a few frames per level, so this leaves room for hundreds of levels and refuses (by
/// overflowing, in the child) the thousands a crafted schema declares.
pub const STACK_BYTES: usize = 8 << 20;

/// Deepest nesting of a stored value (an object or array counts one level). serde_json, which
/// reads stored rows back, stops at 128 levels; a row inside its block adds two.
pub const MAX_VALUE_DEPTH: usize = 64;

/// Longest line the child may send beyond `max_row_bytes`: the columns line, and the JSON
/// escaping of a row (the reader bounds a row as it parsed it).
const LINE_SLACK_BYTES: usize = 1 << 20;

/// Most of the child's standard error kept for the log and for telling how it died.
const STDERR_KEEP_BYTES: u64 = 16 * 1024;

/// What the child is asked to decode, and under which limits: its command line.
#[derive(Debug, Clone, clap::Args)]
pub struct ChildArgs {
    /// `csv`, `jsonl` or `parquet`.
    #[arg(long)]
    format: String,
    /// `datasets.max_row_bytes`.
    #[arg(long)]
    max_row_bytes: usize,
    /// `datasets.max_columns`.
    #[arg(long)]
    max_columns: usize,
    /// Memory (`RLIMIT_DATA`), in bytes.
    #[arg(long)]
    memory_bytes: u64,
    /// CPU time, in seconds.
    #[arg(long)]
    cpu_sec: u64,
    /// `--format agent_rollout`: the trajectories' format (the file is a tar archive).
    #[arg(long)]
    rollout_format: Option<String>,
    /// `--format agent_rollout`: `recursive`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    rollout_recursive: bool,
    /// `--format agent_rollout`: the file pattern, when not the format's default.
    #[arg(long)]
    rollout_file_pattern: Option<String>,
    /// `--format agent_rollout`: the folder's path on the client.
    #[arg(long, default_value = "")]
    rollout_root: String,
    /// The file.
    path: PathBuf,
}

/// The `--format` of an agent-rollout archive.
const ROLLOUT_FORMAT: &str = "agent_rollout";

/// One line the child sends, after its one-letter tag.
#[derive(Debug, Serialize, Deserialize)]
struct ChildError {
    code: String,
    message: String,
}

/// Line tags: a row, the columns (last, on success), the reader's error (last, on failure).
const ROW: u8 = b'R';
const COLUMNS: u8 = b'C';
const ERROR: u8 = b'E';

/// The child's side: caps its own resources, decodes the file on a thread with
/// [`STACK_BYTES`] of stack, and writes the lines [`decode`] reads to standard output.
pub fn run_child(args: ChildArgs) -> ExitCode {
    if let Err(e) = cap_resources(args.memory_bytes, args.cpu_sec) {
        eprintln!("decode-dataset: cannot set resource limits: {e}");
        return ExitCode::FAILURE;
    }
    let decoding = std::thread::Builder::new()
        .name("decode-dataset".into())
        .stack_size(STACK_BYTES)
        .spawn(move || decode_to_stdout(&args));
    match decoding.map(|t| t.join()) {
        Ok(Ok(Ok(()))) => ExitCode::SUCCESS,
        Ok(Ok(Err(e))) => {
            eprintln!("decode-dataset: cannot write to the service: {e}");
            ExitCode::FAILURE
        }
        // The panic's text went to standard error, where the service reads it.
        Ok(Err(_)) => ExitCode::from(101),
        Err(e) => {
            eprintln!("decode-dataset: cannot start the decoding thread: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Memory and CPU time for this process; no core file (a crash here is expected).
/// `RLIMIT_DATA` rather than `RLIMIT_AS`: it counts what the decoder allocates (heap,
/// anonymous mappings, stacks), not the executable's code, whose size differs by build.
fn cap_resources(memory_bytes: u64, cpu_sec: u64) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let cap = |resource, n: u64| {
        setrlimit(
            resource,
            Rlimit {
                current: Some(n),
                maximum: Some(n),
            },
        )
    };
    cap(Resource::Core, 0)?;
    cap(Resource::Data, memory_bytes)?;
    // The soft limit sends SIGXCPU, which ends the process; the hard one a second later,
    // SIGKILL.
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(cpu_sec),
            maximum: Some(cpu_sec.saturating_add(1)),
        },
    )?;
    Ok(())
}

fn decode_to_stdout(args: &ChildArgs) -> std::io::Result<()> {
    let mut out = LineSink {
        out: BufWriter::with_capacity(256 * 1024, std::io::stdout().lock()),
        failed: None,
    };
    let limits = DatasetLimits {
        max_row_bytes: args.max_row_bytes,
        max_columns: args.max_columns,
        ..DatasetLimits::default()
    };
    let rollout = args.rollout_format.as_deref().map(|name| {
        RolloutFormat::from_name(name).map(|format| RolloutOptions {
            format,
            file_pattern: args.rollout_file_pattern.clone(),
            recursive: args.rollout_recursive,
            root: args.rollout_root.clone(),
        })
    });
    let result = match (DatasetFormat::parse(&args.format), rollout) {
        (None, Some(Some(options))) if args.format == ROLLOUT_FORMAT => {
            decode_archive(&args.path, &options, &limits, &mut out)
        }
        (Some(format), None) => formats::read_file(format, &args.path, &limits, &mut out),
        _ => Err(ImportError {
            code: "unsupported_dataset_format",
            message: format!(
                "unknown format {:?} (rollout format {:?})",
                args.format, args.rollout_format
            ),
        }),
    };
    if let Some(e) = out.failed.take() {
        return Err(e);
    }
    match result {
        Ok(columns) => out.line(COLUMNS, &columns)?,
        Err(e) => out.line(
            ERROR,
            &ChildError {
                code: e.code.to_owned(),
                message: e.message,
            },
        )?,
    }
    out.out.flush()
}

/// The child's rows, written as tagged lines.
struct LineSink<W: Write> {
    out: W,
    /// The write that failed (the service stopped reading): the reader is stopped with it.
    failed: Option<std::io::Error>,
}

impl<W: Write> LineSink<W> {
    fn line<T: Serialize + ?Sized>(&mut self, tag: u8, value: &T) -> std::io::Result<()> {
        self.out.write_all(&[tag])?;
        serde_json::to_writer(&mut self.out, value)?;
        self.out.write_all(b"\n")
    }
}

impl<W: Write> RowSink for LineSink<W> {
    fn push(&mut self, row: Map<String, Value>) -> Result<(), ImportError> {
        self.line(ROW, &row).map_err(|e| {
            let stop = ImportError::internal(format!("writing a row: {e}"));
            self.failed = Some(e);
            stop
        })
    }
}

/// The program started as the decoder: `datasets.decoder_program`, else this executable.
fn program(limits: &DatasetLimits) -> Result<PathBuf, ImportError> {
    match &limits.decoder.program {
        Some(p) => Ok(p.clone()),
        None => std::env::current_exe()
            .map_err(|e| ImportError::internal(format!("locating this executable: {e}"))),
    }
}

/// The service's side (blocking code): decodes the file at `path` in a child process and
/// hands every row it sends to `sink`; returns the columns. See the module docs.
pub(crate) fn decode(
    format: DatasetFormat,
    path: &Path,
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<Vec<DatasetColumn>, ImportError> {
    decode_with(child_args(format.as_str(), &[], path, limits), limits, sink)
}

/// [`decode`] for an agent-rollout archive: the child derives DataDesigner's rows from the
/// trajectories in it (see [`crate::datasets::rollout::upload`]).
pub(crate) fn decode_rollout(
    path: &Path,
    options: &RolloutOptions,
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<Vec<DatasetColumn>, ImportError> {
    let args = child_args(ROLLOUT_FORMAT, &options.child_args(), path, limits);
    decode_with(args, limits, sink)
}

fn decode_with(
    args: Vec<OsString>,
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<Vec<DatasetColumn>, ImportError> {
    let program = program(limits)?;
    let mut child = Command::new(&program)
        .arg("decode-dataset")
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            ImportError::internal(format!(
                "starting the dataset decoder {}: {e}",
                program.display()
            ))
        })?;
    let stderr = child.stderr.take().map(keep_stderr);
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut running = Running(Some(child));
    let read = read_lines(stdout, limits, sink);
    // On an early stop (a limit, the writer gone) the child is killed rather than waited for.
    if !matches!(read, Ok(Some(_))) {
        running.kill();
    }
    let status = running.wait();
    let stderr = stderr
        .and_then(|t| t.join().ok())
        .unwrap_or_default()
        .trim()
        .to_owned();
    match read? {
        Some(Ok(columns)) if status.as_ref().is_ok_and(|s| s.success()) => Ok(columns),
        Some(Err(e)) => Err(e),
        _ => Err(died(status, &stderr, limits)),
    }
}

fn child_args(
    format: &str,
    extra: &[OsString],
    path: &Path,
    limits: &DatasetLimits,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--format".into(),
        format.into(),
        "--max-row-bytes".into(),
        limits.max_row_bytes.to_string().into(),
        "--max-columns".into(),
        limits.max_columns.to_string().into(),
        "--memory-bytes".into(),
        limits.decoder.memory_bytes.to_string().into(),
        "--cpu-sec".into(),
        limits.decoder.cpu_sec.to_string().into(),
    ];
    args.extend_from_slice(extra);
    // After `--`: a path that starts with a dash is still a path.
    args.extend(["--".into(), path.as_os_str().to_owned()]);
    args
}

/// Reads the child's lines: rows to `sink`, then its last word. `Ok(None)`: the output ended
/// without one (the child died). `Err`: a row was refused (a limit, or too deep to store).
fn read_lines(
    stdout: impl Read,
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<Option<Result<Vec<DatasetColumn>, ImportError>>, ImportError> {
    let max_line = limits.max_row_bytes.saturating_add(LINE_SLACK_BYTES) as u64;
    let mut reader = BufReader::with_capacity(256 * 1024, stdout);
    let mut line = Vec::new();
    let mut rows = 0u64;
    loop {
        line.clear();
        let n = (&mut reader)
            .take(max_line)
            .read_until(b'\n', &mut line)
            .map_err(|e| ImportError::internal(format!("reading the decoder: {e}")))?;
        if n as u64 == max_line && line.last() != Some(&b'\n') {
            // A Parquet row is bounded only once encoded: say which limit it passed rather
            // than reporting the decoder killed for it.
            return Err(ImportError::invalid(format!(
                "row {} is larger than {} bytes as JSON (datasets.max_row_bytes)",
                rows + 1,
                limits.max_row_bytes
            )));
        }
        if n == 0 || line.last() != Some(&b'\n') {
            // The end without a last word: the child died.
            return Ok(None);
        }
        let body = &line[1..line.len() - 1];
        match line[0] {
            ROW => {
                rows += 1;
                sink.push(stored_row(body, rows)?)?;
            }
            COLUMNS => {
                return Ok(Some(serde_json::from_slice(body).map_err(|e| {
                    ImportError::internal(format!("the decoder's columns: {e}"))
                })));
            }
            ERROR => {
                let e: ChildError = serde_json::from_slice(body)
                    .map_err(|e| ImportError::internal(format!("the decoder's error: {e}")))?;
                return Ok(Some(Err(child_error(e))));
            }
            _ => return Ok(None),
        }
    }
}

/// Row `n` as the child sent it, decoded as stored rows are read back, and no deeper than
/// [`MAX_VALUE_DEPTH`].
fn stored_row(body: &[u8], n: u64) -> Result<Map<String, Value>, ImportError> {
    let too_deep = || {
        ImportError::invalid(format!(
            "row {n}: a value nests more than {MAX_VALUE_DEPTH} levels deep; \
             at most {MAX_VALUE_DEPTH} are stored"
        ))
    };
    // The child encoded the row itself, so the only way serde_json refuses it is its own
    // recursion limit (128 levels).
    let row: Map<String, Value> = serde_json::from_slice(body).map_err(|_| too_deep())?;
    if row.values().any(|v| depth(v) > MAX_VALUE_DEPTH) {
        return Err(too_deep());
    }
    Ok(row)
}

/// Levels of nesting of `value` (a scalar is 0, `[]` and `{}` are 1), without recursion.
pub(crate) fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(d + 1);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            Value::Object(fields) => {
                deepest = deepest.max(d + 1);
                stack.extend(fields.values().map(|i| (i, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The reader's error, as the child reported it.
fn child_error(e: ChildError) -> ImportError {
    let code = match e.code.as_str() {
        "invalid_dataset" => "invalid_dataset",
        "unsupported_dataset_format" => "unsupported_dataset_format",
        _ => "internal",
    };
    ImportError {
        code,
        message: e.message,
    }
}

/// Why the child ended without its last word, as the client's error. What Rust's runtime
/// printed before an abort tells a stack overflow from an allocation past the memory cap.
fn died(
    status: std::io::Result<std::process::ExitStatus>,
    stderr: &str,
    limits: &DatasetLimits,
) -> ImportError {
    let described = match &status {
        Ok(s) => s.to_string(),
        Err(e) => format!("unknown ({e})"),
    };
    tracing::warn!(status = %described, stderr, "the dataset decoder died");
    let signal = status.as_ref().ok().and_then(|s| s.signal());
    let why = if signal == Some(rustix::process::Signal::XCPU.as_raw())
        || signal == Some(rustix::process::Signal::KILL.as_raw())
    {
        format!(
            "decoding it took more than {} s of CPU time (datasets.decoder_cpu_sec)",
            limits.decoder.cpu_sec
        )
    } else if stderr.contains("overflowed its stack") {
        "its structure nests too deeply to decode".to_owned()
    } else if stderr.contains("memory allocation of") {
        format!(
            "decoding it needed more than {} MiB of memory (datasets.decoder_memory_mib)",
            limits.decoder.memory_bytes >> 20
        )
    } else {
        return match status {
            Ok(s) if s.code() == Some(101) => ImportError::invalid(
                "the file could not be read: its decoder failed on malformed data",
            ),
            _ => ImportError::invalid(format!(
                "the file could not be read: its decoder stopped ({described})"
            )),
        };
    };
    ImportError::invalid(format!("the file could not be read: {why}"))
}

/// Reads the child's standard error on a thread of its own (a full pipe would stop the
/// child), keeping its first [`STDERR_KEEP_BYTES`].
fn keep_stderr(stderr: std::process::ChildStderr) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut stderr = stderr;
        let _ = (&mut stderr).take(STDERR_KEEP_BYTES).read_to_end(&mut kept);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    })
}

/// The child, killed and reaped when the import stops early or fails.
struct Running(Option<Child>);

impl Running {
    fn kill(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
        }
    }

    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self.0.take() {
            Some(mut c) => c.wait(),
            None => Err(std::io::Error::other("already waited for")),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn depth_counts_containers_without_recursion() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!([])), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
        let mut deep = json!(0);
        for _ in 0..1_000 {
            deep = json!([deep]);
        }
        assert_eq!(depth(&deep), 1_000);
    }

    /// A row line past `max_row_bytes` (plus the slack) is refused naming the limit.
    #[test]
    fn a_row_line_past_the_bound_names_the_limit() {
        struct Keep;
        impl RowSink for Keep {
            fn push(&mut self, _row: Map<String, Value>) -> Result<(), ImportError> {
                Ok(())
            }
        }
        let limits = DatasetLimits {
            max_row_bytes: 1024,
            ..DatasetLimits::default()
        };
        let mut out = b"R{\"a\":1}\n".to_vec();
        out.push(ROW);
        out.extend(std::iter::repeat_n(b'x', LINE_SLACK_BYTES + 2048));
        let e = read_lines(out.as_slice(), &limits, &mut Keep).unwrap_err();
        assert!(e.message.contains("row 2"), "{}", e.message);
        assert!(
            e.message.contains("datasets.max_row_bytes"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_row_deeper_than_the_bound_is_refused_and_one_within_is_kept() {
        let nested = |levels: usize| {
            let mut v = json!(1);
            for _ in 0..levels {
                v = json!([v]);
            }
            serde_json::to_vec(&json!({"x": v})).unwrap()
        };
        assert!(stored_row(&nested(MAX_VALUE_DEPTH), 1).is_ok());
        let e = stored_row(&nested(MAX_VALUE_DEPTH + 1), 7).unwrap_err();
        assert_eq!(e.code, "invalid_dataset");
        assert!(e.message.contains("row 7"), "{}", e.message);
        // Past serde_json's own limit: the same error, not a decoder failure.
        let e = stored_row(&nested(500), 2).unwrap_err();
        assert!(e.message.contains("nests more than"), "{}", e.message);
    }
}
