//! Server-side seed sources. STUB owned by `seed-resolution` until `seed-sources` replaces
//! this module (see `crate::datasets::resolve` for the signatures that must stay).

pub mod hf;
pub mod server;

/// The server-side sources a seed can resolve against. The stub has none.
#[derive(Debug, Clone, Default)]
pub struct SeedSources {}

impl SeedSources {
    /// From the server config. The stub configures nothing.
    pub fn from_config(_config: &crate::config::Config) -> Self {
        Self::none()
    }

    /// No server-side sources.
    pub fn none() -> Self {
        Self {}
    }
}
