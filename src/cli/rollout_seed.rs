//! The folder a config's `agent_rollout` seed names, uploaded as a tar archive so the server
//! derives DataDesigner's rows from it (see `crate::datasets::rollout::upload`) and the config
//! runs unchanged.
//!
//! The folder is found as DataDesigner 0.9.6 finds it (`AgentRolloutSeedSource.runtime_path`):
//! the config's `path`, else the format's default (`~/.claude/projects`, ...), with `~`
//! expanded and a relative path taken from the current directory, then made absolute with
//! symlinks followed (`Path.resolve()`), which is what the rows' `source_path` values start
//! with. The whole folder is sent (links are not followed): a format reads files other than
//! its pattern's (Claude Code's and Hermes' session indexes).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::client::{Api, RequestError};
use super::dataset_view::DatasetView;
use super::upload;
use crate::datasets::rollout::RolloutFormat;
use crate::datasets::rollout::upload::default_path;

/// A config's `agent_rollout` seed, found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RolloutSeed {
    pub format: RolloutFormat,
    /// The folder as the config writes it (or the format's default), which the server keys
    /// the upload by.
    pub config_path: String,
    /// The folder here, absolute.
    pub folder: PathBuf,
    pub file_pattern: Option<String>,
    pub recursive: bool,
}

/// The `agent_rollout` seed of a config (wrapped in `data_designer` or not): `None` when it
/// has none; `Err` when it names a format or folder that cannot be used here (the server then
/// says what is wrong, or that it has no upload).
pub(crate) fn find(
    config: &Value,
    cwd: &Path,
    home: Option<&Path>,
) -> Option<Result<RolloutSeed, String>> {
    let inner = config.get("data_designer").unwrap_or(config);
    let source = inner.get("seed_config")?.get("source")?;
    if source.get("seed_type")?.as_str()? != "agent_rollout" {
        return None;
    }
    let name = source.get("format").and_then(Value::as_str).unwrap_or("");
    let Some(format) = RolloutFormat::from_name(name) else {
        return Some(Err(format!("'{name}' is not an agent rollout format")));
    };
    let text = |key: &str| source.get(key).and_then(Value::as_str).map(str::to_owned);
    let Some(config_path) = text("path").or(default_path(format).map(str::to_owned)) else {
        return Some(Err(format!("format '{name}' needs a path")));
    };
    let expanded = match (config_path.strip_prefix('~'), home) {
        (Some(""), Some(home)) => home.to_path_buf(),
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(&config_path),
    };
    let absolute = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    let folder = match std::fs::canonicalize(&absolute) {
        Ok(folder) if folder.is_dir() => folder,
        _ => {
            return Some(Err(format!("{} is not a folder here", absolute.display())));
        }
    };
    Some(Ok(RolloutSeed {
        format,
        config_path,
        folder,
        file_pattern: text("file_pattern"),
        recursive: source
            .get("recursive")
            .and_then(Value::as_bool)
            .unwrap_or(true),
    }))
}

/// Archives the folder into a temporary file (links stored as links, not followed) and sends
/// it; returns the dataset the server stored (or already had).
pub(crate) async fn upload(api: &Api, seed: &RolloutSeed) -> Result<DatasetView, RequestError> {
    let folder = seed.folder.clone();
    let archive = tokio::task::spawn_blocking(move || archive(&folder))
        .await
        .map_err(|e| RequestError::Local(format!("archiving the trajectories: {e}")))?
        .map_err(|e| RequestError::Local(format!("archiving {}: {e}", seed.folder.display())))?;
    let name = format!(
        "{}.tar",
        seed.folder
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .unwrap_or("trajectories")
    );
    let root = seed.folder.to_string_lossy().into_owned();
    let recursive = seed.recursive.to_string();
    let mut query = vec![
        ("name", name.as_str()),
        ("format", "agent_rollout"),
        ("rollout_format", seed.format.name()),
        ("path", seed.config_path.as_str()),
        ("recursive", recursive.as_str()),
        ("root", root.as_str()),
    ];
    if let Some(pattern) = &seed.file_pattern {
        query.push(("file_pattern", pattern));
    }
    upload::send_archive(api, archive.path(), &query).await
}

/// A tar archive of every file under `folder`, paths relative to it.
fn archive(folder: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let file = tempfile::NamedTempFile::new()?;
    let mut builder = tar::Builder::new(std::io::BufWriter::new(file.reopen()?));
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Deterministic);
    builder.append_dir_all(".", folder)?;
    builder
        .into_inner()?
        .into_inner()
        .map_err(|e| e.into_error())?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(source: Value) -> Value {
        json!({"data_designer": {"columns": [], "seed_config": {"source": source}}})
    }

    #[test]
    fn the_folder_is_found_as_datadesigner_finds_it() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        std::fs::create_dir_all(cwd.join("traces/a")).unwrap();
        std::fs::create_dir_all(cwd.join("home/.claude/projects")).unwrap();
        let home = cwd.join("home");

        let seed = find(
            &config(
                json!({"seed_type": "agent_rollout", "format": "atif", "path": "traces",
                           "file_pattern": "*.json", "recursive": false}),
            ),
            cwd,
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(seed.config_path, "traces");
        assert_eq!(
            seed.folder,
            std::fs::canonicalize(cwd.join("traces")).unwrap()
        );
        assert_eq!(seed.file_pattern.as_deref(), Some("*.json"));
        assert!(!seed.recursive);

        // No path: the format's default folder, in the home directory.
        let seed = find(
            &config(json!({"seed_type": "agent_rollout", "format": "claude_code", "path": null})),
            cwd,
            Some(&home),
        )
        .unwrap()
        .unwrap();
        assert_eq!(seed.config_path, "~/.claude/projects");
        assert!(seed.folder.ends_with("home/.claude/projects"));
        assert!(seed.recursive);

        let missing = find(
            &config(json!({"seed_type": "agent_rollout", "format": "codex", "path": "nope"})),
            cwd,
            None,
        );
        assert!(missing.unwrap().is_err());
        assert!(
            find(
                &config(json!({"seed_type": "local", "path": "x.csv"})),
                cwd,
                None
            )
            .is_none()
        );
    }

    #[test]
    fn archives_hold_the_folder_by_relative_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("p")).unwrap();
        std::fs::write(dir.path().join("p/s.jsonl"), "{}\n").unwrap();
        let file = archive(dir.path()).unwrap();
        let mut names: Vec<String> = tar::Archive::new(std::fs::File::open(file.path()).unwrap())
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert!(names.contains(&"p/s.jsonl".to_owned()), "{names:?}");
    }
}
