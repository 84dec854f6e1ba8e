//! The allow-listed seed directories (`datasets.seed_dirs`): `local` seeds that matched no
//! upload, and `directory` / `file_contents` listings.
//!
//! A path that lands outside every allowed directory (through `..`, a symlink, an absolute
//! path or a glob) gets the same `seed_dataset_not_found` as a path that does not exist, so a
//! caller learns nothing about the server's files outside them. Server files are imported
//! with source `server_file` and cached by canonical path, mtime and size; listings with
//! source `directory` / `file_contents`, cached by a digest of their rows.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::fs::{self, Allowed, FNMATCH, FoundFile, PATH_GLOB, WalkError};
use super::listing::{Encoding, metadata_row, universal_newlines};
use super::{dataset_format, import_issue, reuse_by_ref, server_failure, too_many_files};
use crate::datasets::resolve::ResolveCtx;
use crate::datasets::{DatasetMeta, DatasetSourceKind, import_file, import_rows};
use crate::domain::dataset::{ConfigIssue, FileSystemSource, codes};

const PATH: &str = "seed_config.source.path";
const PATTERN: &str = "seed_config.source.file_pattern";
const ENCODING: &str = "seed_config.source.encoding";

/// `local` after no uploaded dataset matched `path`: the file (or the files a glob matches,
/// in path order) in the first allowed directory that has it, each imported once per
/// version of the file. Empty when nothing inside the allowed directories matches.
pub async fn resolve_local(
    ctx: &ResolveCtx<'_>,
    path: &str,
) -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>> {
    // Nothing here: `resolve` answers `seed_dataset_not_found`, the same for a missing file
    // and for one outside the allowed directories.
    if ctx.sources.dirs.is_empty() {
        return Ok(Vec::new());
    }
    let wanted = path.replace('\\', "/");
    let dirs = ctx.sources.dirs.clone();
    let max = ctx.sources.max_files;
    let found = tokio::task::spawn_blocking(move || find_local(&dirs, &wanted, max))
        .await
        .map_err(|e| vec![server_failure(PATH, &e.to_string())])?;
    let files = match found {
        Ok(files) => files,
        Err(LocalError::BadGlob(msg)) => {
            return Err(vec![ConfigIssue::at_field(
                codes::INVALID_SEED_CONFIG,
                PATH,
                msg,
            )]);
        }
        Err(LocalError::Walk(WalkError::TooManyFiles(n))) => {
            return Err(vec![too_many_files(PATH, n)]);
        }
        Err(LocalError::Walk(WalkError::Io(e))) => {
            return Err(vec![server_failure(PATH, &e)]);
        }
    };
    let mut out = Vec::with_capacity(files.len());
    for (file, mtime_ns) in files {
        out.push(
            import_server_file(ctx, &file, mtime_ns)
                .await
                .map_err(|i| vec![i])?,
        );
    }
    Ok(out)
}

#[derive(Debug)]
enum LocalError {
    BadGlob(String),
    Walk(WalkError),
}

/// The files `path` names under the allowed directories, with their mtimes (ns).
fn find_local(
    dirs: &[PathBuf],
    path: &str,
    max: usize,
) -> Result<Vec<(FoundFile, u128)>, LocalError> {
    let allowed = Allowed::resolve(dirs);
    let files = if fs::is_glob(path) {
        let (base, pattern) = fs::split_glob(path);
        let glob = glob::Pattern::new(pattern)
            .map_err(|e| LocalError::BadGlob(format!("'{path}' is not a valid glob: {e}")))?;
        let base = if base.is_empty() { "." } else { base };
        let keep = |rel: &str| glob.matches_with(rel, PATH_GLOB);
        let mut files = Vec::new();
        for root in allowed.locate_all(base, Path::is_dir) {
            files = fs::walk(&root, fs::glob_depth(pattern), &allowed, max, &keep)
                .map_err(LocalError::Walk)?;
            if !files.is_empty() {
                break;
            }
        }
        files
    } else {
        allowed
            .locate(path, Path::is_file)
            .into_iter()
            .filter_map(|canonical| {
                let size = std::fs::metadata(&canonical).ok()?.len();
                let relative = path.rsplit('/').next().unwrap_or(path).to_owned();
                Some(FoundFile {
                    relative,
                    canonical,
                    size,
                })
            })
            .collect()
    };
    Ok(files
        .into_iter()
        .map(|f| {
            let mtime_ns = std::fs::metadata(&f.canonical)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            (f, mtime_ns)
        })
        .collect())
}

/// One server file: the dataset stored from this version of it, or a new import.
async fn import_server_file(
    ctx: &ResolveCtx<'_>,
    file: &FoundFile,
    mtime_ns: u128,
) -> Result<DatasetMeta, ConfigIssue> {
    let name = file.relative.rsplit('/').next().unwrap_or(&file.relative);
    let format = dataset_format(name).ok_or_else(|| {
        ConfigIssue::at_field(
            codes::INVALID_SEED_CONFIG,
            PATH,
            format!(
                "'{}' is not a CSV, JSON Lines or Parquet file (.csv, .jsonl, .json, .ndjson, \
                 .parquet)",
                file.relative
            ),
        )
    })?;
    let source_ref = format!(
        "server:{}|mtime_ns={mtime_ns}|size={}",
        file.canonical.display(),
        file.size
    );
    if let Some(found) = reuse_by_ref(ctx, &source_ref, PATH).await? {
        return Ok(found);
    }
    let limit = ctx.sources.max_file_bytes;
    if file.size > limit {
        return Err(ConfigIssue::at_field(
            codes::SEED_SOURCE_TOO_LARGE,
            PATH,
            format!(
                "'{}' is larger than this server's limit of {limit} bytes \
                 (datasets.max_upload_bytes)",
                file.relative
            ),
        ));
    }
    import_file(
        ctx.store,
        ctx.owner,
        name,
        format,
        &file.canonical,
        DatasetSourceKind::ServerFile,
        Some(source_ref),
        &ctx.sources.import_limits,
    )
    .await
    .map_err(|e| import_issue(e, PATH, &file.relative))
}

/// `directory` (`contents: None`) and `file_contents` (`contents: Some(encoding)`): one row
/// per matching file of the directory, as DataDesigner's readers build them, imported as a
/// listing dataset (reused when the rows are the same as a previous import's).
pub async fn resolve_directory(
    ctx: &ResolveCtx<'_>,
    files: &FileSystemSource,
    contents: Option<&str>,
) -> Result<Vec<DatasetMeta>, Vec<ConfigIssue>> {
    let seed_type = if contents.is_some() {
        "file_contents"
    } else {
        "directory"
    };
    if ctx.sources.dirs.is_empty() {
        return Err(vec![ConfigIssue::at_field(
            codes::UNSUPPORTED_SEED_SOURCE,
            "seed_config.source.seed_type",
            format!(
                "seed_type '{seed_type}' needs server seed directories \
                 (datasets.seed_dirs), and this server has none; upload the rows as a dataset \
                 and use seed_type 'local' with its file name"
            ),
        )]);
    }
    let spec = ListingSpec::check(files, contents).map_err(|i| vec![i])?;
    let dirs = ctx.sources.dirs.clone();
    let (max_files, max_bytes) = (ctx.sources.max_files, ctx.sources.max_listing_bytes);
    let listed = tokio::task::spawn_blocking(move || spec.list(&dirs, max_files, max_bytes))
        .await
        .map_err(|e| vec![server_failure(PATH, &e.to_string())])?
        .map_err(|i| vec![i])?;
    let source_ref = format!("{seed_type}:{}", listed.digest);
    if let Some(found) = reuse_by_ref(ctx, &source_ref, PATH)
        .await
        .map_err(|i| vec![i])?
    {
        return Ok(vec![found]);
    }
    let kind = if contents.is_some() {
        DatasetSourceKind::FileContents
    } else {
        DatasetSourceKind::Directory
    };
    import_rows(
        ctx.store,
        ctx.owner,
        &listed.name,
        listed.rows,
        kind,
        Some(source_ref),
    )
    .await
    .map(|m| vec![m])
    .map_err(|e| vec![import_issue(e, PATH, &files.path)])
}

/// A checked `directory` / `file_contents` source.
struct ListingSpec {
    path: String,
    pattern: glob::Pattern,
    pattern_text: String,
    recursive: bool,
    encoding: Option<(Encoding, String)>,
}

/// The rows of a listing, its dataset name (the directory's) and a digest for the cache.
struct Listed {
    name: String,
    rows: Vec<Map<String, Value>>,
    digest: String,
}

impl ListingSpec {
    /// DataDesigner's field checks (`FileSystemSeedSource`), plus the encodings synthgate reads.
    fn check(files: &FileSystemSource, contents: Option<&str>) -> Result<Self, ConfigIssue> {
        let invalid = |field: &str, msg: String| {
            ConfigIssue::at_field(codes::INVALID_SEED_CONFIG, field, msg)
        };
        if files.path.trim().is_empty() {
            return Err(invalid(PATH, "must be a non-empty directory path".into()));
        }
        let p = &files.file_pattern;
        if p.trim().is_empty() {
            return Err(invalid(
                PATTERN,
                "must be a non-empty file name pattern".into(),
            ));
        }
        if p.contains(['/', '\\']) {
            return Err(invalid(
                PATTERN,
                format!("'{p}' must match file names, not relative paths (no '/' or '\\')"),
            ));
        }
        let pattern = fs::fnmatch_pattern(p)
            .map_err(|e| invalid(PATTERN, format!("'{p}' is not a valid pattern: {e}")))?;
        let encoding = match contents {
            None => None,
            Some(name) => match Encoding::lookup(name) {
                Some(e) => Some((e, name.to_owned())),
                None => {
                    return Err(invalid(
                        ENCODING,
                        format!(
                            "encoding '{name}' is not read by synthgate; use utf-8, utf-8-sig, \
                             latin-1 or ascii"
                        ),
                    ));
                }
            },
        };
        Ok(Self {
            path: files.path.replace('\\', "/"),
            pattern,
            pattern_text: p.clone(),
            recursive: files.recursive,
            encoding,
        })
    }

    /// Walks the directory and builds the rows (blocking).
    fn list(
        &self,
        dirs: &[PathBuf],
        max_files: usize,
        max_bytes: u64,
    ) -> Result<Listed, ConfigIssue> {
        let allowed = Allowed::resolve(dirs);
        let Some(root) = allowed.locate(&self.path, Path::is_dir) else {
            return Err(ConfigIssue::at_field(
                codes::SEED_DATASET_NOT_FOUND,
                PATH,
                format!(
                    "the server's seed directories have no directory '{}'",
                    self.path
                ),
            ));
        };
        let keep = |rel: &str| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            self.pattern.matches_with(name, FNMATCH)
        };
        let depth = if self.recursive { None } else { Some(1) };
        let found = fs::walk(&root, depth, &allowed, max_files, &keep).map_err(|e| match e {
            WalkError::TooManyFiles(n) => too_many_files(PATH, n),
            WalkError::Io(e) => server_failure(PATH, &e),
        })?;
        if found.is_empty() {
            let scope = if self.recursive {
                "under"
            } else {
                "directly under"
            };
            return Err(ConfigIssue::at_field(
                codes::SEED_DATASET_NOT_FOUND,
                PATTERN,
                format!(
                    "no files matched file_pattern '{}' {scope} '{}'",
                    self.pattern_text, self.path
                ),
            ));
        }
        let total: u64 = found.iter().map(|f| f.size).sum();
        if self.encoding.is_some() && total > max_bytes {
            return Err(ConfigIssue::at_field(
                codes::SEED_SOURCE_TOO_LARGE,
                PATH,
                format!(
                    "the matching files hold {total} bytes, over this server's limit of \
                     {max_bytes} (datasets.max_seed_bytes)"
                ),
            ));
        }
        let root_text = root.to_string_lossy().into_owned();
        let mut rows = Vec::with_capacity(found.len());
        let mut hasher = Sha256::new();
        let kind = if self.encoding.is_some() {
            "file_contents"
        } else {
            "directory_file"
        };
        for file in &found {
            let mut row = metadata_row(kind, &root_text, file);
            if let Some((enc, enc_name)) = &self.encoding {
                let text = read_text(file, *enc, enc_name, max_bytes)?;
                row.insert("content".into(), Value::String(text));
            }
            // Rows are hashed as JSON in order, so any change in names or contents shows.
            hasher.update(Value::Object(row.clone()).to_string().as_bytes());
            hasher.update(b"\n");
            rows.push(row);
        }
        let name = root.file_name().map_or_else(
            || "seed-directory".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        );
        Ok(Listed {
            name,
            rows,
            digest: hex::encode(hasher.finalize()),
        })
    }
}

/// A file's text, decoded and with universal newlines, read with at most `limit` bytes.
fn read_text(
    file: &FoundFile,
    enc: Encoding,
    enc_name: &str,
    limit: u64,
) -> Result<String, ConfigIssue> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(&file.canonical)
        .and_then(|f| f.take(limit.saturating_add(1)).read_to_end(&mut bytes))
        .map_err(|e| server_failure(PATH, &format!("{}: {e}", file.canonical.display())))?;
    if bytes.len() as u64 > limit {
        return Err(ConfigIssue::at_field(
            codes::SEED_SOURCE_TOO_LARGE,
            PATH,
            format!(
                "'{}' grew past this server's limit of {limit} bytes",
                file.relative
            ),
        ));
    }
    let text = enc.decode(bytes).map_err(|at| {
        ConfigIssue::at_field(
            codes::INVALID_SEED_CONFIG,
            ENCODING,
            format!(
                "file '{}' is not valid {enc_name}: cannot decode the byte at offset {at}",
                file.relative
            ),
        )
    })?;
    Ok(universal_newlines(text))
}
