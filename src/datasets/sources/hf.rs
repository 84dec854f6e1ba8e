//! `hf` seeds: files of a Hugging Face Hub dataset repository, fetched through the Hub's HTTP
//! API ([`super::hub`]) and imported as datasets (source `hf`).
//!
//! The path is DataDesigner's (`HuggingFaceSeedSource.path`, read by `HfFileSystem`):
//! `datasets/{owner}/{repo}[@{revision}]/{file or glob}`, where a glob may use `*`, `?`,
//! `[...]` within a directory and `**` across directories (`datasets/o/r/**/*.parquet`).
//!
//! The token: the server's (`datasets.hf.token_env`), or one the job gives
//! (`seed_config.source.token`, as DataDesigner's configs carry it for a private or gated
//! repository), used for this submit's fetch only: the submit stores the config with the token
//! replaced by [`REDACTED_TOKEN`], and the token is never logged or echoed.
//!
//! What a job may not choose: the endpoint (DataDesigner's default
//! `https://huggingface.co`, which its serialized configs always carry, means the configured
//! Hub; any other than the configured one is refused with `seed_endpoint_not_allowed`, so a
//! job cannot make the server fetch from an address of its choosing).
//!
//! Each file is cached by `source_ref` = endpoint, repository, resolved commit sha and path:
//! a second job at the same commit reuses the stored dataset and downloads nothing; a new
//! commit on the branch is fetched again.

use super::SeedSources;
use super::fs::{PATH_GLOB, is_glob, split_glob};
use super::hub::{Hub, HubFetchError};
use super::{dataset_format, import_issue, reuse_by_ref, server_failure, too_many_files};
use crate::datasets::resolve::ResolveCtx;
use crate::datasets::{DatasetMeta, DatasetSourceKind, import_file};
use crate::domain::dataset::{ConfigIssue, REDACTED_TOKEN, SeedToken, codes};

const PATH: &str = "seed_config.source.path";

/// `HuggingFaceSeedSource.endpoint`'s default.
const DATADESIGNER_ENDPOINT: &str = "https://huggingface.co";

/// A parsed `hf` path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HfPath {
    /// `owner/name`.
    pub repo_id: String,
    /// The revision after `@`, percent-decoded; `main` when absent.
    pub revision: String,
    /// The file or glob inside the repository.
    pub path_in_repo: String,
}

/// `hf` seed `path` at `endpoint`: the files it names, each imported once per commit.
pub async fn resolve(
    ctx: &ResolveCtx<'_>,
    path: &str,
    endpoint: &str,
    token: Option<&SeedToken>,
) -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>> {
    use secrecy::ExposeSecret as _;
    if token.is_some_and(|t| t.0.expose_secret() == REDACTED_TOKEN) {
        return Err(vec![ConfigIssue::at_field(
            codes::INVALID_SEED_CONFIG,
            "seed_config.source.token",
            "this is the marker a stored config holds where its token was: give the token \
             again (or remove `token` to use the server's)",
        )]);
    }
    let Some(hub) = ctx.sources.hub.as_ref() else {
        return Err(vec![ConfigIssue::at_field(
            codes::UNSUPPORTED_SEED_SOURCE,
            "seed_config.source.seed_type",
            "seed_type 'hf' is turned off on this server (datasets.hf.enabled); download the \
             file and upload it (POST /v1/datasets), then use seed_type 'local' with its name",
        )]);
    };
    // DataDesigner writes its default endpoint into every serialized `hf` source, so that
    // value means "the Hub" and is served from the configured one (a mirror, say); any other
    // endpoint would let a job choose where the server fetches from.
    let given = endpoint.trim_end_matches('/');
    if given != DATADESIGNER_ENDPOINT && given != hub.endpoint() {
        return Err(vec![ConfigIssue::at_field(
            codes::SEED_ENDPOINT_NOT_ALLOWED,
            "seed_config.source.endpoint",
            format!(
                "this server fetches Hugging Face seeds from {} only; remove `endpoint` (or \
                 leave DataDesigner's default {DATADESIGNER_ENDPOINT})",
                hub.endpoint()
            ),
        )]);
    }
    let parsed = parse_hf_path(path)
        .map_err(|m| vec![ConfigIssue::at_field(codes::INVALID_SEED_CONFIG, PATH, m)])?;
    let with_token;
    let hub = match token {
        Some(t) => {
            with_token = hub.with_token(t.0.clone());
            &with_token
        }
        None => hub,
    };
    fetch(ctx, hub, &parsed).await.map_err(|i| vec![i])
}

async fn fetch(
    ctx: &ResolveCtx<'_>,
    hub: &Hub,
    p: &HfPath,
) -> Result<Vec<DatasetMeta>, ConfigIssue> {
    let sources: &SeedSources = ctx.sources;
    let repo = &p.repo_id;
    let sha = hub
        .commit(repo, &p.revision)
        .await
        .map_err(|e| hub_issue(&e, hub, &format!("datasets/{repo}@{}", p.revision)))?;
    let files: Vec<(String, u64)> = if is_glob(&p.path_in_repo) {
        let (dir, pattern) = split_glob(&p.path_in_repo);
        let glob = glob::Pattern::new(pattern).map_err(|e| {
            ConfigIssue::at_field(
                codes::INVALID_SEED_CONFIG,
                PATH,
                format!("'{pattern}' is not a valid glob: {e}"),
            )
        })?;
        let max = sources.max_files;
        let tree = hub
            .tree(repo, &sha, dir, max.saturating_mul(10).max(1000))
            .await
            .map_err(|e| hub_issue(&e, hub, &format!("datasets/{repo}@{}/{dir}", p.revision)))?;
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut found: Vec<(String, u64)> = tree
            .into_iter()
            .filter(|e| e.kind == "file")
            .filter(|e| {
                e.path
                    .strip_prefix(&prefix)
                    .is_some_and(|rel| glob.matches_with(rel, PATH_GLOB))
            })
            .map(|e| (e.path, e.size))
            .collect();
        found.sort();
        if found.is_empty() {
            return Err(ConfigIssue::at_field(
                codes::SEED_DATASET_NOT_FOUND,
                PATH,
                format!(
                    "no file of datasets/{repo}@{} matches '{}'",
                    p.revision, p.path_in_repo
                ),
            ));
        }
        if found.len() > max {
            return Err(too_many_files(PATH, max));
        }
        found
    } else {
        vec![(p.path_in_repo.clone(), 0)]
    };
    let mut out = Vec::with_capacity(files.len());
    for (file, size) in files {
        out.push(fetch_file(ctx, hub, repo, &sha, &file, size).await?);
    }
    Ok(out)
}

/// One file: the stored dataset of this commit's file, or a download and import.
async fn fetch_file(
    ctx: &ResolveCtx<'_>,
    hub: &Hub,
    repo: &str,
    sha: &str,
    file: &str,
    listed_size: u64,
) -> Result<DatasetMeta, ConfigIssue> {
    let name = file.rsplit('/').next().unwrap_or(file);
    let format = dataset_format(name).ok_or_else(|| {
        ConfigIssue::at_field(
            codes::INVALID_SEED_CONFIG,
            PATH,
            format!(
                "'{file}' is not a CSV, JSON Lines or Parquet file (.csv, .jsonl, .json, \
                 .ndjson, .parquet)"
            ),
        )
    })?;
    let source_ref = format!("hf:{}/datasets/{repo}@{sha}/{file}", hub.endpoint());
    if let Some(found) = reuse_by_ref(ctx, &source_ref, PATH).await? {
        return Ok(found);
    }
    let limit = ctx.sources.max_file_bytes;
    if listed_size > limit {
        return Err(too_large(file, limit));
    }
    let tmp = tempfile::tempdir().map_err(|e| server_failure(PATH, &e.to_string()))?;
    let dest = tmp.path().join("download");
    hub.download(repo, sha, file, &dest, limit)
        .await
        .map_err(|e| match e {
            HubFetchError::TooLarge { limit } => too_large(file, limit),
            other => hub_issue(&other, hub, &format!("datasets/{repo}/{file}")),
        })?;
    import_file(
        ctx.store,
        ctx.owner,
        name,
        format,
        &dest,
        DatasetSourceKind::Hf,
        Some(source_ref),
        &ctx.sources.import_limits,
    )
    .await
    .map_err(|e| import_issue(e, PATH, &format!("datasets/{repo}/{file}")))
}

fn too_large(file: &str, limit: u64) -> ConfigIssue {
    ConfigIssue::at_field(
        codes::SEED_SOURCE_TOO_LARGE,
        PATH,
        format!(
            "'{file}' is larger than this server's limit of {limit} bytes (datasets.max_upload_bytes)"
        ),
    )
}

/// The issue for a failed Hub call about `what` (a repository, revision or file).
fn hub_issue(e: &HubFetchError, hub: &Hub, what: &str) -> ConfigIssue {
    let token_hint = if hub.has_token() {
        "the Hub token used (the job's `token`, else the server's) does not give access to it"
    } else {
        "this server has no Hub token (datasets.hf.token_env)"
    };
    let (code, msg) = match e {
        HubFetchError::RepoNotFound { status } => (
            codes::SEED_DATASET_NOT_FOUND,
            format!(
                "the Hub has no dataset repository {what} that this server may read (HTTP \
                 {status}): it does not exist, or it is private or gated and {token_hint}"
            ),
        ),
        HubFetchError::RevisionNotFound => (
            codes::SEED_DATASET_NOT_FOUND,
            format!("the Hub has no revision {what}"),
        ),
        HubFetchError::EntryNotFound => (
            codes::SEED_DATASET_NOT_FOUND,
            format!("the Hub has no file or directory {what}"),
        ),
        HubFetchError::Refused { status } => (
            codes::SEED_FETCH_FAILED,
            format!(
                "the Hub refused access to {what} (HTTP {status}): {}",
                if hub.has_token() {
                    "the Hub token used (the job's `token`, else the server's) is invalid or lacks access (gated repositories need their terms accepted)"
                } else {
                    "this server has no Hub token (datasets.hf.token_env)"
                }
            ),
        ),
        HubFetchError::TooLarge { limit } => (
            codes::SEED_SOURCE_TOO_LARGE,
            format!("{what} is larger than this server's limit of {limit} bytes"),
        ),
        HubFetchError::Failed(why) => (
            codes::SEED_FETCH_FAILED,
            format!("fetching {what} from the Hub failed: {why}"),
        ),
    };
    ConfigIssue::at_field(code, PATH, msg)
}

/// Parses `datasets/{owner}/{name}[@{revision}]/{path}` as `huggingface_hub.parse_hf_uri`
/// does (an `@` is the revision marker only right after `owner/name`; `refs/pr/N` and
/// `refs/convert/X` revisions keep their slashes), for dataset repositories only.
pub(crate) fn parse_hf_path(path: &str) -> Result<HfPath, String> {
    let usage = "expected datasets/{owner}/{repo}/{file or glob}, optionally with @{revision} \
                 after the repository";
    let Some(location) = path.trim().strip_prefix("datasets/") else {
        return Err(format!(
            "'{path}' is not a dataset repository path: {usage} (model and space repositories \
             are not read)"
        ));
    };
    let location = location.trim_matches('/');
    let at = location
        .find('@')
        .filter(|&i| location[..i].matches('/').count() <= 1);
    let (repo_id, revision, path_in_repo) = match at {
        None => {
            let mut parts = location.splitn(3, '/');
            let owner = parts.next().unwrap_or_default();
            let name = parts.next().unwrap_or_default();
            let rest = parts.next().unwrap_or_default();
            (
                format!("{owner}/{name}"),
                "main".to_owned(),
                rest.to_owned(),
            )
        }
        Some(i) => {
            let repo_id = location[..i].to_owned();
            let rev_and_path = &location[i + 1..];
            let special = ["refs/pr/", "refs/convert/"]
                .iter()
                .find(|p| rev_and_path.starts_with(*p));
            let split_at = match special {
                Some(p) => rev_and_path[p.len()..].find('/').map(|j| j + p.len()),
                None => rev_and_path.find('/'),
            };
            let (rev, rest) = match split_at {
                Some(j) => (&rev_and_path[..j], &rev_and_path[j + 1..]),
                None => (rev_and_path, ""),
            };
            let rev = percent_decode(rev);
            if rev.is_empty() {
                return Err(format!("'{path}' has an empty revision after '@'"));
            }
            (repo_id, rev, rest.to_owned())
        }
    };
    let valid_part = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match repo_id.split_once('/') {
        Some((o, n)) if valid_part(o) && valid_part(n) => {}
        _ => {
            return Err(format!(
                "'{path}' does not name a repository as owner/name: {usage}"
            ));
        }
    }
    if path_in_repo.is_empty() {
        return Err(format!("'{path}' names no file in the repository: {usage}"));
    }
    if path_in_repo
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(format!(
            "'{path}' has an empty, '.' or '..' component in the file path"
        ));
    }
    Ok(HfPath {
        repo_id,
        revision,
        path_in_repo,
    })
}

/// `urllib.parse.unquote` for a revision (`refs%2Fpr%2F1`); invalid escapes stay as they are.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(h) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(h, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(p: &str) -> (String, String, String) {
        let h = parse_hf_path(p).unwrap();
        (h.repo_id, h.revision, h.path_in_repo)
    }

    #[test]
    fn paths_parse_like_huggingface_hub() {
        assert_eq!(
            ok("datasets/my-user/my-data/data/000_00000.parquet"),
            (
                "my-user/my-data".into(),
                "main".into(),
                "data/000_00000.parquet".into()
            )
        );
        assert_eq!(
            ok("datasets/o/r@v1.0/train.csv"),
            ("o/r".into(), "v1.0".into(), "train.csv".into())
        );
        assert_eq!(
            ok("datasets/o/r@refs/convert/parquet/default/train/0.parquet"),
            (
                "o/r".into(),
                "refs/convert/parquet".into(),
                "default/train/0.parquet".into()
            )
        );
        assert_eq!(
            ok("datasets/o/r@refs%2Fpr%2F3/x.jsonl"),
            ("o/r".into(), "refs/pr/3".into(), "x.jsonl".into())
        );
        // An '@' in a file name is literal.
        assert_eq!(
            ok("datasets/o/r/dir/a@b.csv"),
            ("o/r".into(), "main".into(), "dir/a@b.csv".into())
        );
        assert_eq!(
            ok("datasets/o/r/**/*.parquet"),
            ("o/r".into(), "main".into(), "**/*.parquet".into())
        );
    }

    #[test]
    fn bad_paths_say_what_is_expected() {
        for p in [
            "o/r/x.csv",
            "models/o/r/x.csv",
            "datasets/o",
            "datasets/o/r",
            "datasets/o/r/",
            "datasets/../r/x.csv",
            "datasets/o/r/../x.csv",
            "datasets/o/r@/x.csv",
            "datasets/o?x/r/x.csv",
        ] {
            assert!(parse_hf_path(p).is_err(), "{p} should be refused");
        }
    }
}
