//! An `agent_rollout` upload: the folder a config's `agent_rollout` seed names, sent as a tar
//! archive (`synthgate submit` does it), becomes DataDesigner's rows here.
//!
//! A service cannot read its clients' disks, so the derivation DataDesigner runs over
//! `~/.claude/projects` at read time runs once, at upload, over the archive: the decoder's
//! child process (see [`crate::datasets::decoder`]) unpacks it in memory, runs [`derive`]
//! and streams the rows back like any file's, which are stored as a dataset. A job's
//! `agent_rollout` seed then reads the upload made for the same format, path, file pattern
//! and `recursive` (its [`source_ref`]), so the config runs unchanged.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{RolloutFile, RolloutFormat, derive};
use crate::config::DatasetLimits;
use crate::datasets::decoder;
use crate::datasets::formats::{KindSet, RowSink};
use crate::datasets::import::{FileDigest, ImportError, json_kind, new_meta, run_import};
use crate::datasets::{DatasetColumn, DatasetFormat, DatasetMeta, DatasetSourceKind, upload_path};
use crate::store::DatasetStore;

/// Most files an archive may hold (DataDesigner's listing has no bound; a folder of agent
/// sessions holds hundreds to thousands).
pub const MAX_FILES: usize = 100_000;

/// How a stored rollout dataset's `source_ref` starts.
const PREFIX: &str = "agent_rollout:";

/// What the derivation reads besides the files: DataDesigner's `AgentRolloutSeedSource`
/// fields, and where the folder is on the client (`source_path` values are under it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutOptions {
    /// The trajectories' format.
    pub format: RolloutFormat,
    /// A pattern over file names; `None` is the format's default.
    pub file_pattern: Option<String>,
    /// Whether subfolders are read (DataDesigner's default: yes).
    pub recursive: bool,
    /// The folder's absolute path on the client, as DataDesigner resolves it.
    pub root: String,
}

impl RolloutOptions {
    /// The decoder child's arguments for these options (see `decoder::ChildArgs`).
    pub(crate) fn child_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--rollout-format".into(),
            self.format.name().into(),
            "--rollout-recursive".into(),
            self.recursive.to_string().into(),
            "--rollout-root".into(),
            self.root.clone().into(),
        ];
        if let Some(pattern) = &self.file_pattern {
            args.extend(["--rollout-file-pattern".into(), pattern.into()]);
        }
        args
    }
}

/// The `source_ref` of the rollout dataset a seed with these fields reads: the format, the
/// path as the config writes it (normalized; DataDesigner's default folder for the format when
/// the config gives none), the file pattern (the format's default when none) and `recursive`.
pub fn source_ref(
    format: RolloutFormat,
    path: &str,
    file_pattern: Option<&str>,
    recursive: bool,
) -> String {
    let pattern = file_pattern.unwrap_or(format.default_file_pattern());
    // A JSON array: no pattern or path can run into the next field.
    let fields = serde_json::json!([
        format.name(),
        recursive,
        pattern,
        upload_path::normalize(path)
    ]);
    format!("{PREFIX}{fields}")
}

/// Whether a dataset's `source_ref` is a rollout upload's (such a dataset is read only by
/// `agent_rollout` seeds, never matched by a `local` path).
pub fn is_rollout_ref(source_ref: Option<&str>) -> bool {
    source_ref.is_some_and(|r| r.starts_with(PREFIX))
}

/// The folder DataDesigner reads when an `agent_rollout` seed gives no `path`
/// (`get_agent_rollout_format_defaults`), written as the client's home-relative path; ATIF
/// has none (its `path` is required).
pub fn default_path(format: RolloutFormat) -> Option<&'static str> {
    match format {
        RolloutFormat::Atif => None,
        RolloutFormat::ClaudeCode => Some("~/.claude/projects"),
        RolloutFormat::Codex => Some("~/.codex/sessions"),
        RolloutFormat::HermesAgent => Some("~/.hermes/sessions"),
        RolloutFormat::PiCodingAgent => Some("~/.pi/agent/sessions"),
    }
}

/// Stores the rows DataDesigner's `agent_rollout` reader derives from the tar archive at
/// `path` (derived in the decoder's child process) as a `ready` dataset of format `listing`,
/// an upload whose `source_ref` says which seeds read it (see
/// this module).
#[expect(
    clippy::too_many_arguments,
    reason = "import_file_digested's arguments with the rollout's in place of the format"
)]
pub async fn import_rollout(
    store: &dyn DatasetStore,
    owner: Option<&str>,
    name: &str,
    path: &Path,
    digest: FileDigest,
    options: RolloutOptions,
    source_ref: String,
    limits: &DatasetLimits,
) -> Result<DatasetMeta, ImportError> {
    let meta = new_meta(
        owner,
        name,
        DatasetFormat::Listing,
        digest,
        DatasetSourceKind::Upload,
        Some(source_ref),
    );
    let path: PathBuf = path.to_path_buf();
    let limits_owned = limits.clone();
    run_import(store, meta, limits, true, move |sink| {
        decoder::decode_rollout(&path, &options, &limits_owned, sink)
    })
    .await
}

/// In the decoder's child: reads the archive at `path`, derives the rows and hands them to
/// `sink`; returns the columns (DataDesigner's 16 fields, typed from the values).
pub(crate) fn decode_archive(
    path: &Path,
    options: &RolloutOptions,
    limits: &DatasetLimits,
    sink: &mut dyn RowSink,
) -> Result<Vec<DatasetColumn>, ImportError> {
    let files = read_archive(path)?;
    let derived = derive(
        options.format,
        &options.root,
        &files,
        options.file_pattern.as_deref(),
        options.recursive,
    )
    .map_err(|e| ImportError::invalid(format!("agent rollout: {e}")))?;
    // The service logs the child's standard error: what DataDesigner logs, it does too.
    for warning in &derived.warnings {
        eprintln!("agent rollout: {warning}");
    }
    let rows = derived.rows;
    if rows.len() as u64 > limits.max_rows {
        return Err(ImportError::invalid(format!(
            "the trajectories make {} rows; at most {} are allowed (datasets.max_rows)",
            rows.len(),
            limits.max_rows
        )));
    }
    let names: Vec<String> = rows
        .first()
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default();
    let mut kinds = vec![KindSet::default(); names.len()];
    for row in &rows {
        for (kind, value) in kinds.iter_mut().zip(row.values()) {
            if let Some(k) = json_kind(value) {
                kind.add(k);
            }
        }
    }
    for row in rows {
        let row: Map<String, Value> = row;
        sink.push(row)?;
    }
    Ok(names
        .into_iter()
        .zip(kinds)
        .map(|(name, set)| DatasetColumn {
            name,
            r#type: set.column_type(),
        })
        .collect())
}

/// The regular files of a tar archive, by their path inside it (`./` dropped). Links,
/// folders and other entries are skipped; a path that leaves the folder (absolute, `..`) or
/// is not UTF-8 makes the archive invalid.
fn read_archive(path: &Path) -> Result<Vec<RolloutFile>, ImportError> {
    let file = File::open(path).map_err(|e| ImportError::internal(format!("open {e}")))?;
    let mut archive = tar::Archive::new(BufReader::with_capacity(256 * 1024, file));
    let bad = |e: std::io::Error| {
        ImportError::invalid(format!(
            "not a tar archive of the trajectories' folder: {e}"
        ))
    };
    let mut files = Vec::new();
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let raw = entry.path().map_err(bad)?.into_owned();
        let Some(text) = raw.to_str() else {
            return Err(ImportError::invalid(format!(
                "archive entry {} is not a UTF-8 path",
                raw.display()
            )));
        };
        let relative = upload_path::normalize(text);
        if relative.is_empty()
            || relative.starts_with('/')
            || relative.split('/').any(|part| part == "..")
        {
            return Err(ImportError::invalid(format!(
                "archive entry '{text}' is not a path inside the folder"
            )));
        }
        if files.len() == MAX_FILES {
            return Err(ImportError::invalid(format!(
                "the archive holds more than {MAX_FILES} files"
            )));
        }
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(bad)?;
        files.push(RolloutFile {
            relative_path: relative,
            bytes,
        });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entries: &[(&str, &[u8])]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut builder = tar::Builder::new(file.reopen().unwrap());
        for (path, bytes) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            // Written by hand so that hostile paths (`..`, absolute) reach the reader.
            let name = header.as_old_mut().name.as_mut();
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *bytes).unwrap();
        }
        builder.finish().unwrap();
        file
    }

    #[test]
    fn archives_give_their_files_by_relative_path() {
        let a = archive(&[("./p/s.jsonl", b"{}"), ("q.json", b"[]")]);
        let files = read_archive(a.path()).unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.relative_path.as_str()).collect();
        assert_eq!(paths, ["p/s.jsonl", "q.json"]);
        assert_eq!(files[0].bytes, b"{}");
        for hostile in ["../up.jsonl", "/etc/passwd", "a/../../b"] {
            let a = archive(&[(hostile, b"x")]);
            let e = read_archive(a.path()).unwrap_err();
            assert!(e.message.contains("not a path inside"), "{hostile}: {e:?}");
        }
        let junk = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(junk.path(), vec![7u8; 1500]).unwrap();
        assert!(read_archive(junk.path()).is_err());
    }

    #[test]
    fn source_refs_name_what_the_seed_reads() {
        let claude = RolloutFormat::ClaudeCode;
        assert_eq!(
            source_ref(claude, "./traces/", None, true),
            r#"agent_rollout:["claude_code",true,"*.jsonl","traces"]"#
        );
        assert_eq!(
            source_ref(claude, "traces", Some("*.jsonl"), true),
            source_ref(claude, "traces", None, true)
        );
        assert_ne!(
            source_ref(claude, "traces", None, false),
            source_ref(claude, "traces", None, true)
        );
        assert!(is_rollout_ref(Some(&source_ref(claude, "t", None, true))));
        assert!(!is_rollout_ref(Some("upload:t")) && !is_rollout_ref(None));
        assert_eq!(default_path(RolloutFormat::Atif), None);
    }
}
