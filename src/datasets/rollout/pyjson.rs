//! Python's `json` module and text-file reading, as DataDesigner 0.9.6 meets them under
//! CPython 3.11: `json.loads` and the
//! `open(path, encoding="utf-8")` text layer (strict UTF-8 with `UnicodeDecodeError` messages,
//! universal newlines, and the 8192-byte chunks a line iterator decodes).
//!
//! Parsing is serde_json's; what is Python's here is the text around it.

use serde_json::Value;

/// A `json.JSONDecodeError` (or a value Python accepts that a `serde_json::Value` cannot hold).
#[derive(Debug)]
pub(crate) struct JsonError {
    /// `error.msg`.
    pub msg: String,
    /// `str(error)`: the message with Python's `line L column C (char P)` suffix.
    pub full: String,
}

impl JsonError {
    fn at(msg: &str, doc: &str, byte_pos: usize) -> Self {
        let mut cut = byte_pos.min(doc.len());
        while !doc.is_char_boundary(cut) {
            cut -= 1;
        }
        let before = &doc[..cut];
        let pos = before.chars().count();
        let line = before.matches('\n').count() + 1;
        let col = match before.rfind('\n') {
            Some(nl) => before[nl + 1..].chars().count() + 1,
            None => pos + 1,
        };
        Self {
            msg: msg.to_owned(),
            full: format!("{msg}: line {line} column {col} (char {pos})"),
        }
    }
}

/// `json.loads(doc)`, by serde_json: the same values for the JSON agents write. Python's
/// messages are not reproduced (the warnings for a skipped file quote serde_json's), and what
/// Python accepts beyond JSON (`NaN`, `Infinity`) or beyond a `Value` (numbers past the float
/// range, lone surrogates, nesting past 128 levels) makes the file malformed here. A key given
/// twice keeps its first position and its last value, as in a Python dict.
pub(crate) fn loads(doc: &str) -> Result<Value, JsonError> {
    if doc.starts_with('\u{feff}') {
        return Err(JsonError::at(
            "Unexpected UTF-8 BOM (decode using utf-8-sig)",
            doc,
            0,
        ));
    }
    serde_json::from_str(doc).map_err(|e| {
        let full = e.to_string();
        let msg = match full.rfind(" at line ") {
            Some(cut) => full[..cut].to_owned(),
            None => full.clone(),
        };
        JsonError { msg, full }
    })
}

/// The size of the reads a Python text file's line iterator decodes at a time
/// (`TextIOWrapper._CHUNK_SIZE`).
const CHUNK: usize = 8192;

/// `str(UnicodeDecodeError)` for strict UTF-8 decoding of `buf` failing as `error` says;
/// positions are relative to `buf`, as Python's are to the bytes it was decoding.
fn decode_error(buf: &[u8], error: &std::str::Utf8Error) -> String {
    let start = error.valid_up_to();
    let (end, reason) = match error.error_len() {
        None => (buf.len(), "unexpected end of data"),
        Some(len) => {
            let lead = buf.get(start).copied().unwrap_or(0);
            let bad_start = matches!(lead, 0x80..=0xc1 | 0xf5..=0xff);
            (
                start + len,
                if len == 1 && bad_start {
                    "invalid start byte"
                } else {
                    "invalid continuation byte"
                },
            )
        }
    };
    if end - start <= 1 {
        let byte = buf.get(start).copied().unwrap_or(0);
        format!("'utf-8' codec can't decode byte 0x{byte:02x} in position {start}: {reason}")
    } else {
        format!(
            "'utf-8' codec can't decode bytes in position {start}-{}: {reason}",
            end - 1
        )
    }
}

/// `open(path, encoding="utf-8").read()`: the whole file decoded at once, `\r\n` and `\r`
/// turned into `\n`. The error is the `UnicodeDecodeError` message.
pub(crate) fn read_text(bytes: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| decode_error(bytes, &e))?;
    Ok(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// Why reading lines stopped early.
pub(crate) enum LinesError<E> {
    /// A `UnicodeDecodeError` message.
    Decode(String),
    /// What the line callback returned.
    Line(E),
}

/// `for line_number, line in enumerate(open(path, encoding="utf-8"), start=1)`: calls
/// `on_line` with each line (without its terminator) in order.
///
/// Python decodes the file 8192 bytes at a time and hands out the lines each decoded piece
/// completes before decoding the next, so a decode error late in a file comes only after the
/// lines before its piece were processed, and its position counts from the start of that
/// piece (plus any bytes of a character cut by the previous one).
pub(crate) fn for_each_line<E>(
    bytes: &[u8],
    mut on_line: impl FnMut(usize, &str) -> Result<(), E>,
) -> Result<(), LinesError<E>> {
    let mut pending: Vec<u8> = Vec::new();
    let mut text = String::new();
    let mut line_number = 0usize;
    let mut offset = 0usize;
    let mut scanned = 0usize;
    loop {
        let chunk = &bytes[offset..(offset + CHUNK).min(bytes.len())];
        offset += chunk.len();
        let at_eof = chunk.is_empty();
        let mut buf = std::mem::take(&mut pending);
        buf.extend_from_slice(chunk);
        match std::str::from_utf8(&buf) {
            Ok(s) => text.push_str(s),
            Err(e) if e.error_len().is_none() && !at_eof => {
                let valid = e.valid_up_to();
                text.push_str(std::str::from_utf8(&buf[..valid]).unwrap_or_default());
                pending = buf[valid..].to_vec();
            }
            Err(e) => return Err(LinesError::Decode(decode_error(&buf, &e))),
        }
        // Hand out every complete line; a trailing `\r` waits to see if `\n` follows. `scanned`
        // skips text already searched, so a long line costs linear time, not quadratic.
        let mut consumed = 0usize;
        loop {
            let from = scanned.max(consumed);
            let Some(rel) = text[from..].find(['\n', '\r']) else {
                scanned = text.len();
                break;
            };
            let at = from + rel;
            let is_cr = text.as_bytes()[at] == b'\r';
            if is_cr && at + 1 == text.len() && !at_eof {
                scanned = at;
                break;
            }
            let terminator = if is_cr && text.as_bytes().get(at + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            line_number += 1;
            on_line(line_number, &text[consumed..at]).map_err(LinesError::Line)?;
            consumed = at + terminator;
        }
        if consumed > 0 {
            text.drain(..consumed);
            scanned -= consumed;
        }
        if at_eof {
            if !text.is_empty() {
                line_number += 1;
                on_line(line_number, &text).map_err(LinesError::Line)?;
            }
            return Ok(());
        }
    }
}
