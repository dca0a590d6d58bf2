//! What goes to CloudFormation with the template: `parameters` (and the
//! `parameterFile` that adds to them), `tags` and `capabilities`.
//!
//! The counts, names and sizes are CloudFormation's limits. Checked here, a
//! spec that breaks one is refused when `stacks.yaml` is read, with its
//! entry and field named, instead of failing when the stack is deployed.

use std::collections::{BTreeMap, BTreeSet};

use super::Errors;
use super::names::stack_name;
use super::source::relative_path;
use crate::spec::{Capability, ParameterValue, StackSpec, ValueRef};

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
        let field = format!("parameters.{key}");
        match value {
            ParameterValue::Text(text) => errors.check(field, parameter(key, text)),
            ParameterValue::From(from) => {
                errors.check(field.clone(), parameter(key, ""));
                errors.check(field, reference(&spec.name, from));
            }
        }
    }
    if let Some(path) = &spec.parameter_file {
        errors.check("parameterFile", relative_path(path));
        if spec.source.deployment_file.is_some() {
            errors.push(
                "parameterFile",
                "give parameterFile or source.deploymentFile, not both: the deployment \
                 file holds the parameters",
            );
        }
    }
    for (i, name) in spec.depends_on.iter().enumerate() {
        let field = format!("dependsOn[{i}]");
        errors.check(field.clone(), stack_name(name));
        if *name == spec.name {
            errors.push(field, "a stack cannot depend on itself");
        }
    }
}

/// A parameter read at reconcile time: what it names has a valid shape.
fn reference(own: &str, from: &ValueRef) -> Result<(), String> {
    match from {
        ValueRef::Ssm { ssm } => {
            if ssm
                .trim_start_matches('/')
                .starts_with("aws/reference/secretsmanager/")
            {
                return Err(format!(
                    "ssm {ssm:?} reads a Secrets Manager secret through Parameter Store, which \
                     reports no version of it (a rotation would go unseen): write \
                     {{secret: ARN}} instead"
                ));
            }
            let name = ssm.strip_prefix("arn:").map_or(ssm.as_str(), |_| "/arn");
            if ssm.len() > 2048
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.' | '-'))
            {
                return Err(format!(
                    "ssm {ssm:?} is not an SSM parameter name (letters, digits, / _ . -) or ARN"
                ));
            }
            Ok(())
        }
        ValueRef::Secret { secret, .. } => {
            if secret.len() > 2048 || secret.chars().any(char::is_whitespace) {
                return Err(format!("secret {secret:?} is not a secret's name or ARN"));
            }
            Ok(())
        }
        ValueRef::FromStack { from_stack, output } => {
            stack_name(from_stack).map_err(|e| format!("fromStack: {e}"))?;
            if from_stack == own {
                return Err("a stack cannot read its own outputs".into());
            }
            if output.len() > 255 || !output.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(format!(
                    "output {output:?} is not an output name: letters and digits"
                ));
            }
            Ok(())
        }
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
        s.parameters.insert("Big".into(), "x".repeat(4097).into());
        assert_eq!(fields(&s), vec!["parameters.Bad-Name", "parameters.Big"]);
    }
}
