//! What goes to CloudFormation with the template: `parameters` (and the
//! `parameterFile` that adds to them), `tags` and `capabilities`.
//!
//! The counts, names and sizes are CloudFormation's limits. Checked here, a
//! spec that breaks one is refused when `stacks.yaml` is read, with its
//! entry and field named, instead of failing when the stack is deployed.

use std::collections::{BTreeMap, BTreeSet};

use super::Errors;
use super::source::relative_path;
use crate::spec::{Capability, StackSpec};

/// CloudFormation: at most 50 tags per stack.
pub const MAX_TAGS: usize = 50;

/// CloudFormation: at most 200 parameters per template.
pub const MAX_PARAMETERS: usize = 200;

/// CloudFormation: a parameter value is at most 4,096 bytes.
pub const MAX_PARAMETER_VALUE_BYTES: usize = 4096;

/// `parameters` (how many, each name and value) and `parameterFile`.
pub(super) fn check_parameters(spec: &StackSpec, errors: &mut Errors) {
    if spec.parameters.len() > MAX_PARAMETERS {
        errors.push(
            "parameters",
            format!(
                "{} parameters given; CloudFormation allows at most {MAX_PARAMETERS}",
                spec.parameters.len()
            ),
        );
    }
    for (key, value) in &spec.parameters {
        errors.check(format!("parameters.{key}"), parameter(key, value));
    }
    if let Some(path) = &spec.parameter_file {
        errors.check("parameterFile", relative_path(path));
    }
}

/// `tags`: how many, and each key and value.
pub(super) fn check_tags(tags: &BTreeMap<String, String>, errors: &mut Errors) {
    if tags.len() > MAX_TAGS {
        errors.push(
            "tags",
            format!(
                "{} tags given; CloudFormation allows at most {MAX_TAGS} per stack",
                tags.len()
            ),
        );
    }
    for (key, value) in tags {
        errors.check(format!("tags.{key}"), tag(key, value));
    }
}

/// `capabilities`: each listed once.
pub(super) fn check_capabilities(capabilities: &[Capability], errors: &mut Errors) {
    let mut seen = BTreeSet::new();
    for cap in capabilities {
        if !seen.insert(*cap) {
            errors.push("capabilities", format!("{cap} is listed twice"));
        }
    }
}

/// One template parameter: CloudFormation's rule for parameter names, and
/// the size of the value.
fn parameter(key: &str, value: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 255 || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "{key:?} is not a CloudFormation parameter name: 1 to 255 letters and digits"
        ));
    }
    if value.len() > MAX_PARAMETER_VALUE_BYTES {
        return Err(format!(
            "the value is {} bytes; CloudFormation allows at most {MAX_PARAMETER_VALUE_BYTES}",
            value.len()
        ));
    }
    Ok(())
}

/// One stack tag: the characters and lengths CloudFormation accepts, and
/// no key under `aws:`, which AWS reserves for its own tags.
pub fn tag(key: &str, value: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_alphanumeric() || c == ' ' || "_.:/=+-@".contains(c);
    let keys = key.chars().count();
    if keys == 0 || keys > 128 || !key.chars().all(allowed) {
        return Err(format!(
            "{key:?} is not a valid tag key: 1 to 128 letters, digits, spaces or _.:/=+-@"
        ));
    }
    if key.to_ascii_lowercase().starts_with("aws:") {
        return Err(format!("{key:?} uses the reserved prefix \"aws:\""));
    }
    if key.to_ascii_lowercase().starts_with("stacksync:") {
        return Err(format!(
            "{key:?} uses the prefix \"stacksync:\", which stacksync sets itself (the stack's owner)"
        ));
    }
    if value.chars().count() > 256 || !value.chars().all(allowed) {
        return Err(format!(
            "the value {value:?} is not valid: at most 256 letters, digits, spaces or _.:/=+-@"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::spec::fixtures::spec;
    use crate::validate::fields;

    #[test]
    fn limits_on_tags_and_parameters() {
        let mut s = spec("a");
        for i in 0..51 {
            s.tags.insert(format!("k{i}"), "v".into());
        }
        assert_eq!(fields(&s), vec!["tags"]);

        let mut s = spec("a");
        s.tags.insert("aws:owner".into(), "x".into());
        s.tags.insert("ok".into(), "x".repeat(257));
        s.tags
            .insert("stacksync:entry".into(), "someone-else".into());
        assert_eq!(
            fields(&s),
            vec!["tags.aws:owner", "tags.ok", "tags.stacksync:entry"]
        );

        let mut s = spec("a");
        for i in 0..201 {
            s.parameters.insert(format!("P{i}"), "v".into());
        }
        assert_eq!(fields(&s), vec!["parameters"]);

        let mut s = spec("a");
        s.parameters.insert("Bad-Name".into(), "v".into());
        s.parameters.insert("Big".into(), "x".repeat(4097));
        assert_eq!(fields(&s), vec!["parameters.Bad-Name", "parameters.Big"]);
    }
}
