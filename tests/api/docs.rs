//! The README and `docs/` as a reader follows them: every relative link names a file that
//! exists, every `#anchor` a heading of its file, and the README stays a front page.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The markdown files a reader starts from: the README and everything in docs/.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut fence = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fence = !fence;
            }
            !fence && l.starts_with('#')
        })
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

/// The targets of `](target)` links, outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") {
                continue;
            }
            let (file, frag) = link.split_once('#').unwrap_or((&link, ""));
            let target: PathBuf = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            let name = page.strip_prefix(root()).unwrap().display().to_string();
            if !Path::new(&target).exists() {
                broken.push(format!("{name}: {link} (no such file)"));
                continue;
            }
            if !frag.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let headings = anchors(&std::fs::read_to_string(&target).unwrap());
                if !headings.iter().any(|a| a == frag) {
                    broken.push(format!("{name}: {link} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 300,
        "README.md has {lines} lines; the manual belongs in docs/"
    );
    for command in ["cargo run --release -- serve", "scripts/test"] {
        assert!(readme.contains(command), "README.md lost `{command}`");
    }
    for page in pages().iter().skip(1) {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        assert!(
            readme.contains(&format!("]({name})")),
            "README.md does not link {name}"
        );
    }
}
