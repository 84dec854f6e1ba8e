//! The column dependency graph: a stable topological order, the cycles when there is none,
//! and "did you mean" suggestions for unknown names.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Orders nodes so each comes after its dependencies. `deps[i]` lists the nodes `i` reads;
/// `priority[i]` breaks ties (lower first: seed columns, then config order).
///
/// Returns the cycles (as node paths `a, b, ..., a` where each reads the next) when the
/// graph has any.
pub(crate) fn topological_order(
    deps: &[Vec<usize>],
    priority: &[usize],
) -> Result<Vec<usize>, Vec<Vec<usize>>> {
    let n = deps.len();
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut pending: Vec<usize> = vec![0; n];
    for (node, ds) in deps.iter().enumerate() {
        for &d in ds {
            readers[d].push(node);
            pending[node] += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..n)
        .filter(|&i| pending[i] == 0)
        .map(|i| Reverse((priority[i], i)))
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse((_, node))) = ready.pop() {
        order.push(node);
        for &r in &readers[node] {
            pending[r] -= 1;
            if pending[r] == 0 {
                ready.push(Reverse((priority[r], r)));
            }
        }
    }
    if order.len() == n {
        Ok(order)
    } else {
        Err(find_cycles(deps, priority, &pending))
    }
}

/// Finds distinct cycles among the nodes Kahn's algorithm could not place.
fn find_cycles(deps: &[Vec<usize>], priority: &[usize], pending: &[usize]) -> Vec<Vec<usize>> {
    let mut alive: Vec<bool> = pending.iter().map(|p| *p > 0).collect();
    let mut starts: Vec<usize> = (0..deps.len()).filter(|&i| alive[i]).collect();
    starts.sort_by_key(|&i| priority[i]);
    let mut cycles = Vec::new();
    for start in starts {
        if !alive[start] {
            continue;
        }
        if let Some(cycle) = cycle_from(start, deps, &alive) {
            for &node in &cycle {
                alive[node] = false;
            }
            cycles.push(rotate_to_first(cycle, priority));
        }
    }
    cycles
}

/// Depth-first search from `start` over alive nodes; returns the first cycle met (without
/// repeating its first node).
fn cycle_from(start: usize, deps: &[Vec<usize>], alive: &[bool]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; deps.len()];
    // Explicit stack of (node, next dependency index) so deep graphs cannot overflow.
    let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
    mark[start] = Mark::OnPath;
    while let Some(&mut (node, ref mut next)) = stack.last_mut() {
        match deps[node].get(*next).copied() {
            Some(d) => {
                *next += 1;
                if !alive[d] {
                    continue;
                }
                match mark[d] {
                    Mark::OnPath => {
                        let pos = stack.iter().position(|(n, _)| *n == d).unwrap_or(0);
                        return Some(stack[pos..].iter().map(|(n, _)| *n).collect());
                    }
                    Mark::New => {
                        mark[d] = Mark::OnPath;
                        stack.push((d, 0));
                    }
                    Mark::Done => {}
                }
            }
            None => {
                mark[node] = Mark::Done;
                stack.pop();
            }
        }
    }
    None
}

/// Starts the cycle at its highest-priority node, and closes it (`a, b, a`).
fn rotate_to_first(mut cycle: Vec<usize>, priority: &[usize]) -> Vec<usize> {
    let first = (0..cycle.len())
        .min_by_key(|&i| priority[cycle[i]])
        .unwrap_or(0);
    cycle.rotate_left(first);
    if let Some(&head) = cycle.first() {
        cycle.push(head);
    }
    cycle
}

/// Known names close to `name` (edit distance ≤ 2, or differing only in case), best first.
pub(crate) fn close_names<'a>(
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = known
        .into_iter()
        .filter_map(|k| {
            let d = if k.eq_ignore_ascii_case(name) {
                0
            } else {
                edit_distance(name, k)
            };
            (d <= 2.min(name.chars().count().max(1))).then_some((d, k))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, k)| k).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_stable_and_respects_dependencies() {
        // 0 reads 2, 1 reads nothing, 2 reads nothing, 3 reads 0.
        let deps = vec![vec![2], vec![], vec![], vec![0]];
        assert_eq!(
            topological_order(&deps, &[0, 1, 2, 3]).unwrap(),
            vec![1, 2, 0, 3]
        );
        // Priority puts node 2 first (a seed column).
        assert_eq!(
            topological_order(&deps, &[1, 2, 0, 3]).unwrap(),
            vec![2, 0, 1, 3]
        );
    }

    #[test]
    fn cycles_are_reported_as_paths() {
        // 0 -> 1 -> 2 -> 0, and 3 reads 0 (not part of the cycle), 4 -> 4.
        let deps = vec![vec![1], vec![2], vec![0], vec![0], vec![4]];
        let cycles = topological_order(&deps, &[0, 1, 2, 3, 4]).unwrap_err();
        assert_eq!(cycles, vec![vec![0, 1, 2, 0], vec![4, 4]]);
    }

    #[test]
    fn suggests_close_names() {
        let known = ["topic", "answer", "Topics", "summary"];
        assert_eq!(close_names("topc", known), vec!["topic"]);
        assert_eq!(close_names("TOPIC", known), vec!["topic"]);
        assert_eq!(close_names("topics", known), vec!["Topics", "topic"]);
        assert!(close_names("zzzzzz", known).is_empty());
    }
}
