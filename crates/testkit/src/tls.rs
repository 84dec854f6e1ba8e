//! The doubles over TLS, with HTTP/2 chosen by ALPN as hosted services serve (OpenAI,
//! Anthropic, Gemini; MCP servers behind a CDN or gateway), and `SETTINGS_MAX_CONCURRENT_STREAMS`
//! set to `max_streams`: a client that multiplexes every request over one connection meets that
//! cap here as it would there. HTTP/1.1 stays offered for clients without HTTP/2.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The doubles' TLS flags (`--tls --max-streams N --fixtures DIR`), flattened into each
/// binary's arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct TlsArgs {
    /// Serve HTTPS (HTTP/2 by ALPN, as hosted services do) with the test certificate of
    /// crates/testkit/fixtures, signed by its tls-ca.pem.
    #[arg(long)]
    pub tls: bool,
    /// With --tls: the streams one HTTP/2 connection may carry at once.
    #[arg(long, default_value_t = 100)]
    pub max_streams: u32,
    /// With --tls: where tls-cert.pem and tls-key.pem are (default: crates/testkit/fixtures of
    /// the checkout the binary was built in; a lent machine runs it from another).
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
}

impl TlsArgs {
    /// What the flags ask for: `None` without `--tls`.
    pub fn options(&self) -> Option<TlsOptions> {
        self.tls.then(|| match &self.fixtures {
            Some(dir) => TlsOptions::fixture_in(dir, self.max_streams),
            None => TlsOptions::fixture(self.max_streams),
        })
    }

    /// `https` with `--tls`, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }
}

/// Where the server's certificate and key are, and the streams a connection may carry.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` of each HTTP/2 connection.
    pub max_streams: u32,
}

impl TlsOptions {
    /// The test certificate of `crates/testkit/fixtures` (for `localhost` and `127.0.0.1`,
    /// signed by `tls-ca.pem` there), with `max_streams` streams per connection.
    pub fn fixture(max_streams: u32) -> Self {
        Self::fixture_in(
            &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
            max_streams,
        )
    }

    /// [`TlsOptions::fixture`] from a copy of the fixtures in `dir`: a binary run from another
    /// checkout than the one it was built in (a bench on a lent machine) finds them there.
    pub fn fixture_in(dir: &std::path::Path, max_streams: u32) -> Self {
        Self {
            cert: dir.join("tls-cert.pem"),
            key: dir.join("tls-key.pem"),
            max_streams,
        }
    }

    /// The CA that signed [`TlsOptions::fixture`]'s certificate, for clients to trust.
    pub fn fixture_ca() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/tls-ca.pem")
    }

    fn acceptor(&self) -> io::Result<TlsAcceptor> {
        let bad =
            |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .map_err(|e| bad(&e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&e))?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| bad(&e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&e))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| bad(&e))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// Serves `app` over TLS on `listener` until `stop` fires, with `TCP_NODELAY` as real servers
/// set it.
pub async fn serve_router(
    listener: TcpListener,
    app: axum::Router,
    stop: CancellationToken,
    tls: TlsOptions,
) -> io::Result<()> {
    let acceptor = tls.acceptor()?;
    let connections = TaskTracker::new();
    loop {
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(_) => continue,
            },
            () = stop.cancelled() => break,
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, app, stop) = (acceptor.clone(), app.clone(), stop.clone());
        let max_streams = tls.max_streams;
        connections.spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let mut builder = Builder::new(TokioExecutor::new());
            builder.http2().max_concurrent_streams(max_streams);
            let conn =
                builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    connections.close();
    connections.wait().await;
    Ok(())
}
