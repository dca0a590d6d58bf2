//! Guard's input: the template as written (JSON or YAML, short forms in
//! their long form), with the stack's name, parameters and tags.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{INPUT_KEY, PolicyError};

/// The stack as Guard sees it: the template as written, with
/// [`INPUT_KEY`] at its root (`secrets`: parameters given as `****`).
pub fn input(
    template: &[u8],
    stack_name: &str,
    parameters: &BTreeMap<String, String>,
    secrets: &BTreeSet<String>,
    tags: &BTreeMap<String, String>,
) -> Result<Value, PolicyError> {
    let mut document = parse_template(template).map_err(PolicyError::Input)?;
    let Value::Object(root) = &mut document else {
        return Err(PolicyError::Input("the template is not a mapping".into()));
    };
    let parameters: serde_json::Map<String, Value> = parameters
        .iter()
        .map(|(k, v)| {
            let shown = if secrets.contains(k) { "****" } else { v };
            (k.clone(), Value::String(shown.to_owned()))
        })
        .collect();
    let tags: serde_json::Map<String, Value> = tags
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    root.insert(
        INPUT_KEY.to_owned(),
        serde_json::json!({
            "StackName": stack_name,
            "Parameters": parameters,
            "Tags": tags,
        }),
    );
    Ok(document)
}

/// A template, JSON or YAML, as a JSON value: YAML's short forms (`!Ref`,
/// `!Sub`, `!GetAtt a.b`…) in their long form, as CloudFormation reads them.
pub fn parse_template(template: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(template).map_err(|_| "the template is not UTF-8".to_owned())?;
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"));
    }
    crate::yaml::check_expansion(text, crate::yaml::MAX_YAML_NODES)?;
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    long_form(value)
}

fn long_form(value: serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(n).map_err(|e| e.to_string())?,
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(long_form)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Y::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => return Err(format!("a mapping key that is not a string: {other:?}")),
                };
                out.insert(key, long_form(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let inner = long_form(tagged.value)?;
            let (key, inner) = match name {
                "Ref" | "Condition" => (name.to_owned(), inner),
                "GetAtt" => {
                    let inner = match inner {
                        Value::String(s) => match s.split_once('.') {
                            Some((a, b)) => serde_json::json!([a, b]),
                            None => Value::String(s),
                        },
                        other => other,
                    };
                    ("Fn::GetAtt".to_owned(), inner)
                }
                other => (format!("Fn::{other}"), inner),
            };
            serde_json::json!({ key: inner })
        }
    })
}
