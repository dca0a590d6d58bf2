//! What a template makes certain to fail for one entry, before
//! CloudFormation is asked: the same check for `validate --templates` and
//! at the start of a run (template-upload), so both say the same.
//!
//! Only what is certain is said. A template with a macro (`Transform`
//! other than the SAM transform alone, or `Fn::Transform` anywhere) is
//! judged only on its syntax: a macro may add or take away parameters,
//! defaults and resources. `CAPABILITY_AUTO_EXPAND` is never asked for:
//! CloudFormation does not need it for a change set, which is how every
//! run deploys. A resource with a `Condition` may not be made, a name under
//! `Fn::If` may not be given: neither is counted. Nested stacks' templates
//! are not read.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::spec::{Capability, StackSpec};

/// The SAM transform: it keeps the template's parameters and its own IAM
/// resources as they are.
const SERVERLESS: &str = "AWS::Serverless-2016-10-31";

/// The resources CloudFormation makes acknowledge `CAPABILITY_IAM` (or
/// `CAPABILITY_NAMED_IAM`), with the property that gives each a custom
/// name (which needs `CAPABILITY_NAMED_IAM`), if it has one.
const IAM_RESOURCES: [(&str, Option<&str>); 8] = [
    ("AWS::IAM::AccessKey", None),
    ("AWS::IAM::Group", Some("GroupName")),
    ("AWS::IAM::InstanceProfile", Some("InstanceProfileName")),
    ("AWS::IAM::ManagedPolicy", Some("ManagedPolicyName")),
    ("AWS::IAM::Policy", None),
    ("AWS::IAM::Role", Some("RoleName")),
    ("AWS::IAM::User", Some("UserName")),
    ("AWS::IAM::UserToGroupAddition", None),
];

/// How many resources a problem names before "and N more".
const NAMED_AT_MOST: usize = 3;

/// Every problem the template `path` (`template`, its bytes) makes certain
/// for `spec`, each naming the template: it does not parse (or is no
/// template); a parameter without `Default` that neither the entry nor its
/// parameter file gives (`file`: the file's parameters); a parameter given
/// that the template does not declare; an IAM resource without the
/// capability it needs. A value read at run time (`{ssm:}`, `{secret:}`,
/// `{fromStack:}`) counts as given. Empty: nothing certain to fail.
pub fn check(
    spec: &StackSpec,
    path: &str,
    template: &[u8],
    file: &BTreeMap<String, String>,
) -> Vec<String> {
    if let Err(e) = super::check_template(path, template) {
        return vec![e];
    }
    let Some(value) = parse(template) else {
        return Vec::new();
    };
    if has_macros(&value) {
        return Vec::new();
    }
    let mut problems = parameter_problems(spec, &value, file);
    problems.extend(capability_problem(spec, &value));
    problems
        .into_iter()
        .map(|p| format!("template {path}: {p}"))
        .collect()
}

/// The template as JSON (YAML short tags become `{"!Tag": …}`).
fn parse(template: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(template).ok()?;
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).ok();
    }
    serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_value(v).ok())
}

/// Whether a macro may change the template: a `Transform` other than the
/// SAM transform alone, or `Fn::Transform` anywhere.
fn has_macros(template: &Value) -> bool {
    let only_sam = match template.get("Transform") {
        None => true,
        Some(Value::String(s)) => s == SERVERLESS,
        Some(Value::Array(list)) => {
            !list.is_empty() && list.iter().all(|t| t.as_str() == Some(SERVERLESS))
        }
        Some(_) => false,
    };
    !only_sam || holds_fn_transform(template)
}

fn holds_fn_transform(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k == "Fn::Transform" || k == "!Transform" || holds_fn_transform(v)),
        Value::Array(items) => items.iter().any(holds_fn_transform),
        _ => false,
    }
}

/// Parameters without a value, and values without a parameter.
fn parameter_problems(
    spec: &StackSpec,
    template: &Value,
    file: &BTreeMap<String, String>,
) -> Vec<String> {
    let declared: BTreeMap<&str, &Value> = match template.get("Parameters") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => map.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        // Not a mapping: CloudFormation says so; nothing certain here.
        Some(_) => return Vec::new(),
    };
    let label = file_label(spec);
    let gives = |name: &str| spec.parameters.contains_key(name) || file.contains_key(name);
    let mut problems: Vec<String> = declared
        .iter()
        .filter(|(name, p)| p.is_object() && p.get("Default").is_none() && !gives(name))
        .map(|(name, _)| match &label {
            Some(file) => format!(
                "parameter {name} has no Default and neither the entry nor {file} gives one"
            ),
            None => format!("parameter {name} has no Default and the entry gives none"),
        })
        .collect();
    let undeclared = |name: &&String| !declared.contains_key(name.as_str());
    problems.extend(spec.parameters.keys().filter(undeclared).map(|name| {
        format!("the entry gives parameter {name}, which the template does not declare")
    }));
    problems.extend(
        file.keys()
            .filter(|name| !spec.parameters.contains_key(*name))
            .filter(undeclared)
            .map(|name| {
                let file = label.as_deref().unwrap_or("the parameter file");
                format!("{file} gives parameter {name}, which the template does not declare")
            }),
    );
    problems
}

/// How messages name the file of values the entry reads, as a run reads
/// it: its deployment file (when it names the template), else its
/// parameter file.
fn file_label(spec: &StackSpec) -> Option<String> {
    match (&spec.parameter_file, &spec.source.deployment_file) {
        (_, Some(file)) if spec.source.path.is_empty() => Some(format!("deployment file {file}")),
        (Some(file), _) => Some(format!("parameter file {file}")),
        (None, _) => None,
    }
}

/// The IAM resources the entry's capabilities do not acknowledge.
fn capability_problem(spec: &StackSpec, template: &Value) -> Option<String> {
    let Some(Value::Object(resources)) = template.get("Resources") else {
        return None;
    };
    let mut iam = Vec::new();
    let mut named = Vec::new();
    for (id, resource) in resources {
        // A resource with a condition may not be made.
        if resource.get("Condition").is_some() {
            continue;
        }
        let kind = resource.get("Type").and_then(Value::as_str).unwrap_or("");
        let Some((_, name_property)) = IAM_RESOURCES.iter().find(|(t, _)| *t == kind) else {
            continue;
        };
        match name_property.filter(|p| certainly_given(resource, p)) {
            Some(property) => named.push(format!("{kind} ({id}) with {property}")),
            None => iam.push(format!("{kind} ({id})")),
        }
    }
    let has = |c: Capability| spec.capabilities.contains(&c);
    let (lacking, capability) = if !named.is_empty() && !has(Capability::NamedIam) {
        (named, Capability::NamedIam)
    } else if !iam.is_empty() && !has(Capability::Iam) && !has(Capability::NamedIam) {
        (iam, Capability::Iam)
    } else {
        return None;
    };
    Some(format!(
        "declares {} but capabilities lack {capability}",
        listed(&lacking)
    ))
}

/// Whether the resource's `property` is certainly given: there, and
/// neither conditional (`Fn::If`) nor `AWS::NoValue`.
fn certainly_given(resource: &Value, property: &str) -> bool {
    let Some(value) = resource.get("Properties").and_then(|p| p.get(property)) else {
        return false;
    };
    let Value::Object(map) = value else {
        return !value.is_null();
    };
    let no_value = ["Ref", "!Ref"]
        .iter()
        .any(|r| map.get(*r).and_then(Value::as_str) == Some("AWS::NoValue"));
    !no_value && !map.contains_key("Fn::If") && !map.contains_key("!If")
}

/// `a, b, c and 2 more`.
fn listed(items: &[String]) -> String {
    let shown = items[..items.len().min(NAMED_AT_MOST)].join(", ");
    match items.len().saturating_sub(NAMED_AT_MOST) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests;
