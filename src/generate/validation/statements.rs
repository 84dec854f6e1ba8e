//! Counting the statements of Python source as `ast.walk` would (`ast.stmt` nodes), for the
//! pylint-style score of Python code validators. Only code ruff parsed without a syntax error
//! gets here (a syntax error scores 0 whatever the count).
//!
//! A tokenizer, not a parser: it joins physical lines into logical ones (brackets, strings,
//! backslashes), splits them at top-level `;`, and counts each simple statement and each
//! compound header (`if`, `elif`, `for`, `while`, `try`, `with`, `def`, `class`, `match`)
//! once, plus a body written after the header's colon on the same line. `else:`, `except`,
//! `finally:`, `case` and decorators are not statements in Python's AST either. Code this
//! misreads only shifts the score, never `is_valid`.

/// The number of `ast.stmt` nodes in `source` (0 for empty source).
pub(super) fn count_statements(source: &str) -> usize {
    logical_lines(source)
        .iter()
        .map(|line| {
            split_top(line, ';')
                .iter()
                .map(|s| count_simple_or_compound(s))
                .sum::<usize>()
        })
        .sum()
}

/// Logical lines with strings replaced by `""` and comments removed.
fn logical_lines(source: &str) -> Vec<String> {
    let chars: Vec<char> = source.chars().collect();
    let mut lines = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '\'' | '"' => {
                let triple = i + 2 < chars.len() && chars[i + 1] == c && chars[i + 2] == c;
                i += if triple { 3 } else { 1 };
                while i < chars.len() {
                    if chars[i] == '\\' {
                        i += 2;
                        continue;
                    }
                    if triple {
                        if chars[i] == c
                            && chars.get(i + 1) == Some(&c)
                            && chars.get(i + 2) == Some(&c)
                        {
                            i += 3;
                            break;
                        }
                    } else if chars[i] == c || chars[i] == '\n' {
                        i += 1;
                        break;
                    }
                    i += 1;
                }
                cur.push_str("\"\"");
                continue;
            }
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                cur.push(' ');
                i += 2;
                continue;
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '\n' if depth == 0 => {
                lines.push(std::mem::take(&mut cur));
                i += 1;
                continue;
            }
            '\n' => {
                cur.push(' ');
                i += 1;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        i += 1;
    }
    lines.push(cur);
    lines.retain(|l| !l.trim().is_empty());
    lines
}

/// Splits at `sep` outside brackets (strings are gone already).
fn split_top(line: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in line.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            c if c == sep && depth == 0 => {
                parts.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&line[start..]);
    parts
}

fn first_word(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The index just past the colon ending a compound header, skipping `lambda` colons.
fn header_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut lambdas = 0usize;
    let bytes = s.as_bytes();
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            'l' if depth == 0
                && s[i..].starts_with("lambda")
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'))
                && !s[i + 6..].starts_with(|c: char| c.is_alphanumeric() || c == '_') =>
            {
                lambdas += 1;
            }
            // `:=` is the walrus operator, not a header's end.
            ':' if depth == 0 && !s[i + 1..].starts_with('=') => {
                if lambdas == 0 {
                    return Some(i + 1);
                }
                lambdas -= 1;
            }
            _ => {}
        }
    }
    None
}

fn count_simple_or_compound(part: &str) -> usize {
    let s = part.trim();
    if s.is_empty() {
        return 0;
    }
    let mut word = first_word(s);
    let mut rest = s;
    if word == "async" {
        rest = s[5..].trim_start();
        word = first_word(rest);
    }
    let header = match word {
        "if" | "elif" | "for" | "while" | "try" | "with" | "def" | "class" => Some(1),
        "else" | "except" | "finally" | "case" => Some(0),
        // `match` is a soft keyword: a header only when the line is `match <subject>:`.
        "match"
            if header_end(rest).is_some_and(|e| rest[e..].trim().is_empty())
                && !rest[5..].trim_start().starts_with(['=', '.', ')', ',']) =>
        {
            Some(1)
        }
        _ if s.starts_with('@') => return 0,
        _ => None,
    };
    match header {
        Some(own) => {
            let body = header_end(rest).map_or("", |e| &rest[e..]);
            own + count_simple_or_compound(body)
        }
        None => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::count_statements;

    /// Counts checked against CPython's `sum(isinstance(n, ast.stmt) for n in ast.walk(...))`.
    #[test]
    fn counts_like_python_ast() {
        let cases = [
            ("", 0),
            ("x = 1\nif x == None:\n    pass\n", 3),
            ("def f():\n    l = 1\n    return l\n", 3),
            ("import os\nx = 1\n", 2),
            (
                "@dec\ndef f(a,\n      b):\n    '''doc\n    more: x'''\n    return a  # c: d\n",
                3,
            ),
            ("if a: b; c\nelif d:\n    e\nelse:\n    f\n", 6),
            (
                "try:\n    x()\nexcept E as e:\n    pass\nfinally:\n    y = {1: 2}\n",
                4,
            ),
            ("f = lambda x: x\nfor i in range(3): print(i)\n", 3),
            (
                "class A:\n    x: int = 1\n    async def g(self):\n        await h()\n",
                4,
            ),
            (
                "match p:\n    case 1:\n        pass\n    case _:\n        z = 2\n",
                3,
            ),
            ("s = 'a;b' \\\n    + \"c\"\nwhile (n := 1): break\n", 3),
        ];
        for (src, want) in cases {
            assert_eq!(count_statements(src), want, "{src:?}");
        }
    }
}
