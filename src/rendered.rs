//! Files written out from stored rows and kept on disk for a while: a datastore file read in
//! several ranges (`HfFileSystem` reads a Parquet footer first), a finished job's export
//! resumed with `Range`. The stored form is rows, so the bytes are written once, then served
//! by a file server that knows ranges and lengths (`tower_http`'s `ServeFile`).

use std::collections::VecDeque;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// Renderings each cache keeps on disk (the oldest file goes when one more is kept).
const KEPT: usize = 8;

/// Bytes written out: a temporary file, removed when the last reader drops it.
#[derive(Debug)]
pub struct Rendered {
    /// Where the bytes are.
    pub path: tempfile::TempPath,
    /// How many.
    pub size: u64,
    /// Hex sha256 of the bytes.
    pub sha256: String,
}

/// Writes a rendering: bytes in, then [`RenderWriter::finish`].
pub struct RenderWriter {
    out: std::io::BufWriter<std::fs::File>,
    path: tempfile::TempPath,
    hash: Sha256,
    size: u64,
}

impl RenderWriter {
    /// A new temporary file in `dir` (removed again if the writer is dropped unfinished).
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        let (file, path) = tempfile::Builder::new()
            .prefix("synthgate-render-")
            .tempfile_in(dir)?
            .into_parts();
        Ok(Self {
            out: std::io::BufWriter::new(file),
            path,
            hash: Sha256::new(),
            size: 0,
        })
    }

    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hash.update(bytes);
        self.size += bytes.len() as u64;
        self.out.write_all(bytes)
    }

    pub fn finish(mut self) -> std::io::Result<Rendered> {
        self.out.flush()?;
        Ok(Rendered {
            path: self.path,
            size: self.size,
            sha256: hex::encode(self.hash.finalize()),
        })
    }
}

/// The last few renderings, by key, newest last.
#[derive(Debug)]
pub struct RenderCache<K>(Mutex<VecDeque<(K, Arc<Rendered>)>>);

impl<K> Default for RenderCache<K> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

impl<K: PartialEq> RenderCache<K> {
    pub fn get(&self, key: &K) -> Option<Arc<Rendered>> {
        let cache = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.iter().find(|(k, _)| k == key).map(|(_, r)| r.clone())
    }

    pub fn put(&self, key: K, rendered: Arc<Rendered>) {
        let mut cache = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.retain(|(k, _)| *k != key);
        cache.push_back((key, rendered));
        while cache.len() > KEPT {
            cache.pop_front();
        }
    }
}
