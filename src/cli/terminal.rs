//! Server text on the terminal: every line the CLI prints passes [`safe`] (through [`say!`]
//! and [`note!`]), so nothing the server sends (a job name, an error code, a column name, a
//! JSON document) can move the cursor, rewrite earlier lines, retitle the window or reorder
//! text on the user's terminal: a job name is any key's to choose.
//!
//! Dangerous characters are written as `\uXXXX`: C0 controls other than newline and tab (ESC,
//! BEL, backspace, carriage return...), DEL, the C1 controls (U+009B is a CSI on many
//! terminals), and the Unicode bidirectional controls. Inside a JSON string `\uXXXX` is the
//! same character, so JSON output stays valid and means the same.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` may not reach a terminal as itself.
fn dangerous(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every dangerous character written as `\uXXXX`.
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(dangerous) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if dangerous(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `println!` through [`safe`].
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", $crate::cli::terminal::safe(&format!($($arg)*)))
    };
}

/// `eprintln!` through [`safe`].
macro_rules! note {
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::cli::terminal::safe(&format!($($arg)*)))
    };
}

/// `print!` through [`safe`].
macro_rules! say_raw {
    ($($arg:tt)*) => {
        print!("{}", $crate::cli::terminal::safe(&format!($($arg)*)))
    };
}

pub(crate) use {note, say, say_raw};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_but_keeps_text_and_json_valid() {
        assert_eq!(safe("plain ünïcode\n\tok"), "plain ünïcode\n\tok");
        assert!(matches!(safe("plain"), Cow::Borrowed(_)));
        assert_eq!(safe("a\u{1b}[2Jb"), "a\\u001b[2Jb");
        assert_eq!(
            safe("\u{9b}31m\u{7}\r\u{8}\u{7f}"),
            "\\u009b31m\\u0007\\u000d\\u0008\\u007f"
        );
        assert_eq!(safe("x\u{202e}y\u{2066}z"), "x\\u202ey\\u2066z");
        // A JSON document keeps its meaning.
        let doc = serde_json::json!({"name": "job\u{1b}]0;owned\u{7}\u{9b}"}).to_string();
        let shown = safe(&doc);
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back["name"], "job\u{1b}]0;owned\u{7}\u{9b}");
        assert!(!shown.contains('\u{1b}') && !shown.contains('\u{9b}'));
    }
}
