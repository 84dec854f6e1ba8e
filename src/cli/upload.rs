//! Putting a local file on the server as a dataset, once: hash it (sha256, read in chunks),
//! ask `GET /v1/datasets?name=&sha256=&path=` whether the server has it already (from the
//! same path), and only if not stream it to `POST /v1/datasets?name=&path=` from disk, never
//! holding it in memory. A folder of agent trajectories goes as a tar archive
//! ([`send_archive`]). A bar on a
//! terminal (as `submit --wait` shows) follows the hashing and the upload; elsewhere one line
//! says what is being sent.

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use reqwest::{Method, header};
use sha2::{Digest, Sha256};

use super::client::{Api, REQUEST_TIMEOUT, RequestError};
use super::dataset_view::{DatasetPage, DatasetView};
use super::terminal::note;

/// Bytes read at a time while hashing and uploading.
const CHUNK_BYTES: usize = 256 * 1024;

/// How a file came to be on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A dataset with the same name and content was there already: nothing was sent.
    Found,
    /// The file was uploaded (the server may still answer with an identical dataset that
    /// appeared meanwhile; it says 200 then, and no second copy is stored).
    Sent,
}

/// The `format` to send for a file name: the server knows `.csv`, `.jsonl`, `.ndjson` and
/// `.parquet` itself; `.json` is DataDesigner's JSON-lines spelling (`orient='records',
/// lines=True`), so it is sent as `jsonl`. Anything else is left to the server to refuse.
pub(crate) fn format_for(name: &str) -> Option<&'static str> {
    let extension = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
    match extension.as_str() {
        "csv" => Some("csv"),
        "jsonl" | "ndjson" | "json" => Some("jsonl"),
        "parquet" => Some("parquet"),
        _ => None,
    }
}

/// Makes sure the server has `path` as a dataset called `name`, recorded as read from
/// `upload_path` when given; returns it and whether it was sent. `format` overrides the one
/// guessed from the name.
pub(crate) async fn ensure_uploaded(
    api: &Api,
    path: &Path,
    name: &str,
    upload_path: Option<&str>,
    format: Option<&str>,
) -> Result<(DatasetView, Outcome), RequestError> {
    let local =
        |e: std::io::Error| RequestError::Local(format!("cannot read {}: {e}", path.display()));
    let size = tokio::fs::metadata(path).await.map_err(local)?.len();
    let bar = byte_bar(size);

    bar.set_message(format!("hashing {name}"));
    let sha256 = {
        let (path, bar) = (path.to_path_buf(), bar.clone());
        tokio::task::spawn_blocking(move || hash_file(&path, &bar))
            .await
            .map_err(|e| RequestError::Local(format!("hashing {name}: {e}")))?
            .map_err(local)?
    };
    if let Some(found) = find_same(api, name, upload_path, &sha256).await? {
        bar.finish_and_clear();
        return Ok((found, Outcome::Found));
    }

    if bar.is_hidden() {
        note!("uploading {name} ({})", HumanBytes(size));
    }
    bar.reset();
    bar.set_message(format!("uploading {name}"));
    let mut query = vec![("name", name)];
    if let Some(upload_path) = upload_path {
        query.push(("path", upload_path));
    }
    if let Some(format) = format.or_else(|| format_for(name)) {
        query.push(("format", format));
    }
    let sent = send_file(api, path, &query, size, &bar).await;
    bar.finish_and_clear();
    let dataset = sent?;
    if !dataset.sha256.is_empty() && !dataset.sha256.eq_ignore_ascii_case(&sha256) {
        note!(
            "warning: {} changed while it was uploaded; the server stored what it received \
             (sha256 {})",
            path.display(),
            dataset.sha256
        );
    }
    Ok((dataset, Outcome::Sent))
}

/// A byte-counting bar on stderr, hidden when stderr is not a terminal.
fn byte_bar(size: u64) -> ProgressBar {
    let bar = ProgressBar::new(size);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} {msg} {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Hex sha256 of the file, read in chunks (a blocking call: run it off the runtime).
pub(crate) fn hash_file(path: &Path, bar: &ProgressBar) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bar.inc(n as u64);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The caller's ready dataset with this name and content (read from `upload_path`, when
/// given), if the server has one.
async fn find_same(
    api: &Api,
    name: &str,
    upload_path: Option<&str>,
    sha256: &str,
) -> Result<Option<DatasetView>, RequestError> {
    let mut query = vec![("name", name), ("sha256", sha256), ("limit", "1")];
    if let Some(upload_path) = upload_path {
        query.push(("path", upload_path));
    }
    let request = api
        .request(Method::GET, &["v1", "datasets"])
        .query(&query)
        .header(header::ACCEPT, "application/json")
        .timeout(REQUEST_TIMEOUT);
    let page: DatasetPage = api.send(request).await?.json().await?;
    // The filters are the server's; checking again costs nothing.
    Ok(page
        .datasets
        .into_iter()
        .find(|d| d.name == name && d.sha256.eq_ignore_ascii_case(sha256)))
}

/// Sends `path` (a tar archive of a folder of agent trajectories) as `POST /v1/datasets` with
/// `query` (`format=agent_rollout` and the seed's fields), with the same bar as a file; the
/// server stores nothing new when it has the same archive for the same seed (200).
pub(crate) async fn send_archive(
    api: &Api,
    path: &Path,
    query: &[(&str, &str)],
) -> Result<DatasetView, RequestError> {
    let local =
        |e: std::io::Error| RequestError::Local(format!("cannot read {}: {e}", path.display()));
    let size = tokio::fs::metadata(path).await.map_err(local)?.len();
    let bar = byte_bar(size);
    bar.set_message("uploading the trajectories");
    let sent = send_file(api, path, query, size, &bar).await;
    bar.finish_and_clear();
    sent
}

/// Streams the file as the body of `POST /v1/datasets`.
async fn send_file(
    api: &Api,
    path: &Path,
    query: &[(&str, &str)],
    size: u64,
    bar: &ProgressBar,
) -> Result<DatasetView, RequestError> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| RequestError::Local(format!("cannot read {}: {e}", path.display())))?;
    let counter = bar.clone();
    let chunks =
        tokio_util::io::ReaderStream::with_capacity(file, CHUNK_BYTES).inspect(move |chunk| {
            if let Ok(bytes) = chunk {
                counter.inc(bytes.len() as u64);
            }
        });
    // The upload client: no read timeout, since the server answers only once the whole file
    // is imported, which for a large file takes longer than any silence allowed elsewhere.
    let request = api
        .upload_request(Method::POST, &["v1", "datasets"])
        .query(query)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        // Lets the server refuse an oversized file before reading it.
        .header(header::CONTENT_LENGTH, size)
        .header(header::ACCEPT, "application/json")
        .body(reqwest::Body::wrap_stream(chunks));
    // 201 for a new dataset, 200 for the same name and content stored meanwhile.
    Ok(api.send(request).await?.json().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_the_extension() {
        assert_eq!(format_for("a.csv"), Some("csv"));
        assert_eq!(format_for("A.CSV"), Some("csv"));
        assert_eq!(format_for("a.jsonl"), Some("jsonl"));
        assert_eq!(format_for("a.ndjson"), Some("jsonl"));
        assert_eq!(format_for("a.json"), Some("jsonl"));
        assert_eq!(format_for("a.parquet"), Some("parquet"));
        assert_eq!(format_for("a.xlsx"), None);
        assert_eq!(format_for("csv"), None);
    }

    #[test]
    fn hashes_are_hex_sha256_of_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.csv");
        std::fs::write(&path, b"abc").unwrap();
        let bar = ProgressBar::hidden();
        assert_eq!(
            hash_file(&path, &bar).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(bar.position(), 3);
        // Larger than one chunk.
        std::fs::write(&path, vec![b'x'; CHUNK_BYTES * 2 + 5]).unwrap();
        let expected = hex::encode(Sha256::digest(vec![b'x'; CHUNK_BYTES * 2 + 5]));
        assert_eq!(hash_file(&path, &ProgressBar::hidden()).unwrap(), expected);
        assert!(hash_file(&dir.path().join("missing"), &bar).is_err());
    }
}
