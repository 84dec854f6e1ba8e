//! **A test double of the Hugging Face Hub, not the Hub.** `mock_hub` serves dataset
//! repositories from memory over the Hub's HTTP API, answering the way huggingface.co does, so
//! tests exercise synthgate's real Hub client (`datasets::sources::hub`) without a network:
//!
//! - `GET /api/datasets/{owner}/{name}/revision/{rev}`: repo info with the commit `sha`;
//! - `GET /api/datasets/{owner}/{name}/tree/{rev}[/{path}]?recursive=true`: the entries as a
//!   JSON array (`type`, `path`, `size`, `oid`, `lfs` for large files), paginated with a
//!   `Link: <...>; rel="next"` header past [`MockHub::set_page_size`] entries;
//! - `GET /datasets/{owner}/{name}/resolve/{rev}/{path}`: a small file's bytes directly
//!   (`200`, `X-Repo-Commit`, `ETag`); an LFS file (Parquet, or over 10 KiB) as a `302` to a
//!   signed URL on a second listener standing in for the CDN, with `X-Linked-Size` and
//!   `X-Linked-Etag`, as the Hub redirects to its storage;
//! - errors with the Hub's `X-Error-Code` (`RepoNotFound`, `RevisionNotFound`,
//!   `EntryNotFound`): a private repository (or a missing one) without a valid token is `401`,
//!   a missing one with a valid token `404`; a wrong token is `401` "Invalid credentials in
//!   Authorization header".
//!
//! It counts downloads per file (bodies served, directly or from the CDN), and every request
//! with whether it carried an `Authorization` header, so a test can assert that a second job
//! downloads nothing and that the token never reaches the CDN.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Files at or above this size are stored "in LFS" and served through the CDN redirect.
const LFS_THRESHOLD: usize = 10 * 1024;

/// One request the double answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRequest {
    /// `hub` or `cdn`.
    pub server: &'static str,
    /// The request path and query (percent-encoded, as sent).
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

#[derive(Debug, Default)]
struct Repo {
    private: bool,
    sha: String,
    files: BTreeMap<String, Vec<u8>>,
}

#[derive(Debug, Default)]
struct HubState {
    repos: BTreeMap<String, Repo>,
    tokens: Vec<String>,
    page_size: usize,
    downloads: BTreeMap<String, usize>,
    requests: Vec<HubRequest>,
    cdn_base: String,
    commits: u64,
}

type Shared = Arc<Mutex<HubState>>;

fn lock(s: &Shared) -> MutexGuard<'_, HubState> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running Hub double (in-process). Dropping it stops both listeners.
#[derive(Debug)]
pub struct MockHub {
    addr: SocketAddr,
    state: Shared,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl MockHub {
    /// Starts the Hub and its CDN on two random ports of `127.0.0.1`.
    pub async fn start() -> std::io::Result<Self> {
        let hub = TcpListener::bind(("127.0.0.1", 0)).await?;
        let cdn = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = hub.local_addr()?;
        let state: Shared = Arc::new(Mutex::new(HubState {
            page_size: 1000,
            cdn_base: format!("http://{}", cdn.local_addr()?),
            ..HubState::default()
        }));
        let stop = CancellationToken::new();
        let tasks = TaskTracker::new();
        for (listener, router) in [(hub, hub_router(&state)), (cdn, cdn_router(&state))] {
            let stop = stop.clone();
            tasks.spawn(async move {
                let _ = axum::serve(listener, router)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await;
            });
        }
        tasks.close();
        Ok(Self {
            addr,
            state,
            stop,
            tasks,
        })
    }

    /// `http://127.0.0.1:<port>`: what `datasets.hf.endpoint` is set to.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:<port>`: the storage the Hub redirects downloads to, another origin
    /// (for `datasets.hf.redirect_hosts`).
    pub fn storage(&self) -> String {
        lock(&self.state).cdn_base.clone()
    }

    /// Creates (or replaces) dataset repository `repo_id` (`owner/name`) with `files` at a new
    /// commit; returns the commit sha. A private repository needs the token.
    pub fn add_dataset(&self, repo_id: &str, files: &[(&str, &[u8])], private: bool) -> String {
        let mut st = lock(&self.state);
        st.commits += 1;
        let sha = format!("{:040x}", fnv(repo_id.as_bytes()) ^ st.commits);
        let repo = Repo {
            private,
            sha: sha.clone(),
            files: files
                .iter()
                .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
                .collect(),
        };
        st.repos.insert(repo_id.to_owned(), repo);
        sha
    }

    /// The token private repositories accept (`None`: no token is valid).
    pub fn set_token(&self, token: Option<&str>) {
        lock(&self.state).tokens = token.map(str::to_owned).into_iter().collect();
    }

    /// Another token private repositories accept (a second user's, say).
    pub fn add_token(&self, token: &str) {
        lock(&self.state).tokens.push(token.to_owned());
    }

    /// Entries per page of a tree listing (the Hub's is 1000).
    pub fn set_page_size(&self, n: usize) {
        lock(&self.state).page_size = n.max(1);
    }

    /// How many times the body of `path` in `repo_id` was served.
    pub fn downloads(&self, repo_id: &str, path: &str) -> usize {
        let key = format!("{repo_id}/{path}");
        lock(&self.state).downloads.get(&key).copied().unwrap_or(0)
    }

    /// Bodies served in all.
    pub fn total_downloads(&self) -> usize {
        lock(&self.state).downloads.values().sum()
    }

    /// Every request answered, oldest first.
    pub fn requests(&self) -> Vec<HubRequest> {
        lock(&self.state).requests.clone()
    }

    /// Stops both listeners and waits for them.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.tasks.wait().await;
    }
}

impl Drop for MockHub {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn oid(bytes: &[u8]) -> String {
    format!("{:040x}", fnv(bytes))
}

fn hub_router(state: &Shared) -> Router {
    Router::new()
        .route(
            "/api/datasets/{owner}/{name}/revision/{rev}",
            get(revision_info),
        )
        .route("/api/datasets/{owner}/{name}/tree/{rev}", get(tree_root))
        .route("/api/datasets/{owner}/{name}/tree/{rev}/{*path}", get(tree))
        .route(
            "/datasets/{owner}/{name}/resolve/{rev}/{*path}",
            get(resolve),
        )
        .fallback(|| async { hub_error(StatusCode::NOT_FOUND, None, "Not Found") })
        .with_state(Arc::clone(state))
}

fn cdn_router(state: &Shared) -> Router {
    Router::new()
        .route("/repos/{owner}/{name}/{*path}", get(cdn_object))
        .with_state(Arc::clone(state))
}

fn hub_error(status: StatusCode, code: Option<&str>, message: &str) -> Response {
    let mut r = (status, axum::Json(json!({ "error": message }))).into_response();
    if let Some(code) = code.and_then(|c| HeaderValue::from_str(c).ok()) {
        r.headers_mut().insert("x-error-code", code);
    }
    if let Ok(m) = HeaderValue::from_str(message) {
        r.headers_mut().insert("x-error-message", m);
    }
    r
}

fn record(st: &mut HubState, server: &'static str, uri: &Uri, headers: &HeaderMap) {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    st.requests.push(HubRequest {
        server,
        path,
        authorization,
    });
}

/// The repository `owner/name` at `rev` as the caller may see it, or the Hub's error.
fn visible<'a>(
    st: &'a HubState,
    headers: &HeaderMap,
    repo_id: &str,
    rev: &str,
) -> Result<&'a Repo, Box<Response>> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let authed = match given {
        None => false,
        Some(g) if st.tokens.iter().any(|t| t == g) => true,
        Some(_) => {
            return Err(Box::new(hub_error(
                StatusCode::UNAUTHORIZED,
                None,
                "Invalid credentials in Authorization header",
            )));
        }
    };
    let not_found = || {
        // The Hub does not tell an anonymous caller whether a private repo exists.
        let status = if authed {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::UNAUTHORIZED
        };
        Box::new(hub_error(
            status,
            Some("RepoNotFound"),
            "Repository not found",
        ))
    };
    let repo = st.repos.get(repo_id).ok_or_else(not_found)?;
    if repo.private && !authed {
        return Err(not_found());
    }
    if rev != "main" && rev != repo.sha {
        let msg = format!("Invalid rev id: {rev}");
        return Err(Box::new(hub_error(
            StatusCode::NOT_FOUND,
            Some("RevisionNotFound"),
            &msg,
        )));
    }
    Ok(repo)
}

async fn revision_info(
    State(state): State<Shared>,
    Path((owner, name, rev)): Path<(String, String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let mut st = lock(&state);
    record(&mut st, "hub", &uri, &headers);
    let repo_id = format!("{owner}/{name}");
    match visible(&st, &headers, &repo_id, &rev) {
        Ok(repo) => axum::Json(json!({
            "_id": oid(repo_id.as_bytes()),
            "id": repo_id,
            "author": owner,
            "sha": repo.sha,
            "private": repo.private,
            "gated": false,
            "disabled": false,
            "siblings": repo.files.keys().map(|p| json!({"rfilename": p})).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(r) => *r,
    }
}

#[derive(serde::Deserialize)]
struct TreeQuery {
    #[serde(default)]
    recursive: Option<String>,
    #[serde(default)]
    cursor: Option<usize>,
}

async fn tree_root(
    state: State<Shared>,
    Path((owner, name, rev)): Path<(String, String, String)>,
    q: Query<TreeQuery>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    tree(
        state,
        Path((owner, name, rev, String::new())),
        q,
        headers,
        uri,
    )
    .await
}

async fn tree(
    State(state): State<Shared>,
    Path((owner, name, rev, dir)): Path<(String, String, String, String)>,
    Query(q): Query<TreeQuery>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let mut st = lock(&state);
    record(&mut st, "hub", &uri, &headers);
    let repo_id = format!("{owner}/{name}");
    let repo = match visible(&st, &headers, &repo_id, &rev) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let dir = dir.trim_matches('/');
    let recursive = q
        .recursive
        .as_deref()
        .is_some_and(|v| v == "true" || v == "True");
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    let mut entries: BTreeMap<String, Value> = BTreeMap::new();
    for (path, bytes) in &repo.files {
        let Some(rest) = path.strip_prefix(&prefix) else {
            continue;
        };
        // Every directory between `dir` and the file, then the file itself.
        let parts: Vec<&str> = rest.split('/').collect();
        let depth = if recursive { parts.len() } else { 1 };
        for i in 1..parts.len().min(depth + 1) {
            let d = format!("{prefix}{}", parts[..i].join("/"));
            entries.insert(
                d.clone(),
                json!({"type": "directory", "oid": oid(d.as_bytes()), "size": 0, "path": d}),
            );
        }
        if parts.len() <= depth {
            let mut e =
                json!({"type": "file", "oid": oid(bytes), "size": bytes.len(), "path": path});
            if is_lfs(path, bytes) {
                e["lfs"] = json!({"oid": oid(bytes), "size": bytes.len(), "pointerSize": 134});
            }
            entries.insert(path.clone(), e);
        }
    }
    if entries.is_empty() && !dir.is_empty() {
        let msg = format!("{dir} does not exist on \"{rev}\"");
        return hub_error(StatusCode::NOT_FOUND, Some("EntryNotFound"), &msg);
    }
    let start = q.cursor.unwrap_or(0);
    let page: Vec<Value> = entries
        .into_values()
        .skip(start)
        .take(st.page_size + 1)
        .collect();
    let more = page.len() > st.page_size;
    let page: Vec<Value> = page.into_iter().take(st.page_size).collect();
    let mut r = axum::Json(page).into_response();
    if more {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        let encoded = if dir.is_empty() {
            String::new()
        } else {
            format!("/{}", dir.replace('/', "%2F"))
        };
        let next = format!(
            "<http://{host}/api/datasets/{repo_id}/tree/{rev}{encoded}?recursive={recursive}&cursor={}>; rel=\"next\"",
            start + st.page_size
        );
        if let Ok(v) = HeaderValue::from_str(&next) {
            r.headers_mut().insert(header::LINK, v);
        }
    }
    r
}

fn is_lfs(path: &str, bytes: &[u8]) -> bool {
    path.ends_with(".parquet") || bytes.len() >= LFS_THRESHOLD
}

async fn resolve(
    State(state): State<Shared>,
    Path((owner, name, rev, file)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let mut st = lock(&state);
    record(&mut st, "hub", &uri, &headers);
    let repo_id = format!("{owner}/{name}");
    let (sha, bytes) = match visible(&st, &headers, &repo_id, &rev) {
        Ok(repo) => match repo.files.get(&file) {
            Some(b) => (repo.sha.clone(), b.clone()),
            None => {
                return hub_error(
                    StatusCode::NOT_FOUND,
                    Some("EntryNotFound"),
                    "Entry not found",
                );
            }
        },
        Err(r) => return *r,
    };
    let etag = format!("\"{}\"", oid(&bytes));
    if is_lfs(&file, &bytes) {
        let location = format!(
            "{}/repos/{repo_id}/{file}?X-Amz-Expires=3600&X-Amz-Signature={}",
            st.cdn_base,
            oid(file.as_bytes())
        );
        let mut r = StatusCode::FOUND.into_response();
        let h = r.headers_mut();
        for (k, v) in [
            ("location", location),
            ("x-repo-commit", sha),
            ("x-linked-size", bytes.len().to_string()),
            ("x-linked-etag", etag.clone()),
            ("etag", etag),
        ] {
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.insert(k, v);
            }
        }
        return r;
    }
    *st.downloads.entry(format!("{repo_id}/{file}")).or_default() += 1;
    let mut r = bytes.into_response();
    let h = r.headers_mut();
    for (k, v) in [("x-repo-commit", sha), ("etag", etag)] {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    }
    r
}

/// The storage behind the redirect: serves the bytes to anyone holding the signed URL.
async fn cdn_object(
    State(state): State<Shared>,
    Path((owner, name, file)): Path<(String, String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let mut st = lock(&state);
    record(&mut st, "cdn", &uri, &headers);
    let repo_id = format!("{owner}/{name}");
    let Some(bytes) = st
        .repos
        .get(&repo_id)
        .and_then(|r| r.files.get(&file))
        .cloned()
    else {
        return (StatusCode::FORBIDDEN, "AccessDenied").into_response();
    };
    *st.downloads.entry(format!("{repo_id}/{file}")).or_default() += 1;
    bytes.into_response()
}
