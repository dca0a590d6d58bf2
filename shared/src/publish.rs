//! Outputs published where other tools read them (`publish: {ssm: PATH}`):
//! each output of a stack that ends `Ready` as an SSM parameter of the
//! stack's account and region, named by `PATH` with `{output}` in place;
//! written only when its value changed, deleted when the output (or the
//! stack, or `publish:`) goes. What was published is recorded by name and a
//! hash of its value (`status.applied.published`), never the value.

use std::collections::BTreeMap;

/// Where the output's name goes in a path.
pub const OUTPUT_PLACEHOLDER: &str = "{output}";
/// The longest SSM parameter name (AWS: 2048 characters with 1037 kept
/// for its own use).
pub const MAX_NAME_LEN: usize = 1011;
/// The most levels of an SSM parameter name's hierarchy.
pub const MAX_LEVELS: usize = 15;
/// The longest value of a Standard-tier SSM parameter (4 KB).
pub const MAX_VALUE_BYTES: usize = 4096;

/// Why `path` cannot name SSM parameters, if it cannot.
pub fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!(
            "{path:?} must start with / (a path of the parameter hierarchy)"
        ));
    }
    if !path.contains(OUTPUT_PLACEHOLDER) {
        return Err(format!(
            "{path:?} names no {OUTPUT_PLACEHOLDER}: each output needs a parameter of its own"
        ));
    }
    let sample = parameter_name(path, "Output");
    if let Some(bad) = sample
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.' | '-')))
    {
        return Err(format!(
            "{path:?} holds {bad:?}: an SSM parameter name takes letters, digits and / _ . - only"
        ));
    }
    let lower = sample.to_ascii_lowercase();
    if lower.starts_with("/aws") || lower.starts_with("/ssm") {
        return Err(format!(
            "{path:?} starts with /aws or /ssm, which AWS keeps for itself"
        ));
    }
    if sample.contains("//") || sample.ends_with('/') {
        return Err(format!("{path:?} has an empty level"));
    }
    if sample.matches('/').count() > MAX_LEVELS {
        return Err(format!("{path:?} has more than {MAX_LEVELS} levels"));
    }
    if sample.len() > MAX_NAME_LEN - 255 {
        return Err(format!(
            "{path:?} is too long: with an output's name it must fit SSM's {MAX_NAME_LEN} characters"
        ));
    }
    Ok(())
}

/// The parameter an output is published as.
pub fn parameter_name(path: &str, output: &str) -> String {
    path.replace(OUTPUT_PLACEHOLDER, output)
}

/// The path's part before its first placeholder: what the installation's
/// `PublishParameterPath` must hold.
pub fn fixed_prefix(path: &str) -> &str {
    path.find('{').map_or(path, |i| &path[..i])
}

/// How a published value is recorded: a hash, never the value.
pub fn value_hash(value: &str) -> String {
    crate::hash::sha256_hex(value.as_bytes())[..16].to_owned()
}

/// What one run's end does to the published parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Parameters to write (new, or their output's value changed).
    pub put: Vec<(String, String)>,
    /// Parameters to delete (their output, or `publish:`, is gone).
    pub delete: Vec<String>,
    /// What is published once done: name → hash of its value.
    pub record: BTreeMap<String, String>,
    /// Outputs not published, and why.
    pub skipped: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.put.is_empty() && self.delete.is_empty()
    }
}

/// What to write and delete so that `path`'s parameters are `outputs`
/// (`None`: nothing is published), given what was `recorded`. An output
/// the registry masked (it holds a secret the run read), an empty one and
/// one over 4 KB are not published (and one published before is deleted).
pub fn plan(
    path: Option<&str>,
    outputs: &BTreeMap<String, String>,
    recorded: &BTreeMap<String, String>,
) -> Plan {
    let mut plan = Plan::default();
    if let Some(path) = path {
        for (output, value) in outputs {
            let why = if value == crate::parameters::MASKED_OUTPUT
                || value == crate::parameters::UNCHECKED_OUTPUT
            {
                Some("it holds a secret the run read")
            } else if value.is_empty() {
                Some("it is empty")
            } else if value.len() > MAX_VALUE_BYTES {
                Some("it is longer than 4 KB")
            } else {
                None
            };
            if let Some(why) = why {
                plan.skipped.push(format!("{output} ({why})"));
                continue;
            }
            let name = parameter_name(path, output);
            let hash = value_hash(value);
            if recorded.get(&name) != Some(&hash) {
                plan.put.push((name.clone(), value.clone()));
            }
            plan.record.insert(name, hash);
        }
    }
    plan.delete = recorded
        .keys()
        .filter(|name| !plan.record.contains_key(*name))
        .cloned()
        .collect();
    plan
}

#[cfg(test)]
mod tests;
