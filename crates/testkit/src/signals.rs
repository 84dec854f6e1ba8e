//! Stopping the test-double binaries on SIGINT or SIGTERM, so benches and tests can end them
//! gracefully.

use tokio_util::sync::CancellationToken;

/// Cancels `token` on the first SIGINT or SIGTERM. Returns when that happened or when the
/// token was cancelled by someone else (the server ended on its own).
pub async fn watch_signals(token: CancellationToken) {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!(signal = "SIGINT", "shutdown requested"),
        () = term => tracing::info!(signal = "SIGTERM", "shutdown requested"),
        () = token.cancelled() => return,
    }
    token.cancel();
}
