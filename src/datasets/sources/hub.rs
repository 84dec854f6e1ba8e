//! A small client of the Hugging Face Hub's HTTP API, for `hf` seeds: the commit a revision
//! names, a repository's tree, and file downloads. URLs are built as `huggingface_hub` builds
//! them (`HfApi.dataset_info`, `list_repo_tree`, `hf_hub_url`):
//!
//! - `GET {endpoint}/api/datasets/{owner}/{name}/revision/{rev}` → `{"sha": ...}`;
//! - `GET {endpoint}/api/datasets/{owner}/{name}/tree/{sha}/{dir}?recursive=true`, with the
//!   directory as one percent-encoded segment, following `Link: <...>; rel="next"` pages;
//! - `GET {endpoint}/datasets/{owner}/{name}/resolve/{sha}/{path}`, following the Hub's
//!   redirect to its storage. reqwest drops the `Authorization` header on a redirect to
//!   another origin, so the token only ever goes to the configured endpoint. Redirects go
//!   only to the endpoint's own origin or, over https, to a host under one of
//!   `datasets.hf.redirect_hosts` (the Hub's storage: `hf.co`, `huggingface.co`); one to
//!   anywhere else (an internal address, say) ends the request.
//!
//! The token is a [`SecretString`]: it is sent as a bearer header and never formatted into
//! a message, a log line or a stored value.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{AUTHORIZATION, HeaderValue, LINK};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

/// Most redirects one request follows.
const MAX_REDIRECTS: usize = 5;

/// Whether `url` is https on a host named in `hosts` or under one of them (`cdn-lfs.hf.co`
/// under `hf.co`). Hosts given as IP addresses never match.
fn storage_host(url: &Url, hosts: &[String]) -> bool {
    let Some(host) = url.domain() else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    url.scheme() == "https"
        && hosts.iter().any(|h| {
            host == *h
                || host
                    .strip_suffix(h.as_str())
                    .is_some_and(|p| p.ends_with('.'))
        })
}

/// Most pages of one tree listing followed (1000 entries each on the Hub).
const MAX_TREE_PAGES: usize = 100;

/// Largest repository info or tree page read: a page of 1000 entries is a few hundred KB.
const MAX_LISTING_BYTES: usize = 16 * 1024 * 1024;

/// A failed Hub call, classified for the message the job gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HubFetchError {
    /// The repository does not exist, or is private or gated and the server's token (if any)
    /// does not open it: the Hub does not tell these apart.
    RepoNotFound { status: u16 },
    /// The revision does not exist in the repository.
    RevisionNotFound,
    /// No such file or directory at that revision.
    EntryNotFound,
    /// The Hub refused the server's token (wrong or expired), or forbade access (403).
    Refused { status: u16 },
    /// The file is larger than the limit (bytes).
    TooLarge { limit: u64 },
    /// Any other status, a timeout, a connection or protocol failure; the text says which.
    Failed(String),
}

/// One entry of a tree listing.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub(crate) struct TreeEntry {
    /// `file` or `directory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Path in the repository.
    pub path: String,
    /// Bytes (0 for directories).
    #[serde(default)]
    pub size: u64,
}

#[derive(Deserialize)]
struct RevisionInfo {
    sha: String,
}

/// The configured Hub: endpoint, token and HTTP client.
#[derive(Debug, Clone)]
pub(crate) struct Hub {
    endpoint: Url,
    token: Option<SecretString>,
    client: reqwest::Client,
}

impl Hub {
    /// A client of `endpoint` (an http(s) URL, checked at config load) with `timeout` per
    /// request, body included.
    pub(crate) fn new(
        endpoint: &str,
        token: Option<SecretString>,
        timeout: Duration,
        redirect_hosts: &[String],
    ) -> Result<Self, String> {
        let endpoint = Url::parse(endpoint.trim_end_matches('/')).map_err(|e| e.to_string())?;
        crate::install_crypto_provider();
        let origin = endpoint.origin();
        // Entries with a scheme are whole origins; the others host names.
        let (origins, hosts): (Vec<&String>, Vec<&String>) =
            redirect_hosts.iter().partition(|h| h.contains("://"));
        let origins: Vec<_> = origins
            .into_iter()
            .filter_map(|o| Url::parse(o).ok())
            .map(|u| u.origin())
            .collect();
        let hosts: Vec<String> = hosts
            .into_iter()
            .map(|h| h.trim_start_matches('.').to_ascii_lowercase())
            .collect();
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error("too many redirects");
            }
            let to = attempt.url().origin();
            if to == origin || origins.contains(&to) || storage_host(attempt.url(), &hosts) {
                attempt.follow()
            } else {
                attempt.error("a redirect off the Hub's hosts (datasets.hf.redirect_hosts)")
            }
        });
        let client = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .timeout(timeout)
            .redirect(policy)
            .user_agent(concat!("synthgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            endpoint,
            token,
            client,
        })
    }

    /// The endpoint as configured, without a trailing `/`.
    pub(crate) fn endpoint(&self) -> String {
        self.endpoint.as_str().trim_end_matches('/').to_owned()
    }

    /// The same Hub with `token` instead of the server's (a job's own, for one fetch).
    pub(crate) fn with_token(&self, token: SecretString) -> Self {
        Self {
            token: Some(token),
            ..self.clone()
        }
    }

    /// Whether the server has a token for the Hub.
    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.endpoint.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    async fn get(&self, url: Url) -> Result<reqwest::Response, HubFetchError> {
        let mut req = self.client.get(url);
        if let Some(token) = &self.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose_secret()))
                .map_err(|_| {
                    HubFetchError::Failed(
                        "the configured Hub token is not a valid header value".into(),
                    )
                })?;
            value.set_sensitive(true);
            req = req.header(AUTHORIZATION, value);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| HubFetchError::Failed(describe(&e)))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        Err(classify(&resp))
    }

    /// The commit sha `revision` names in dataset repository `repo_id` (`owner/name`).
    pub(crate) async fn commit(
        &self,
        repo_id: &str,
        revision: &str,
    ) -> Result<String, HubFetchError> {
        let (owner, name) = repo_id.split_once('/').unwrap_or((repo_id, ""));
        let url = self.url(&["api", "datasets", owner, name, "revision", revision]);
        let resp = self.get(url).await?;
        let info: RevisionInfo = read_listing(resp, "repository info").await?;
        Ok(info.sha)
    }

    /// Every file under `dir` (`""` for the root) at commit `sha`, recursively; at most
    /// `max_entries` entries are read (files and directories).
    pub(crate) async fn tree(
        &self,
        repo_id: &str,
        sha: &str,
        dir: &str,
        max_entries: usize,
    ) -> Result<Vec<TreeEntry>, HubFetchError> {
        let (owner, name) = repo_id.split_once('/').unwrap_or((repo_id, ""));
        let mut segments = vec!["api", "datasets", owner, name, "tree", sha];
        if !dir.is_empty() {
            segments.push(dir);
        }
        let mut url = self.url(&segments);
        url.query_pairs_mut().append_pair("recursive", "true");
        let mut out: Vec<TreeEntry> = Vec::new();
        for _ in 0..MAX_TREE_PAGES {
            let resp = self.get(url.clone()).await?;
            let next = next_link(resp.headers().get(LINK));
            let page: Vec<TreeEntry> = read_listing(resp, "tree listing").await?;
            out.extend(page);
            if out.len() > max_entries {
                return Err(HubFetchError::Failed(format!(
                    "the listing has more than {max_entries} entries"
                )));
            }
            match next {
                // Only pages on the configured endpoint: a link elsewhere is not followed.
                Some(n) => match Url::parse(&n) {
                    Ok(u) if u.origin() == self.endpoint.origin() => url = u,
                    _ => {
                        return Err(HubFetchError::Failed(
                            "the tree listing's next page is not on the configured endpoint".into(),
                        ));
                    }
                },
                None => return Ok(out),
            }
        }
        Err(HubFetchError::Failed(format!(
            "the tree listing has more than {MAX_TREE_PAGES} pages"
        )))
    }

    /// Downloads `path` of `repo_id` at commit `sha` into `dest`, refusing more than `limit`
    /// bytes (from `Content-Length` when given, and while streaming). Returns the byte count.
    pub(crate) async fn download(
        &self,
        repo_id: &str,
        sha: &str,
        path: &str,
        dest: &Path,
        limit: u64,
    ) -> Result<u64, HubFetchError> {
        let (owner, name) = repo_id.split_once('/').unwrap_or((repo_id, ""));
        let mut segments = vec!["datasets", owner, name, "resolve", sha];
        segments.extend(path.split('/'));
        let resp = self.get(self.url(&segments)).await?;
        if resp.content_length().is_some_and(|n| n > limit) {
            return Err(HubFetchError::TooLarge { limit });
        }
        let mut file = tokio::fs::File::create(dest)
            .await
            .map_err(|e| HubFetchError::Failed(format!("cannot write a temporary file: {e}")))?;
        let mut written: u64 = 0;
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| HubFetchError::Failed(describe(&e)))?;
            written += chunk.len() as u64;
            if written > limit {
                return Err(HubFetchError::TooLarge { limit });
            }
            file.write_all(&chunk).await.map_err(|e| {
                HubFetchError::Failed(format!("cannot write a temporary file: {e}"))
            })?;
        }
        file.flush()
            .await
            .map_err(|e| HubFetchError::Failed(format!("cannot write a temporary file: {e}")))?;
        Ok(written)
    }
}

/// The Hub's answer to a failed request, as `huggingface_hub.hf_raise_for_status` reads it:
/// `X-Error-Code` first, then the status.
fn classify(resp: &reqwest::Response) -> HubFetchError {
    let status = resp.status();
    let code = resp
        .headers()
        .get("x-error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let message = resp
        .headers()
        .get("x-error-message")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    match (code, status) {
        ("RevisionNotFound", _) => HubFetchError::RevisionNotFound,
        ("EntryNotFound", _) => HubFetchError::EntryNotFound,
        ("GatedRepo", _) => HubFetchError::Refused {
            status: status.as_u16(),
        },
        (_, StatusCode::UNAUTHORIZED)
            if message == "Invalid credentials in Authorization header" =>
        {
            HubFetchError::Refused { status: 401 }
        }
        ("RepoNotFound", _) | (_, StatusCode::UNAUTHORIZED) => HubFetchError::RepoNotFound {
            status: status.as_u16(),
        },
        (_, StatusCode::FORBIDDEN) => HubFetchError::Refused { status: 403 },
        (_, StatusCode::NOT_FOUND) => HubFetchError::EntryNotFound,
        _ => HubFetchError::Failed(format!("the Hub answered HTTP {}", status.as_u16())),
    }
}

/// A JSON answer of the Hub's API (`what` names it in errors), read up to
/// [`MAX_LISTING_BYTES`].
async fn read_listing<T: serde::de::DeserializeOwned>(
    resp: reqwest::Response,
    what: &str,
) -> Result<T, HubFetchError> {
    let unexpected = |why: String| HubFetchError::Failed(format!("unexpected {what}: {why}"));
    let body = crate::bounded_body::read(resp, MAX_LISTING_BYTES)
        .await
        .map_err(|e| unexpected(describe(&e)))?
        .ok_or_else(|| unexpected(format!("larger than {} MiB", MAX_LISTING_BYTES >> 20)))?;
    serde_json::from_slice(&body).map_err(|_| unexpected("the response was malformed".into()))
}

/// What went wrong with a request, without its URL (which is in the job's own config anyway,
/// but says nothing more than "timed out" or "connection refused" would).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "the request timed out".into()
    } else if e.is_connect() {
        "cannot connect to the Hub".into()
    } else if e.is_redirect() {
        "a redirect to a host off datasets.hf.redirect_hosts, or too many redirects".into()
    } else if e.is_decode() || e.is_body() {
        "the response was cut off or malformed".into()
    } else {
        "the request failed".into()
    }
}

/// The `rel="next"` URL of a `Link` header, as `requests`' `response.links` reads it.
fn next_link(header: Option<&HeaderValue>) -> Option<String> {
    let text = header?.to_str().ok()?;
    text.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        let is_next = params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"" || p.trim() == "rel=next");
        is_next.then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_owned()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_link_reads_rel_next() {
        let h = HeaderValue::from_static(
            "<https://hf.co/api/datasets/a/b/tree/x?cursor=abc>; rel=\"next\"",
        );
        assert_eq!(
            next_link(Some(&h)).as_deref(),
            Some("https://hf.co/api/datasets/a/b/tree/x?cursor=abc")
        );
        let h =
            HeaderValue::from_static("<https://x/1>; rel=\"prev\", <https://x/3>; rel=\"next\"");
        assert_eq!(next_link(Some(&h)).as_deref(), Some("https://x/3"));
        assert_eq!(next_link(None), None);
    }

    #[test]
    fn urls_encode_each_segment_like_huggingface_hub() {
        let hub = Hub::new(
            "https://hub.example/prefix/",
            None,
            Duration::from_secs(5),
            &[],
        )
        .unwrap();
        let u = hub.url(&[
            "api",
            "datasets",
            "o",
            "n",
            "tree",
            "refs/convert/parquet",
            "a/b c",
        ]);
        assert_eq!(
            u.as_str(),
            "https://hub.example/prefix/api/datasets/o/n/tree/refs%2Fconvert%2Fparquet/a%2Fb%20c"
        );
        assert_eq!(hub.endpoint(), "https://hub.example/prefix");
    }
}
