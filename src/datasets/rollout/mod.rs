//! Agent-rollout seed derivation: a port of DataDesigner 0.9.6's `AgentRolloutSeedReader`
//! (`engine/resources/seed_reader.py`) and its format handlers
//! (`engine/resources/agent_rollout/`), reading an uploaded directory tree held in memory.
//!
//! The output is meant to equal DataDesigner's row for row and key for key, including the
//! Python-isms that leak into it (`str()` of odd values, `json.dumps(sort_keys=True)` text,
//! ISO-8601 ordering), and it skips the files DataDesigner skips, with a warning naming each
//! (`tests/api/rollout_seeds.rs` compares the rows with DataDesigner's own reader).
//!
//! Known differences, all on input no agent writes:
//! - JSON is parsed by serde_json, so the warning for a malformed file quotes serde_json's
//!   message, not Python's (`Expecting ',' delimiter: line 1 column 9 (char 8)`).
//! - JSON that Python reads but a `serde_json::Value` cannot hold (`NaN`, `Infinity`, numbers
//!   past the float range, lone `\uD800` surrogate escapes) makes the file a skipped malformed
//!   file; DataDesigner keeps it. Integers past 64 bits become the nearest float (DataDesigner
//!   keeps them exact), which shows only where they are printed into text.
//! - Nesting deeper than 128 levels is a skipped malformed file; DataDesigner parses about
//!   1000 levels and then fails the whole read with `RecursionError`.
//! - `root_path` is used as given (normalized as `PurePosixPath` does); DataDesigner first
//!   resolves it (absolute, symlinks and `..` followed).
//! - Relative paths a filesystem listing cannot produce (empty, `.`/`..` parts, duplicates)
//!   are an error.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod atif;
mod claude_code;
mod codex;
mod common;
mod hermes_agent;
mod pi_coding_agent;
pub(crate) mod pyjson;
pub mod upload;

use std::collections::HashMap;
use std::fmt;

use crate::pytext;

use serde_json::{Map, Value};

use common::{Failure, Parsed, Record, path_name, path_parts};

/// DataDesigner's `AgentRolloutFormat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RolloutFormat {
    Atif,
    ClaudeCode,
    Codex,
    HermesAgent,
    PiCodingAgent,
}

impl RolloutFormat {
    /// Every format, in DataDesigner's declaration order.
    pub const ALL: [RolloutFormat; 5] = [
        RolloutFormat::Atif,
        RolloutFormat::ClaudeCode,
        RolloutFormat::Codex,
        RolloutFormat::HermesAgent,
        RolloutFormat::PiCodingAgent,
    ];

    /// The format for its DataDesigner value (`"atif"`, `"claude_code"`, ...).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.name() == s)
    }

    /// The DataDesigner value, which is also every row's `source_kind`.
    pub fn name(self) -> &'static str {
        match self {
            RolloutFormat::Atif => "atif",
            RolloutFormat::ClaudeCode => "claude_code",
            RolloutFormat::Codex => "codex",
            RolloutFormat::HermesAgent => "hermes_agent",
            RolloutFormat::PiCodingAgent => "pi_coding_agent",
        }
    }

    /// The `file_pattern` DataDesigner uses when none is given
    /// (`get_agent_rollout_format_defaults`).
    pub fn default_file_pattern(self) -> &'static str {
        match self {
            RolloutFormat::Atif => "*.json",
            RolloutFormat::HermesAgent => "*.json*",
            RolloutFormat::ClaudeCode | RolloutFormat::Codex | RolloutFormat::PiCodingAgent => {
                "*.jsonl"
            }
        }
    }

    fn is_handled_file(self, rel: &str) -> bool {
        match self {
            RolloutFormat::Atif => atif::is_handled_file(rel),
            RolloutFormat::ClaudeCode => claude_code::is_handled_file(rel),
            RolloutFormat::Codex => codex::is_handled_file(rel),
            RolloutFormat::HermesAgent => hermes_agent::is_handled_file(rel),
            RolloutFormat::PiCodingAgent => pi_coding_agent::is_handled_file(rel),
        }
    }

    fn should_warn_unhandled_file(self, rel: &str) -> bool {
        match self {
            RolloutFormat::HermesAgent => hermes_agent::should_warn_unhandled_file(rel),
            _ => true,
        }
    }

    /// `build_parse_context`: the session index Claude Code and Hermes read from elsewhere in
    /// the tree; the other formats need none.
    fn build_context(
        self,
        tree: &Tree<'_>,
        recursive: bool,
        warnings: &mut Vec<String>,
    ) -> Parsed<ParseContext> {
        Ok(match self {
            RolloutFormat::ClaudeCode => {
                ParseContext::Claude(claude_code::load_session_index(tree, recursive, warnings)?)
            }
            RolloutFormat::HermesAgent => {
                ParseContext::Hermes(hermes_agent::load_session_index(tree, recursive, warnings)?)
            }
            _ => ParseContext::None,
        })
    }

    fn parse_file(
        self,
        tree: &Tree<'_>,
        rel: &str,
        context: &ParseContext,
        warnings: &mut Vec<String>,
    ) -> Parsed<Vec<Record>> {
        let empty = HashMap::new();
        match (self, context) {
            (RolloutFormat::Atif, _) => atif::parse_file(tree, rel),
            (RolloutFormat::ClaudeCode, ParseContext::Claude(index)) => {
                claude_code::parse_file(tree, rel, index, warnings)
            }
            (RolloutFormat::ClaudeCode, _) => claude_code::parse_file(tree, rel, &empty, warnings),
            (RolloutFormat::Codex, _) => codex::parse_file(tree, rel, warnings),
            (RolloutFormat::HermesAgent, ParseContext::Hermes(index)) => {
                hermes_agent::parse_file(tree, rel, index, warnings)
            }
            (RolloutFormat::HermesAgent, _) => {
                hermes_agent::parse_file(tree, rel, &empty, warnings)
            }
            (RolloutFormat::PiCodingAgent, _) => pi_coding_agent::parse_file(tree, rel, warnings),
        }
    }
}

enum ParseContext {
    None,
    Claude(claude_code::SessionIndex),
    Hermes(hermes_agent::SessionIndex),
}

/// One file of the uploaded directory tree: its path relative to the root, `/`-separated, and
/// its bytes.
#[derive(Debug, Clone)]
pub struct RolloutFile {
    pub relative_path: String,
    pub bytes: Vec<u8>,
}

/// What a derivation made: rows (each a JSON object with DataDesigner's 16
/// `NormalizedAgentRolloutRecord` fields in its order) and the warnings DataDesigner logs while
/// reading (skipped unhandled, empty and malformed files, malformed session indexes,
/// unrecognized Codex items), in order.
#[derive(Debug, Clone, Default)]
pub struct Derived {
    pub rows: Vec<Map<String, Value>>,
    pub warnings: Vec<String>,
}

/// A derivation that DataDesigner would fail as a whole (its `SeedReaderError`s, and the few
/// Python exceptions its reader lets through).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutError(pub String);

impl fmt::Display for RolloutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RolloutError {}

/// The field names of `NormalizedAgentRolloutRecord`, in order, as every row holds them.
pub const ROW_FIELDS: [&str; 16] = [
    "trace_id",
    "source_kind",
    "source_path",
    "root_session_id",
    "agent_id",
    "is_sidechain",
    "cwd",
    "project_path",
    "git_branch",
    "started_at",
    "ended_at",
    "messages",
    "source_meta",
    "message_count",
    "tool_call_count",
    "final_assistant_message",
];

/// DataDesigner's `AgentRolloutSeedReader` over an in-memory tree.
///
/// `root_path` is the client's directory as a string; it only builds `source_path` (the root
/// joined with the relative path, as `str(root_path / relative_path)`) and the paths in
/// messages. `file_pattern` `None` means the format's default; `recursive` is
/// `FileSystemSeedSource.recursive` (DataDesigner's default is `true`).
pub fn derive(
    format: RolloutFormat,
    root_path: &str,
    files: &[RolloutFile],
    file_pattern: Option<&str>,
    recursive: bool,
) -> Result<Derived, RolloutError> {
    let mut warnings = Vec::new();
    let rows = derive_logged(
        format,
        root_path,
        files,
        file_pattern,
        recursive,
        &mut warnings,
    )?;
    Ok(Derived { rows, warnings })
}

/// [`derive`], with the warnings pushed onto `warnings` as DataDesigner logs them, so that a
/// derivation that fails still reports what it skipped before failing (DataDesigner's log
/// holds those lines too).
pub fn derive_logged(
    format: RolloutFormat,
    root_path: &str,
    files: &[RolloutFile],
    file_pattern: Option<&str>,
    recursive: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Map<String, Value>>, RolloutError> {
    let pattern = match file_pattern {
        Some(pattern) => validate_file_pattern(pattern)?,
        None => format.default_file_pattern(),
    };
    let tree = Tree::new(root_path, files)?;

    // get_matching_relative_paths: fnmatchcase on the file name, depth 1 unless recursive.
    let matcher = Fnmatch::new(pattern);
    let matched: Vec<&str> = tree
        .paths
        .iter()
        .copied()
        .filter(|rel| recursive || !rel.contains('/'))
        .filter(|rel| matcher.matches(path_name(rel)))
        .collect();
    if matched.is_empty() {
        let scope = if recursive { "under" } else { "directly under" };
        return Err(RolloutError(format!(
            "No files matched file_pattern {} {scope} {}",
            pytext::repr_str(pattern),
            posix_join(root_path, "")
        )));
    }

    // build_manifest: unhandled files are dropped, most with a warning.
    let mut handled = Vec::new();
    for rel in matched {
        if format.is_handled_file(rel) {
            handled.push(rel);
        } else if format.should_warn_unhandled_file(rel) {
            warnings.push(format!("Skipping unhandled {} file {rel}", format.name()));
        }
    }
    let no_rows = || {
        RolloutError(format!(
            "Seed source at {root_path} did not produce any rows"
        ))
    };
    if handled.is_empty() {
        return Err(no_rows());
    }

    // hydrate_row per file. The parse context is built on the first file and rebuilt on the
    // next until it succeeds: DataDesigner builds it inside the per-file `try`.
    let mut context: Option<ParseContext> = None;
    let mut rows = Vec::new();
    for rel in handled {
        let parsed = match &context {
            Some(ctx) => format.parse_file(&tree, rel, ctx, warnings),
            None => match format.build_context(&tree, recursive, warnings) {
                Ok(ctx) => format.parse_file(&tree, rel, context.insert(ctx), warnings),
                Err(failure) => Err(failure),
            },
        };
        match parsed {
            Ok(records) => rows.extend(records.into_iter().map(Record::into_row)),
            Err(Failure::Parse(message) | Failure::Decode(message)) => {
                warnings.push(format!("Skipping malformed file {rel}: {message}"));
            }
            Err(Failure::Fatal(message)) => return Err(RolloutError(message)),
        }
    }
    if rows.is_empty() {
        return Err(no_rows());
    }
    Ok(rows)
}

/// `FileSystemSeedSource`'s `file_pattern` validator.
fn validate_file_pattern(pattern: &str) -> Result<&str, RolloutError> {
    if pytext::py_strip(pattern).is_empty() {
        return Err(RolloutError(
            "FileSystemSeedSource.file_pattern must be a non-empty string.".into(),
        ));
    }
    if pattern.contains(['/', '\\']) {
        return Err(RolloutError(
            "FileSystemSeedSource.file_pattern must match file names, not relative paths.".into(),
        ));
    }
    Ok(pattern)
}

/// The uploaded tree: what a handler may read, including files outside the matched set
/// (session indexes), never the real filesystem.
pub(crate) struct Tree<'a> {
    root: &'a str,
    files: HashMap<&'a str, &'a [u8]>,
    /// Every relative path, sorted (Python's `sorted` on `str` is code-point order).
    paths: Vec<&'a str>,
}

impl<'a> Tree<'a> {
    fn new(root: &'a str, files: &'a [RolloutFile]) -> Result<Self, RolloutError> {
        let mut map = HashMap::with_capacity(files.len());
        for file in files {
            // fsspec's listing never yields `.`/`..` parts or empty names; a client's might.
            let rel = file.relative_path.trim_start_matches('/');
            if rel
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
            {
                return Err(RolloutError(format!(
                    "Invalid relative path {}",
                    pytext::repr_str(&file.relative_path)
                )));
            }
            if map.insert(rel, file.bytes.as_slice()).is_some() {
                return Err(RolloutError(format!(
                    "Duplicate relative path {}",
                    pytext::repr_str(rel)
                )));
            }
        }
        let mut paths: Vec<&str> = map.keys().copied().collect();
        paths.sort_unstable();
        Ok(Self {
            root,
            files: map,
            paths,
        })
    }

    /// `str(root_path / rel)`.
    pub(crate) fn abs(&self, rel: &str) -> String {
        posix_join(self.root, rel)
    }

    /// The file's bytes. Only listed files are ever asked for; a missing one is DataDesigner's
    /// `OSError` case, which fails the read.
    pub(crate) fn bytes(&self, rel: &str) -> Parsed<&'a [u8]> {
        self.files.get(rel).copied().ok_or_else(|| {
            Failure::Fatal(format!(
                "Failed to read agent rollout file {}: [Errno 2] No such file or directory",
                self.abs(rel)
            ))
        })
    }

    /// `root_path.rglob(name)` (or `.glob(name)` when not recursive), sorted as `Path`s sort:
    /// part by part.
    pub(crate) fn find_named(&self, name: &str, recursive: bool) -> Vec<&'a str> {
        let mut found: Vec<&'a str> = self
            .paths
            .iter()
            .copied()
            .filter(|rel| (recursive || !rel.contains('/')) && path_name(rel) == name)
            .collect();
        found.sort_by(|a, b| path_parts(a).cmp(&path_parts(b)));
        found
    }
}

/// `str(PurePosixPath(root) / rel)`: empty and `.` parts dropped, a leading `//` kept (POSIX
/// reserves it), any other run of leading slashes read as one.
fn posix_join(root: &str, rel: &str) -> String {
    let prefix = if root.starts_with("//") && !root.starts_with("///") {
        "//"
    } else if root.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts: Vec<&str> = path_parts(root)
        .into_iter()
        .chain(path_parts(rel))
        .collect();
    if parts.is_empty() && prefix.is_empty() {
        return ".".to_owned();
    }
    format!("{prefix}{}", parts.join("/"))
}

/// Python's `fnmatch.fnmatchcase`: `*` any run, `?` any character, `[...]` a set (`[!...]`
/// negated, `a-z` ranges, a `]` first is literal, an unclosed `[` is literal), all
/// case-sensitive, with no special treatment of dots.
pub(crate) struct Fnmatch {
    tokens: Vec<Token>,
}

enum Token {
    Star,
    Any,
    Literal(char),
    /// Items are inclusive ranges; `negated` inverts the set.
    Set {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

impl Fnmatch {
    pub(crate) fn new(pattern: &str) -> Self {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            i += 1;
            match c {
                '*' => {
                    if !matches!(tokens.last(), Some(Token::Star)) {
                        tokens.push(Token::Star);
                    }
                }
                '?' => tokens.push(Token::Any),
                '[' => match Self::set(&chars, i) {
                    Some((token, next)) => {
                        tokens.push(token);
                        i = next;
                    }
                    None => tokens.push(Token::Literal('[')),
                },
                c => tokens.push(Token::Literal(c)),
            }
        }
        Self { tokens }
    }

    /// A set starting after the `[` at `start - 1`, as `fnmatch.translate` builds it: split
    /// at the hyphens that form ranges, drop reversed ranges, and treat an empty set as
    /// matching nothing (and an empty negated set as any character).
    fn set(chars: &[char], start: usize) -> Option<(Token, usize)> {
        let mut j = start;
        if chars.get(j) == Some(&'!') {
            j += 1;
        }
        if chars.get(j) == Some(&']') {
            j += 1;
        }
        while j < chars.len() && chars[j] != ']' {
            j += 1;
        }
        if j >= chars.len() {
            return None;
        }
        let negated = chars[start] == '!';
        let body = &chars[start + usize::from(negated)..j];
        // Chunks between range hyphens; a hyphen first or last in a chunk is literal.
        let mut chunks: Vec<Vec<char>> = Vec::new();
        let mut from = 0;
        let mut k = 1;
        while let Some(offset) = body
            .get(k..)
            .and_then(|rest| rest.iter().position(|&c| c == '-'))
        {
            let at = k + offset;
            chunks.push(body[from..at].to_vec());
            from = at + 1;
            k = at + 3;
        }
        let tail = body.get(from..).unwrap_or_default().to_vec();
        if tail.is_empty() {
            if let Some(last) = chunks.last_mut() {
                last.push('-');
            }
        } else {
            chunks.push(tail);
        }
        if chunks.is_empty() {
            chunks.push(Vec::new());
        }
        for k in (1..chunks.len()).rev() {
            let (lo, hi) = (chunks[k - 1].last().copied(), chunks[k].first().copied());
            if let (Some(lo), Some(hi)) = (lo, hi)
                && lo > hi
            {
                let merged: Vec<char> = chunks[k - 1][..chunks[k - 1].len() - 1]
                    .iter()
                    .chain(&chunks[k][1..])
                    .copied()
                    .collect();
                chunks[k - 1] = merged;
                chunks.remove(k);
            }
        }
        let mut items = Vec::new();
        for (index, chunk) in chunks.iter().enumerate() {
            items.extend(chunk.iter().map(|&c| (c, c)));
            if index > 0
                && let (Some(&lo), Some(&hi)) = (chunks[index - 1].last(), chunk.first())
            {
                items.push((lo, hi));
            }
        }
        let token = if items.is_empty() && negated {
            Token::Any
        } else {
            Token::Set { negated, items }
        };
        Some((token, j + 1))
    }

    pub(crate) fn matches(&self, name: &str) -> bool {
        let text: Vec<char> = name.chars().collect();
        let one = |token: &Token, c: char| match token {
            Token::Star => false,
            Token::Any => true,
            Token::Literal(l) => *l == c,
            Token::Set { negated, items } => {
                items.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
        };
        // Classic glob matching with backtracking to the last `*` only: linear enough.
        let (mut t, mut p) = (0usize, 0usize);
        let mut resume: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.tokens.get(p) {
                Some(Token::Star) => {
                    resume = Some((p, t));
                    p += 1;
                }
                Some(token) if one(token, text[t]) => {
                    t += 1;
                    p += 1;
                }
                _ => match resume {
                    Some((star, at)) => {
                        p = star + 1;
                        t = at + 1;
                        resume = Some((star, at + 1));
                    }
                    None => return false,
                },
            }
        }
        self.tokens[p..]
            .iter()
            .all(|token| matches!(token, Token::Star))
    }
}
