//! The last step before the log: every configured secret, in every form it may take, blanked.

use std::io::{self, Write};
use std::sync::Arc;

use base64::Engine as _;
use tracing_subscriber::fmt::MakeWriter;

/// What a secret becomes in the log.
const REDACTED: &str = "[redacted]";

/// A [`MakeWriter`] for standard error that blanks secrets: each event is formatted into a
/// buffer, cleaned, then written in one piece.
#[derive(Debug, Clone)]
pub struct Redactor {
    /// Every form of every secret, longest first (so a longer form is blanked whole before a
    /// shorter one it contains).
    needles: Arc<Vec<String>>,
}

impl Redactor {
    /// A redactor for `secrets`, each in every form it may be quoted in
    /// ([`crate::config::secret_forms`]) and, paired with each of `client_ids`, as an HTTP Basic
    /// credential (RFC 6749 2.3.1).
    pub fn new(secrets: &[String], client_ids: &[String]) -> Self {
        let form = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let mut needles: Vec<String> = Vec::new();
        for s in secrets {
            needles.extend(crate::config::secret_forms(s));
            for id in client_ids {
                let pair = format!("{}:{}", form(id), form(s));
                needles.push(base64::engine::general_purpose::STANDARD.encode(pair));
            }
        }
        needles.retain(|n| !n.is_empty());
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        needles.dedup();
        Self {
            needles: Arc::new(needles),
        }
    }

    /// `text` with every secret replaced.
    pub fn clean(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for n in self.needles.iter() {
            if out.contains(n.as_str()) {
                out = out.replace(n.as_str(), REDACTED);
            }
        }
        out
    }
}

impl<'a> MakeWriter<'a> for Redactor {
    type Writer = RedactingLine;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingLine {
            redactor: self.clone(),
            buf: Vec::new(),
        }
    }
}

/// One event's output, written to standard error, cleaned, when dropped.
pub struct RedactingLine {
    redactor: Redactor,
    buf: Vec<u8>,
}

impl Write for RedactingLine {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactingLine {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.buf);
        let cleaned = self.redactor.clean(&text);
        // Nowhere to report a failed log write.
        let _ = io::stderr().lock().write_all(cleaned.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_a_secret_is_blanked() {
        let r = Redactor::new(&["s3cret+/=value".into()], &["client-1".into()]);
        let basic =
            base64::engine::general_purpose::STANDARD.encode("client-1:s3cret%2B%2F%3Dvalue");
        let line = format!(
            "token request failed: grant_type=client_credentials&client_secret=s3cret%2B%2F%3Dvalue \
             (raw s3cret+/=value, header Basic {basic})"
        );
        let cleaned = r.clean(&line);
        assert!(!cleaned.contains("s3cret"), "{cleaned}");
        assert!(!cleaned.contains(&basic), "{cleaned}");
        assert_eq!(cleaned.matches(REDACTED).count(), 3, "{cleaned}");
        assert_eq!(r.clean("nothing to hide"), "nothing to hide");
    }
}
