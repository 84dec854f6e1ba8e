//! The response cache's modes (issue 51, DataDesigner #360): whether a job's model calls are
//! answered from, and written to, the cache of its API key.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How a job uses the response cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Every call goes to the model; nothing is cached.
    #[default]
    Off,
    /// A call whose answer is cached is answered from the cache; the others go to the model and
    /// their answers are cached.
    ReadWrite,
    /// Every call goes to the model and its answer replaces the cached one: a cache renewed.
    Refresh,
}

impl CacheMode {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::ReadWrite => "read_write",
            Self::Refresh => "refresh",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Off, Self::ReadWrite, Self::Refresh]
            .into_iter()
            .find(|m| m.as_str() == s)
    }

    /// Cached answers are read.
    pub fn reads(self) -> bool {
        self == Self::ReadWrite
    }

    /// Answers from the model are written.
    pub fn writes(self) -> bool {
        self != Self::Off
    }
}
