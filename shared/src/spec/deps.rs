//! The dependencies between specs as a graph, without I/O: the cycle
//! `validate` and `apply` refuse.

use std::collections::BTreeMap;

use super::StackSpec;

/// A cycle among the specs' dependencies, as the names along it (the first
/// again at the end), if there is one.
pub fn find_cycle(specs: &BTreeMap<&str, &StackSpec>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        name: &'a str,
        specs: &BTreeMap<&'a str, &'a StackSpec>,
        marks: &mut BTreeMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match marks.get(name) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path.iter().position(|n| *n == name).unwrap_or(0);
                let mut cycle: Vec<String> =
                    path[start..].iter().map(|n| (*n).to_owned()).collect();
                cycle.push(name.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(name, Mark::Open);
        path.push(name);
        if let Some(spec) = specs.get(name) {
            for upstream in spec.upstream() {
                if let Some((key, _)) = specs.get_key_value(upstream)
                    && let Some(cycle) = visit(key, specs, marks, path)
                {
                    return Some(cycle);
                }
            }
        }
        path.pop();
        marks.insert(name, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for name in specs.keys() {
        let mut path = Vec::new();
        if let Some(cycle) = visit(name, specs, &mut marks, &mut path) {
            return Some(cycle);
        }
    }
    None
}

/// A cycle through one of `through`, as the names along it (that name
/// first and again at the end), if there is one: a cycle elsewhere in the
/// graph does not hide it.
pub fn find_cycle_through(
    specs: &BTreeMap<&str, &StackSpec>,
    through: &std::collections::BTreeSet<&str>,
) -> Option<Vec<String>> {
    for start in through {
        // Depth first from `start`, back to it: each name entered once.
        let mut seen = std::collections::BTreeSet::new();
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
        while let Some((name, path)) = stack.pop() {
            let Some(spec) = specs.get(name) else {
                continue;
            };
            for upstream in spec.upstream() {
                if upstream == *start {
                    let mut cycle: Vec<String> = path.iter().map(|n| (*n).to_owned()).collect();
                    cycle.push((*start).to_owned());
                    return Some(cycle);
                }
                if let Some((key, _)) = specs.get_key_value(upstream)
                    && seen.insert(*key)
                {
                    let mut next = path.clone();
                    next.push(key);
                    stack.push((key, next));
                }
            }
        }
    }
    None
}
