//! `directory` and `file_contents` rows, as DataDesigner's `DirectorySeedReader` and
//! `FileContentsSeedReader` build them: one row per matching file, sorted by relative path,
//! with `source_kind` (`directory_file` | `file_contents`), `source_path` (the canonical
//! directory joined with the relative path), `relative_path`, `file_name`, and for
//! `file_contents` the file's text in `content`.
//!
//! Text is read as Python's text mode reads it: decoded in the source's `encoding`, then with
//! universal newlines (`\r\n` and `\r` become `\n`). synthgate decodes UTF-8 (also
//! `utf-8-sig`, which drops a leading BOM), Latin-1 and ASCII; other encodings are refused.

use serde_json::{Map, Value};

use super::fs::FoundFile;

/// A text encoding synthgate can decode, by the name Python's codec registry gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// `utf-8` and its aliases.
    Utf8,
    /// `utf-8-sig`: UTF-8 with a leading byte-order mark removed.
    Utf8Sig,
    /// `latin-1` (`iso-8859-1`): each byte is the code point of the same value.
    Latin1,
    /// `ascii`: bytes above 127 are an error.
    Ascii,
}

impl Encoding {
    /// Looks `name` up as Python's `codecs.lookup` does for these codecs: case-insensitive,
    /// `-` and spaces the same as `_`, with the usual aliases. `None` for anything else.
    pub(crate) fn lookup(name: &str) -> Option<Self> {
        let norm: String = name
            .trim()
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c == '-' || c == ' ' { '_' } else { c })
            .collect();
        match norm.as_str() {
            "utf_8" | "utf8" | "u8" | "utf" | "cp65001" | "utf8_ucs2" | "utf8_ucs4" => {
                Some(Self::Utf8)
            }
            "utf_8_sig" | "utf8_sig" => Some(Self::Utf8Sig),
            "latin_1" | "latin1" | "latin" | "l1" | "iso_8859_1" | "iso8859_1" | "8859"
            | "cp819" | "iso_ir_100" | "iso_8859_1:1987" | "csisolatin1" | "ibm819" => {
                Some(Self::Latin1)
            }
            "ascii" | "us_ascii" | "646" | "us" | "ansi_x3.4_1968" | "ansi_x3.4_1986"
            | "ansi_x3_4_1968" | "cp367" | "csascii" | "ibm367" | "iso646_us"
            | "iso_646.irv:1991" | "iso_ir_6" => Some(Self::Ascii),
            _ => None,
        }
    }

    /// Decodes `bytes`; on failure, the byte offset of the first undecodable byte.
    pub(crate) fn decode(self, bytes: Vec<u8>) -> Result<String, usize> {
        match self {
            Self::Utf8 => String::from_utf8(bytes).map_err(|e| e.utf8_error().valid_up_to()),
            Self::Utf8Sig => {
                let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
                std::str::from_utf8(body)
                    .map(str::to_owned)
                    .map_err(|e| e.valid_up_to())
            }
            Self::Latin1 => Ok(bytes.iter().map(|&b| char::from(b)).collect()),
            Self::Ascii => match bytes.iter().position(|b| !b.is_ascii()) {
                Some(at) => Err(at),
                // All ASCII, so valid UTF-8.
                None => String::from_utf8(bytes).map_err(|e| e.utf8_error().valid_up_to()),
            },
        }
    }
}

/// Python's universal newlines on read: `\r\n` and a lone `\r` become `\n`.
pub(crate) fn universal_newlines(text: String) -> String {
    if !text.contains('\r') {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' {
            if chars.peek() == Some(&'\n') {
                chars.next();
            }
            out.push('\n');
        } else {
            out.push(c);
        }
    }
    out
}

/// The metadata row of one file (DataDesigner's `_build_metadata_record`). `root` is the
/// canonical directory the source names, as DataDesigner resolves it.
pub(crate) fn metadata_row(source_kind: &str, root: &str, file: &FoundFile) -> Map<String, Value> {
    let file_name = file
        .relative
        .rsplit('/')
        .next()
        .unwrap_or(&file.relative)
        .to_owned();
    let source_path = if root.ends_with('/') {
        format!("{root}{}", file.relative)
    } else {
        format!("{root}/{}", file.relative)
    };
    let mut row = Map::new();
    row.insert("source_kind".into(), Value::String(source_kind.to_owned()));
    row.insert("source_path".into(), Value::String(source_path));
    row.insert("relative_path".into(), Value::String(file.relative.clone()));
    row.insert("file_name".into(), Value::String(file_name));
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_looked_up_like_python_codecs() {
        assert_eq!(Encoding::lookup("UTF-8"), Some(Encoding::Utf8));
        assert_eq!(Encoding::lookup("utf8"), Some(Encoding::Utf8));
        assert_eq!(Encoding::lookup("utf-8-sig"), Some(Encoding::Utf8Sig));
        assert_eq!(Encoding::lookup("ISO-8859-1"), Some(Encoding::Latin1));
        assert_eq!(Encoding::lookup("latin-1"), Some(Encoding::Latin1));
        assert_eq!(Encoding::lookup("us-ascii"), Some(Encoding::Ascii));
        assert_eq!(Encoding::lookup("utf-16"), None);
        assert_eq!(Encoding::lookup("cp1252"), None);
    }

    #[test]
    fn decoding_reports_the_first_bad_byte() {
        assert_eq!(Encoding::Utf8.decode(b"ok\xff".to_vec()), Err(2));
        assert_eq!(Encoding::Ascii.decode(b"a\xe9".to_vec()), Err(1));
        assert_eq!(
            Encoding::Latin1.decode(b"caf\xe9".to_vec()).unwrap(),
            "café"
        );
        assert_eq!(
            Encoding::Utf8Sig
                .decode(b"\xEF\xBB\xBFhi".to_vec())
                .unwrap(),
            "hi"
        );
        // Plain utf-8 keeps the BOM, as Python does.
        assert_eq!(
            Encoding::Utf8.decode(b"\xEF\xBB\xBFhi".to_vec()).unwrap(),
            "\u{feff}hi"
        );
    }

    #[test]
    fn newlines_are_universal() {
        assert_eq!(universal_newlines("a\r\nb\rc\n".into()), "a\nb\nc\n");
        assert_eq!(universal_newlines("\r\r\n".into()), "\n\n");
    }

    #[test]
    fn metadata_rows_have_datadesigners_columns_in_order() {
        let f = FoundFile {
            relative: "sub/a.txt".into(),
            canonical: "/srv/seeds/docs/sub/a.txt".into(),
            size: 1,
        };
        let row = metadata_row("directory_file", "/srv/seeds/docs", &f);
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["source_kind", "source_path", "relative_path", "file_name"]
        );
        assert_eq!(row["source_path"], "/srv/seeds/docs/sub/a.txt");
        assert_eq!(row["file_name"], "a.txt");
    }
}
