//! The `datasets` section: stored seed datasets, and the server-side sources a seed may be
//! read from. A job never names a server path outside `seed_dirs`, a Hub endpoint other than
//! `hf.endpoint`, or a token: those come from here.

use std::path::PathBuf;

use secrecy::SecretString;
use serde::Deserialize;

/// Seed datasets and their server-side sources.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatasetsConfig {
    /// Largest dataset file accepted, in bytes: an upload, a server file, or a Hub download.
    pub max_upload_bytes: u64,
    /// Directories whose files `local`, `directory` and `file_contents` seeds may read. A
    /// relative seed path is looked up in each, in order; an absolute one must lie inside one;
    /// nothing outside them is read, whatever `..` or symlinks say. Empty (the default): no
    /// server file is read.
    pub seed_dirs: Vec<PathBuf>,
    /// Most files one seed may match: a `directory`/`file_contents` listing, or a `local` or
    /// `hf` glob.
    pub max_seed_files: usize,
    /// Most bytes a `file_contents` seed may read, over all its files.
    pub max_seed_bytes: u64,
    /// The Hugging Face Hub, for `hf` seeds.
    pub hf: HfConfig,
}

impl Default for DatasetsConfig {
    fn default() -> Self {
        Self {
            max_upload_bytes: 1024 * 1024 * 1024,
            seed_dirs: Vec::new(),
            max_seed_files: 10_000,
            max_seed_bytes: 64 * 1024 * 1024,
            hf: HfConfig::default(),
        }
    }
}

/// Where `hf` seeds come from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HfConfig {
    /// Whether `hf` seeds are served at all (off for a server without Internet access).
    pub enabled: bool,
    /// The Hub's base URL. A job's `endpoint` must be this one (DataDesigner's default is
    /// `https://huggingface.co`).
    pub endpoint: String,
    /// Name of the environment variable holding the Hub token (for private and gated
    /// repositories). Checked at start-up: a named variable that is not set stops it.
    pub token_env: Option<String>,
    /// The token itself, for configs that substitute it (`token: ${HF_TOKEN}`); `token_env`
    /// wins when both are set.
    pub token: Option<SecretString>,
    /// Longest one Hub request may take, download included, in seconds.
    pub timeout_sec: u64,
}

impl Default for HfConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            endpoint: "https://huggingface.co".into(),
            token_env: None,
            token: None,
            timeout_sec: 300,
        }
    }
}

impl DatasetsConfig {
    pub(super) fn problems(&self, out: &mut Vec<String>) {
        if self.max_upload_bytes == 0 {
            out.push("config key `datasets.max_upload_bytes`: must be at least 1".into());
        }
        if self.max_seed_files == 0 {
            out.push("config key `datasets.max_seed_files`: must be at least 1".into());
        }
        for (i, d) in self.seed_dirs.iter().enumerate() {
            if d.as_os_str().is_empty() {
                out.push(format!(
                    "config key `datasets.seed_dirs[{i}]`: must not be empty"
                ));
            } else if !d.is_dir() {
                out.push(format!(
                    "config key `datasets.seed_dirs[{i}]`: '{}' is not a directory",
                    d.display()
                ));
            }
        }
        match reqwest::Url::parse(&self.hf.endpoint) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => out.push(format!(
                "config key `datasets.hf.endpoint`: '{}' is not an http(s) URL",
                self.hf.endpoint
            )),
        }
        if self.hf.timeout_sec == 0 || self.hf.timeout_sec > crate::domain::models::MAX_TIMEOUT_SEC
        {
            out.push(format!(
                "config key `datasets.hf.timeout_sec`: must be between 1 and {}",
                crate::domain::models::MAX_TIMEOUT_SEC
            ));
        }
    }

    /// The environment problems: a `hf.token_env` naming a variable that is unset or empty.
    pub(super) fn env_problems(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
        out: &mut Vec<String>,
    ) {
        if let Some(var) = &self.hf.token_env
            && lookup(var).is_none_or(|v| v.is_empty())
        {
            out.push(format!(
                "config key `datasets.hf.token_env`: environment variable `{var}` is not set"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_the_key() {
        let mut out = Vec::new();
        DatasetsConfig::default().problems(&mut out);
        assert!(out.is_empty(), "{out:?}");
        let bad = DatasetsConfig {
            max_upload_bytes: 0,
            seed_dirs: vec![PathBuf::from("/no/such/dir/anywhere")],
            max_seed_files: 0,
            max_seed_bytes: 0,
            hf: HfConfig {
                endpoint: "ftp://x".into(),
                timeout_sec: 0,
                token_env: Some("SYNTHGATE_TEST_NO_SUCH_VAR".into()),
                ..HfConfig::default()
            },
        };
        bad.problems(&mut out);
        bad.env_problems(&|_| None, &mut out);
        let keys = [
            "datasets.max_upload_bytes",
            "datasets.max_seed_files",
            "datasets.seed_dirs[0]",
            "datasets.hf.endpoint",
            "datasets.hf.timeout_sec",
            "datasets.hf.token_env",
        ];
        assert_eq!(out.len(), keys.len(), "{out:?}");
        for (line, key) in out.iter().zip(keys) {
            assert!(line.contains(&format!("`{key}`")), "{line}");
        }
    }
}
