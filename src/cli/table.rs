//! The plain-text tables of `datasets list` and `jobs list`: a header, then one line a row,
//! each column padded to its widest cell (the last is not padded).

use std::fmt::Write as _;

/// `header` and `rows` as lines, each ending in a newline.
pub(crate) fn render<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let header = header.map(String::from);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up() {
        let rows = [["a".to_owned(), "long cell".to_owned(), "x".to_owned()]];
        assert_eq!(
            super::render(["ID", "NAME", "LAST"], &rows),
            "ID  NAME       LAST\na   long cell  x\n"
        );
    }
}
