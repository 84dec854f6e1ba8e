//! What the Hub-compatible API (`/v1/hf`) reads and commits, with the Hub's rules: a
//! repository exists while it has a file of the caller's; revisions are not kept, so `main` and
//! the repository's current revision name the same files and any other is not found; commits
//! go to `main`. The HTTP side (`api::hub`) only shapes the answers.

use std::sync::Arc;

use super::datastore::{RepoId, parse_commit, revision};
use super::{DatasetError, DatasetMeta, DatasetService};
use crate::rendered::Rendered;

/// Why a Hub read found nothing, in the kinds `huggingface_hub` tells apart (its
/// `X-Error-Code`), or a failure of the datasets behind it.
#[derive(Debug, thiserror::Error)]
pub enum RepoReadError {
    /// No file of the caller's in the repository, or a name no repository can have.
    #[error("dataset repository {0}")]
    RepoNotFound(String),
    /// A revision other than `main` and the current one.
    #[error("revision {0}")]
    RevisionNotFound(String),
    /// No such file in the repository.
    #[error("file {0}")]
    EntryNotFound(String),
    #[error(transparent)]
    Dataset(#[from] DatasetError),
}

impl RepoReadError {
    /// The Hub's `X-Error-Code` for this error, where the Hub sets one.
    pub fn hub_code(&self) -> Option<&'static str> {
        match self {
            Self::RepoNotFound(_) => Some("RepoNotFound"),
            Self::RevisionNotFound(_) => Some("RevisionNotFound"),
            Self::EntryNotFound(_) => Some("EntryNotFound"),
            Self::Dataset(_) => None,
        }
    }
}

/// A repository as a read sees it at one revision.
#[derive(Debug)]
pub struct RepoAt {
    pub repo: RepoId,
    /// Its files (the newest dataset of each name), by name.
    pub files: Vec<DatasetMeta>,
    /// Its current revision ([`revision`]).
    pub sha: String,
}

/// One file of a repository's tree, as the Hub lists it.
#[derive(Debug)]
pub struct TreeFile {
    pub path: String,
    /// Of the file as a read gets it (written out from its rows).
    pub size: u64,
    /// The first 40 hex digits of that file's sha256.
    pub oid: String,
}

impl DatasetService {
    /// Repository `namespace/name` of `owner` at revision `rev` (see the module docs).
    pub async fn hub_repo(
        &self,
        owner: Option<&str>,
        namespace: &str,
        name: &str,
        rev: &str,
    ) -> Result<RepoAt, RepoReadError> {
        let repo =
            RepoId::new(namespace, name).map_err(|e| RepoReadError::RepoNotFound(e.to_string()))?;
        let files = self.datastore_files(owner, &repo).await?;
        if files.is_empty() {
            return Err(RepoReadError::RepoNotFound(format!(
                "'{}' (it has no file of yours)",
                repo.as_str()
            )));
        }
        let sha = revision(&files);
        if rev != "main" && rev != sha {
            return Err(RepoReadError::RevisionNotFound(format!(
                "'{rev}' of '{}' (revisions are not kept: use 'main')",
                repo.as_str()
            )));
        }
        Ok(RepoAt { repo, files, sha })
    }

    /// The tree of repository `namespace/name` at `rev`: its top level (it has no folders).
    pub async fn hub_tree(
        &self,
        owner: Option<&str>,
        namespace: &str,
        name: &str,
        rev: &str,
    ) -> Result<Vec<TreeFile>, RepoReadError> {
        let at = self.hub_repo(owner, namespace, name, rev).await?;
        let mut tree = Vec::with_capacity(at.files.len());
        for f in &at.files {
            let r = self.datastore_render(f).await?;
            tree.push(TreeFile {
                path: f.name.clone(),
                size: r.size,
                oid: r.sha256[..40].to_owned(),
            });
        }
        Ok(tree)
    }

    /// File `file` of repository `namespace/name` at `rev`, written out, with the repository's
    /// revision.
    pub async fn hub_file(
        &self,
        owner: Option<&str>,
        namespace: &str,
        name: &str,
        rev: &str,
        file: &str,
    ) -> Result<(Arc<Rendered>, String), RepoReadError> {
        let at = self.hub_repo(owner, namespace, name, rev).await?;
        let Some(meta) = at.files.iter().find(|f| f.name == file) else {
            return Err(RepoReadError::EntryNotFound(format!(
                "'{file}' of '{}'",
                at.repo.as_str()
            )));
        };
        Ok((self.datastore_render(meta).await?, at.sha))
    }

    /// Commits the files of a Hub commit body (`application/x-ndjson`: a `header` line, then
    /// `file` lines, inline and base64) to `main` of repository `namespace/name`, all or none
    /// ([`DatasetService::datastore_commit_all`]). Returns the repository and its revision
    /// after the commit.
    pub async fn hub_commit(
        &self,
        owner: Option<&str>,
        namespace: &str,
        name: &str,
        rev: &str,
        body: &[u8],
    ) -> Result<(RepoId, String), DatasetError> {
        let repo = RepoId::new(namespace, name)?;
        if rev != "main" {
            return Err(DatasetError::InvalidRequest(format!(
                "revision '{rev}': commits go to 'main' (branches are not served)"
            )));
        }
        let files = parse_commit(body).map_err(DatasetError::InvalidRequest)?;
        self.datastore_commit_all(owner, &repo, &files).await?;
        let now = self.datastore_files(owner, &repo).await?;
        let sha = revision(&now);
        Ok((repo, sha))
    }
}
