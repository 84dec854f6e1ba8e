//! `synthgate healthcheck`: the container health probe. The image has no curl, so the binary
//! checks itself: one GET with a short timeout, success on any 2xx.

use std::process::ExitCode;
use std::time::Duration;

use super::client::{error_chain, install_crypto_provider};
use super::terminal::note;

/// The whole probe, connect included, must finish within this.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Arguments of `synthgate healthcheck`.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthcheckArgs {
    /// Liveness URL to probe.
    #[arg(long, default_value = "http://127.0.0.1:8080/healthz")]
    pub url: String,
}

/// Exit code 0 when the URL answers 2xx within 3 s, 1 otherwise (reason on stderr).
pub async fn healthcheck(args: HealthcheckArgs) -> anyhow::Result<ExitCode> {
    match probe(&args.url).await {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(reason) => {
            note!("unhealthy: {reason}");
            Ok(ExitCode::FAILURE)
        }
    }
}

async fn probe(url: &str) -> Result<(), String> {
    install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let response = client.get(url).send().await.map_err(|e| {
        if e.is_timeout() {
            format!("{url} did not answer within {}s", TIMEOUT.as_secs())
        } else if e.is_builder() {
            format!("invalid URL {url:?}")
        } else {
            format!("{url}: {}", error_chain(&e))
        }
    })?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("{url} answered {status}"))
    }
}
