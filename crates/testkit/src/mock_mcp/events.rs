//! The events file: one short line per MCP request the mock saw, so a test can count how often
//! the gateway initialized, listed and called, even across server processes it started itself.
//!
//! ```text
//! init 4242
//! list 4242
//! call 4242 echo
//! trace 4242 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//! trace-header 4242 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//! cancel 4242 slow
//! ```

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// An append-only events file shared by every session of one server.
#[derive(Debug)]
pub(super) struct EventLog {
    /// Where the lines go (for error messages).
    path: PathBuf,
    /// Opened with `O_APPEND`: each line is one `write`, so lines from several processes that
    /// share the file interleave whole. The mutex only orders this process's own writers.
    file: Mutex<File>,
    /// This process's id, the second word of every line.
    pid: u32,
}

impl EventLog {
    /// Opens (creating if needed) `path` for appending. Failing here, at start-up, is better
    /// than a test that waits for lines that never come.
    pub(super) fn open(path: &Path) -> std::io::Result<Self> {
        let file = File::options().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
            pid: std::process::id(),
        })
    }

    /// Appends `<kind> <pid>[ <detail>]`. Blocking I/O on the async path is fine here: the line
    /// is a few bytes, and a test double favours "written before the answer" over throughput.
    pub(super) fn record(&self, kind: &str, detail: Option<&str>) {
        let line = match detail {
            Some(d) => format!("{kind} {} {d}\n", self.pid),
            None => format!("{kind} {}\n", self.pid),
        };
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
            let path = self.path.display();
            tracing::error!(%path, error = %e, "cannot write the events file");
        }
    }
}
