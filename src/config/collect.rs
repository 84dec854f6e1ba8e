//! Every deserialization problem of a config document in one pass, so `config check` (and a
//! refused `serve`) lists them all instead of one per run.
//!
//! serde stops at the first error. So the document is deserialized, the offending node (an
//! unknown key, a value of the wrong type, an unknown variant) is noted and removed, and the
//! rest is tried again, up to [`MAX_PROBLEMS`] times. A removed list item shifts the indexes
//! after it; the removals are counted per list so that later problems still name the key as
//! the file writes it.

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

/// Problems reported before giving up on the rest.
const MAX_PROBLEMS: usize = 100;

/// One step of a key path, with list indexes as the file writes them.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// What [`deserialize_all`] found.
pub(super) struct Collected<T> {
    /// `T` from the document without the keys that were wrong (they take their defaults);
    /// `None` when even that does not deserialize, or too many were wrong.
    pub(super) value: Option<T>,
    /// Each problem, naming its key.
    pub(super) problems: Vec<String>,
    /// The keys the problems are at, so checks that run afterwards skip what is reported.
    pub(super) keys: Vec<String>,
}

/// `T` from `value`, with every problem that stops deserializing it.
pub(super) fn deserialize_all<T: DeserializeOwned>(mut value: Value) -> Collected<T> {
    let mut problems = Vec::new();
    let mut paths = Vec::new();
    // Per list (by its path as written), the original indexes removed from it.
    let mut removed: Vec<(Vec<Step>, usize)> = Vec::new();
    loop {
        match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(v) => {
                return Collected {
                    value: Some(v),
                    problems,
                    keys: paths,
                };
            }
            Err(e) => {
                // The path as deserialized (in the document with removals), then as written.
                let seen: Vec<Step> = e
                    .path()
                    .iter()
                    .filter_map(|s| match s {
                        Segment::Seq { index } => Some(Step::Index(*index)),
                        Segment::Map { key } => Some(Step::Key(key.clone())),
                        Segment::Enum { .. } | Segment::Unknown => None,
                    })
                    .collect();
                let written = as_written(&seen, &removed);
                let key = display(&written);
                problems.push(format!("config key `{key}`: {}", e.inner()));
                paths.push(key);
                if problems.len() >= MAX_PROBLEMS || seen.is_empty() || !remove(&mut value, &seen) {
                    return Collected {
                        value: None,
                        problems,
                        keys: paths,
                    };
                }
                if let Some(Step::Index(_)) = written.last() {
                    removed.push((written[..written.len() - 1].to_vec(), index_of(&written)));
                }
            }
        }
    }
}

fn index_of(path: &[Step]) -> usize {
    match path.last() {
        Some(Step::Index(i)) => *i,
        _ => 0,
    }
}

/// `seen` with each list index moved past the items removed from that list before it.
fn as_written(seen: &[Step], removed: &[(Vec<Step>, usize)]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(seen.len());
    for step in seen {
        match step {
            Step::Index(i) => {
                let mut gone: Vec<usize> = removed
                    .iter()
                    .filter(|(list, _)| *list == out)
                    .map(|(_, j)| *j)
                    .collect();
                gone.sort_unstable();
                let mut index = *i;
                for j in gone {
                    if j <= index {
                        index += 1;
                    }
                }
                out.push(Step::Index(index));
            }
            key => out.push(key.clone()),
        }
    }
    out
}

/// `a.b[0].c`, as messages name keys.
fn display(path: &[Step]) -> String {
    if path.is_empty() {
        return "(top level)".to_owned();
    }
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Removes the node at `path`; false when there is none.
fn remove(value: &mut Value, path: &[Step]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut node = value;
    for step in parents {
        node = match (step, node) {
            (Step::Key(k), Value::Object(m)) => match m.get_mut(k) {
                Some(v) => v,
                None => return false,
            },
            (Step::Index(i), Value::Array(a)) => match a.get_mut(*i) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, node) {
        (Step::Key(k), Value::Object(m)) => m.remove(k).is_some(),
        (Step::Index(i), Value::Array(a)) if *i < a.len() => {
            a.remove(*i);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only deserialized")]
    struct Item {
        name: String,
        #[serde(default)]
        n: u32,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only deserialized")]
    struct Doc {
        #[serde(default)]
        items: Vec<Item>,
        #[serde(default)]
        flag: bool,
    }

    #[test]
    fn keys_after_a_removed_list_item_keep_their_written_index() {
        let got = deserialize_all::<Doc>(json!({
            "items": [{"n": 1}, {"name": "b", "n": "x"}, {"name": "c", "extra": 1}],
            "flag": "yes",
        }));
        assert!(got.value.is_some());
        assert_eq!(
            got.keys,
            ["items[0]", "items[1].n", "items[2].extra", "flag"],
            "{:#?}",
            got.problems
        );
        assert!(got.problems[0].contains("missing field `name`"));
    }

    #[test]
    fn the_top_level_is_named_and_a_hopeless_document_gives_up() {
        let got = deserialize_all::<Doc>(json!("a string"));
        assert!(got.value.is_none());
        assert_eq!(got.keys, ["(top level)"]);
    }
}
