//! tracing-subscriber set-up: pretty or JSON lines, filtered by `RUST_LOG` or the config level.

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LoggingConfig};

/// Installs the global subscriber. Call once, early in `main`.
pub fn init(cfg: &LoggingConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_writer(std::io::stderr);
    // A second init (tests start many apps in one process) is not an error worth failing on.
    let _ = match cfg.format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// For tests: logs at `warn` (or `RUST_LOG`) to the test writer, once per process.
pub fn init_for_tests() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}
