//! `llm-code` answers: the code of the model's last fenced code block, as DataDesigner's
//! `CodeResponseRecipe` reads it (Markdown fences, the last block wins, a block tagged with
//! another language is refused), so a reply without usable code fails instead of storing prose.

/// The code in `text` for `code_lang` (`python`, `sql:postgres`, ...), trimmed; `Err` is
/// DataDesigner's parser message, which feeds the correction and restart steps.
pub(crate) fn extract_code(text: &str, code_lang: &str) -> Result<String, String> {
    // DataDesigner's `CodeLang.parse_lang`: the part before the dialect.
    let syntax = code_lang.split(':').next().unwrap_or(code_lang);
    let Some((lang, code)) = code_blocks(text).pop() else {
        return Err("No parsable code response.".to_owned());
    };
    if !lang.is_empty() && lang != syntax {
        return Err(format!(
            "Responded with code not matching the requested syntax ({syntax})."
        ));
    }
    Ok(code.trim().to_owned())
}

/// Closed fenced code blocks (```` ``` ```` at the start of a line, up to three spaces in), as
/// `(language, body)`; the language is the info string's first word, `""` when there is none.
/// An unclosed fence is not a block (Python-Markdown's rule).
fn code_blocks(text: &str) -> Vec<(&str, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(&str, Vec<&str>)> = None;
    for line in text.lines() {
        match (&mut open, fence(line)) {
            (None, Some(info)) => {
                let lang = info.split_whitespace().next().unwrap_or("");
                open = Some((lang, Vec::new()));
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => {
                if let Some((lang, body)) = open.take() {
                    blocks.push((lang, body.join("\n")));
                }
            }
            (Some((_, body)), _) => body.push(line),
            (None, None) => {}
        }
    }
    blocks
}

/// The info string after an opening or closing fence on `line`, if it is one.
fn fence(line: &str) -> Option<&str> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    trimmed.strip_prefix("```")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_follows_datadesigners_recipe() {
        let two = "Here:\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```\n";
        assert_eq!(extract_code(two, "python").unwrap(), "print(2)");
        assert_eq!(
            extract_code("```\nselect 3\n```", "sql:postgres").unwrap(),
            "select 3"
        );
        assert_eq!(
            extract_code("```sql\n  select 1;\n```", "sql:sqlite").unwrap(),
            "select 1;"
        );
        assert_eq!(
            extract_code("x = 1", "python").unwrap_err(),
            "No parsable code response."
        );
        assert_eq!(
            extract_code("```python\nunclosed", "python").unwrap_err(),
            "No parsable code response."
        );
        assert_eq!(
            extract_code("```py\nx\n```", "python").unwrap_err(),
            "Responded with code not matching the requested syntax (python)."
        );
        assert_eq!(
            extract_code("```python\nx\n```", "sql:ansi").unwrap_err(),
            "Responded with code not matching the requested syntax (sql)."
        );
    }
}
