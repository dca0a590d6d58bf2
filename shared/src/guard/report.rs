//! What Guard's reports say: the rules evaluated and, for each broken
//! one, the resources its failing checks reached and its message. Two
//! shapes: the summary (`run_checks`, not verbose) and the whole record
//! tree (verbose), read when the summary does not.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{MAX_FINDING_MESSAGE, MAX_FINDING_RESOURCES};

/// A rule broken, as Guard's summary gives it.
pub(super) struct Broken {
    pub(super) resources: Vec<String>,
    pub(super) message: String,
}

pub(super) struct Outcome {
    pub(super) rules: u32,
    pub(super) broken: Vec<(String, Broken)>,
}

/// The rules a Guard summary reports, and the broken ones.
pub(super) fn from_summary(summary: &Value) -> Outcome {
    let count = |key: &str| {
        summary
            .get(key)
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    let rules = count("compliant") + count("not_compliant") + count("not_applicable");
    let broken = summary
        .get("not_compliant")
        .and_then(Value::as_array)
        .map(|items| items.iter().map(broken_summary).collect())
        .unwrap_or_default();
    Outcome {
        rules: u32::try_from(rules).unwrap_or(u32::MAX),
        broken,
    }
}

fn broken_summary(item: &Value) -> (String, Broken) {
    let rule = item
        .get("Rule")
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_owned();
    let mut resources = BTreeSet::new();
    let mut custom = None;
    let mut error = None;
    gather(item, &mut resources, &mut custom, &mut error);
    let message = custom
        .or(error)
        .unwrap_or_else(|| "the rule is not met".into());
    let resources = bounded(resources);
    (rule, Broken { resources, message })
}

/// The rules Guard's record tree reports (its root's `RuleCheck`s, one
/// per name: a rule defined twice, as AWS's controls define theirs for
/// templates and for hooks, is broken if either is), and the broken ones.
pub(super) fn from_records(record: &Value) -> Outcome {
    let mut statuses: Vec<(String, bool, Vec<&Value>)> = Vec::new();
    for child in record
        .get("children")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(rule) = child.pointer("/container/RuleCheck") else {
            continue;
        };
        let name = rule
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned();
        let failed = rule.get("status").and_then(Value::as_str) == Some("FAIL");
        match statuses.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, any, nodes)) => {
                *any |= failed;
                if failed {
                    nodes.push(child);
                }
            }
            None => statuses.push((name, failed, if failed { vec![child] } else { vec![] })),
        }
    }
    let rules = u32::try_from(statuses.len()).unwrap_or(u32::MAX);
    let broken = statuses
        .into_iter()
        .filter(|(_, failed, _)| *failed)
        .map(|(name, _, nodes)| (name, broken(&nodes)))
        .collect();
    Outcome { rules, broken }
}

/// What the failing records of one rule say: the resources their checks
/// reached, and the first message (the rule's own `<<…>>`, else Guard's).
fn broken(nodes: &[&Value]) -> Broken {
    let mut resources = BTreeSet::new();
    let mut custom = None;
    let mut error = None;
    for node in nodes {
        walk(node, &mut resources, &mut custom, &mut error);
    }
    let message = custom
        .or(error)
        .unwrap_or_else(|| "the rule is not met".into());
    let resources = bounded(resources);
    Broken { resources, message }
}

/// At most [`MAX_FINDING_RESOURCES`] resources, then how many more.
fn bounded(resources: BTreeSet<String>) -> Vec<String> {
    let mut resources: Vec<String> = resources.into_iter().collect();
    if resources.len() > MAX_FINDING_RESOURCES {
        let more = resources.len() - MAX_FINDING_RESOURCES;
        resources.truncate(MAX_FINDING_RESOURCES);
        resources.push(format!("and {more} more"));
    }
    resources
}

/// The status a record's container gives it (`FAIL`, `PASS`, `SKIP`), if
/// it gives one; a `RuleCondition` (a `when`) is never walked.
fn failing(node: &Value) -> bool {
    let Some(container) = node.get("container") else {
        return true;
    };
    if container.get("RuleCondition").is_some() {
        return false;
    }
    if let Some(Value::String(outcome)) = container.get("ClauseValueCheck") {
        return outcome != "Success";
    }
    match status_of(container, 0) {
        Some(status) => status == "FAIL",
        None => true,
    }
}

fn status_of(value: &Value, depth: usize) -> Option<&str> {
    let map = value.as_object()?;
    if let Some(status) = map.get("status").and_then(Value::as_str) {
        return Some(status);
    }
    if depth >= 3 {
        return None;
    }
    map.values().find_map(|v| status_of(v, depth + 1))
}

/// Collects, from the failing records under `node`, the resources their
/// checks reached, the first custom message and the first of Guard's
/// (without the values it quotes).
fn walk(
    node: &Value,
    resources: &mut BTreeSet<String>,
    custom: &mut Option<String>,
    error: &mut Option<String>,
) {
    if !failing(node) {
        return;
    }
    if let Some(container) = node.get("container") {
        gather(container, resources, custom, error);
    }
    for child in node
        .get("children")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        walk(child, resources, custom, error);
    }
}

/// The paths and messages under one record's container (or one rule of
/// the summary): the resources they reach, the first custom message, the
/// first of Guard's (without the values it quotes).
fn gather(
    value: &Value,
    resources: &mut BTreeSet<String>,
    custom: &mut Option<String>,
    error: &mut Option<String>,
) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("path", Value::String(path)) => {
                        if let Some(id) = resource_of(path) {
                            resources.insert(id);
                        }
                    }
                    ("custom_message", Value::String(m)) if custom.is_none() => {
                        let m = collapse(m);
                        if !m.is_empty() {
                            *custom = Some(shorten(&m));
                        }
                    }
                    ("message" | "error_message", Value::String(m)) if error.is_none() => {
                        let m = collapse(m.split("Value traversed to").next().unwrap_or(m));
                        if !m.is_empty() {
                            *error = Some(shorten(&m));
                        }
                    }
                    // A unary check's record is under `value`; the values
                    // Guard reached (the template's own) are too, and are
                    // not walked.
                    ("value", Value::Object(inner))
                        if !["from", "status", "custom_message", "traversed_to", "path"]
                            .iter()
                            .any(|k| inner.contains_key(*k)) => {}
                    _ => gather(v, resources, custom, error),
                }
            }
        }
        Value::Array(items) => {
            for v in items {
                gather(v, resources, custom, error);
            }
        }
        _ => {}
    }
}

/// `/Resources/Bucket/Properties/…` → `Bucket`.
fn resource_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/Resources/")?;
    let id = rest.split('/').next()?;
    let id = id.split('[').next().unwrap_or(id);
    (!id.is_empty()).then(|| id.to_owned())
}

pub(super) fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(super) fn shorten(text: &str) -> String {
    if text.chars().count() <= MAX_FINDING_MESSAGE {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX_FINDING_MESSAGE - 1).collect();
    format!("{cut}…")
}
