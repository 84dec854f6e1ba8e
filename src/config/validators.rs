//! The `validators` section: what validation columns may run on this server. A job never
//! names a program or a URL of its own (both come from here): the ruff executable for Python
//! code validators, and the allow list of remote validator endpoints.

use serde::Deserialize;

/// How validation columns run here.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ValidatorsConfig {
    /// The ruff executable Python code validators run (a path, or a name looked up on PATH).
    /// A job with a Python code validator is refused at submit when it cannot be run.
    pub ruff_path: String,
    /// When `ruff_path` cannot be run: fetch the ruff release synthgate pins (the wheel from
    /// PyPI, checked against the sha256 the binary holds) into `tools_dir` at start and use it.
    pub ruff_download: bool,
    /// Where a downloaded ruff is kept (and found again at the next start).
    pub tools_dir: String,
    /// Longest one ruff run may take; past it the record fails with `validator_error`.
    pub code_timeout_sec: u64,
    /// Remote validator endpoints jobs may name: an entry ending in `/` allows every URL of the
    /// same scheme, host and port whose path starts with the entry's path; any other entry
    /// allows that exact URL. Empty (the default): no remote validator may run, since a job
    /// naming an arbitrary URL would let callers make the server send requests anywhere.
    pub remote_endpoints: Vec<String>,
}

impl Default for ValidatorsConfig {
    fn default() -> Self {
        Self {
            ruff_path: "ruff".into(),
            ruff_download: true,
            tools_dir: "data/tools".into(),
            code_timeout_sec: 30,
            remote_endpoints: Vec::new(),
        }
    }
}

impl ValidatorsConfig {
    pub(super) fn problems(&self, out: &mut Vec<String>) {
        if self.ruff_path.trim().is_empty() {
            out.push("config key `validators.ruff_path`: must not be empty".into());
        }
        if self.tools_dir.trim().is_empty() {
            out.push("config key `validators.tools_dir`: must not be empty".into());
        }
        if self.code_timeout_sec == 0 {
            out.push("config key `validators.code_timeout_sec`: must be at least 1".into());
        }
        for (i, e) in self.remote_endpoints.iter().enumerate() {
            if super::http_url(e).is_none() {
                out.push(format!(
                    "config key `validators.remote_endpoints[{i}]`: '{e}' is not an http(s) URL"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_the_key() {
        let mut out = Vec::new();
        ValidatorsConfig::default().problems(&mut out);
        assert!(out.is_empty(), "{out:?}");
        let bad = ValidatorsConfig {
            ruff_path: " ".into(),
            ruff_download: true,
            tools_dir: "".into(),
            code_timeout_sec: 0,
            remote_endpoints: vec!["https://ok.example/".into(), "ftp://x/".into()],
        };
        bad.problems(&mut out);
        assert_eq!(out.len(), 4, "{out:?}");
        assert!(out[0].contains("`validators.ruff_path`"));
        assert!(out[1].contains("`validators.tools_dir`"));
        assert!(out[2].contains("`validators.code_timeout_sec`"));
        assert!(out[3].contains("`validators.remote_endpoints[1]`"));
    }
}
