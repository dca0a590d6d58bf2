//! Templates and parameter files, checked before CloudFormation sees them, and
//! the desired hash: everything that determines the deployed stack.

use std::collections::BTreeMap;

use crate::hash::sha256_hex;
use crate::spec::{ParameterValue, StackSpec};

mod checks;

pub use checks::check;

/// CloudFormation's limit for a template given by `TemplateURL`.
pub const MAX_TEMPLATE_BYTES: usize = 1024 * 1024;
/// A parameter file is small; anything bigger is a mistake.
pub const MAX_PARAMETER_FILE_BYTES: usize = 1024 * 1024;

/// Checks a template: size, syntax (JSON or YAML, with CloudFormation's short
/// tags like `!Ref`), and that it is a template (a mapping with `Resources`).
/// The error names the file.
pub fn check_template(path: &str, bytes: &[u8]) -> Result<(), String> {
    if bytes.len() > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "template {path} is over {MAX_TEMPLATE_BYTES} bytes (CloudFormation's limit for a template in S3)"
        ));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("template {path} is not UTF-8 text: {e}"))?;
    let value: serde_yaml_ng::Value = if text.trim_start().starts_with('{') {
        serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| format!("template {path} is not valid JSON: {e}"))
            .and_then(|v| serde_yaml_ng::to_value(v).map_err(|e| e.to_string()))?
    } else {
        crate::yaml::check_expansion(text, crate::yaml::MAX_YAML_NODES)
            .map_err(|e| format!("template {path} is refused: {e}"))?;
        serde_yaml_ng::from_str(text)
            .map_err(|e| format!("template {path} is not valid YAML or JSON: {e}"))?
    };
    match value.as_mapping() {
        Some(map) if map.contains_key("Resources") => Ok(()),
        Some(_) => Err(format!("template {path} has no `Resources` section")),
        None => Err(format!(
            "template {path} is not a CloudFormation template (expected a mapping with `Resources`)"
        )),
    }
}

/// What a parameter file gives: parameters, and tags (CodePipeline's
/// template configuration and Git sync's deployment file have them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileValues {
    pub parameters: BTreeMap<String, String>,
    pub tags: BTreeMap<String, String>,
}

/// Reads a parameter file, JSON or YAML, in any of the shapes teams have:
/// - the AWS CLI's `[{"ParameterKey": k, "ParameterValue": v}]`;
/// - CodePipeline's template configuration, `{"Parameters": {k: v},
///   "Tags": {k: v}}` (a `StackPolicy` there is refused: the entry's
///   `stackPolicy` says it);
/// - AWS CloudFormation Git sync's deployment file, `{"template-file-path":
///   p, "parameters": {k: v}, "tags": {k: v}}`, whose template must be the
///   entry's `source.path`;
/// - a plain `{k: v}`.
///
/// `template_path`: the entry's `source.path`.
pub fn read_parameter_file(
    path: &str,
    bytes: &[u8],
    template_path: &str,
) -> Result<FileValues, String> {
    if bytes.len() > MAX_PARAMETER_FILE_BYTES {
        return Err(format!(
            "parameter file {path} is over {MAX_PARAMETER_FILE_BYTES} bytes"
        ));
    }
    let bad = |what: String| format!("parameter file {path}: {what}");
    let value = parse_data(path, bytes)?;
    let values = match &value {
        serde_json::Value::Array(items) => FileValues {
            parameters: cli_parameters(items).map_err(bad)?,
            tags: BTreeMap::new(),
        },
        serde_json::Value::Object(map)
            if map.contains_key("template-file-path")
                || map.contains_key("parameters")
                || map.contains_key("tags") =>
        {
            if let Some(named) = map.get("template-file-path") {
                let named = named.as_str().unwrap_or_default();
                if named.trim_start_matches("./") != template_path.trim_start_matches("./") {
                    return Err(bad(format!(
                        "it is a Git sync deployment file for the template {named:?}, and the entry deploys {template_path:?}: set source.path to {named:?}, or use another file"
                    )));
                }
            }
            FileValues {
                parameters: text_map(map.get("parameters"), "parameters").map_err(bad)?,
                tags: text_map(map.get("tags"), "tags").map_err(bad)?,
            }
        }
        serde_json::Value::Object(map)
            if map.contains_key("Parameters")
                || map.contains_key("Tags")
                || map.contains_key("StackPolicy") =>
        {
            if map.contains_key("StackPolicy") {
                return Err(bad(
                    "its StackPolicy is not read from a parameter file: set stackPolicy in the entry, and remove it here".to_owned(),
                ));
            }
            FileValues {
                parameters: text_map(map.get("Parameters"), "Parameters").map_err(bad)?,
                tags: text_map(map.get("Tags"), "Tags").map_err(bad)?,
            }
        }
        serde_json::Value::Object(_) => FileValues {
            parameters: text_map(Some(&value), "the file").map_err(bad)?,
            tags: BTreeMap::new(),
        },
        _ => {
            return Err(bad(
                "expected a list of ParameterKey/ParameterValue, or an object (parameters, CodePipeline's template configuration, or a Git sync deployment file)".to_owned(),
            ));
        }
    };
    for (key, value) in &values.tags {
        crate::validate::tag(key, value).map_err(|e| bad(format!("tag {key:?}: {e}")))?;
    }
    Ok(values)
}

/// The template a Git sync deployment file names (`template-file-path`,
/// relative to the source's root), for an entry that gives
/// `source.deploymentFile` instead of `source.path`.
pub fn deployment_template_path(path: &str, bytes: &[u8]) -> Result<String, String> {
    if bytes.len() > MAX_PARAMETER_FILE_BYTES {
        return Err(format!(
            "deployment file {path} is over {MAX_PARAMETER_FILE_BYTES} bytes"
        ));
    }
    let value = parse_data(path, bytes)?;
    let named = value
        .as_object()
        .and_then(|m| m.get("template-file-path"))
        .ok_or_else(|| {
            format!(
                "deployment file {path} has no template-file-path (a Git sync deployment file \
                 names its template there)"
            )
        })?;
    let named = named
        .as_str()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            format!("deployment file {path}: template-file-path must be a path (text)")
        })?;
    crate::validate::relative_path(named)
        .map_err(|e| format!("deployment file {path}: template-file-path: {e}"))?;
    Ok(crate::content::normal(named))
}

/// The file as data: JSON, or YAML (aliases bounded as for templates).
fn parse_data(path: &str, bytes: &[u8]) -> Result<serde_json::Value, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| format!("parameter file {path} is not UTF-8 text: {e}"))?;
    if text.trim_start().starts_with(['{', '[']) {
        return serde_json::from_str(text)
            .map_err(|e| format!("parameter file {path} is not valid JSON: {e}"));
    }
    crate::yaml::check_expansion(text, crate::yaml::MAX_YAML_NODES)
        .map_err(|e| format!("parameter file {path} is refused: {e}"))?;
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)
        .map_err(|e| format!("parameter file {path} is not valid JSON or YAML: {e}"))?;
    serde_json::to_value(yaml)
        .map_err(|e| format!("parameter file {path} holds what JSON cannot: {e}"))
}

/// A value as a parameter or tag value: text, a number or true/false.
fn text_of(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The AWS CLI's list of `ParameterKey`/`ParameterValue`.
fn cli_parameters(items: &[serde_json::Value]) -> Result<BTreeMap<String, String>, String> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let key = item.get("ParameterKey").and_then(|k| k.as_str());
            let val = item.get("ParameterValue").and_then(text_of);
            match (key, val) {
                (Some(k), Some(v)) => Ok((k.to_owned(), v)),
                _ => Err(format!("item {i} needs ParameterKey and ParameterValue")),
            }
        })
        .collect()
}

/// A mapping of text values (`None`: none).
fn text_map(
    value: Option<&serde_json::Value>,
    what: &str,
) -> Result<BTreeMap<String, String>, String> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(BTreeMap::new()),
        Some(serde_json::Value::Object(map)) => map
            .iter()
            .map(|(k, v)| {
                text_of(v).map(|v| (k.clone(), v)).ok_or_else(|| {
                    format!("the value of {k:?} must be text, a number or true/false")
                })
            })
            .collect(),
        Some(_) => Err(format!("{what} must be a mapping of names to values")),
    }
}

/// The stack's tags from the file and the entry: the entry's on top.
pub fn merge_tags(
    from_file: BTreeMap<String, String>,
    spec: &StackSpec,
) -> BTreeMap<String, String> {
    let mut merged = from_file;
    merged.extend(spec.tags.iter().map(|(k, v)| (k.clone(), v.clone())));
    merged
}

/// The parameters CloudFormation gets: the file's, then the spec's on top
/// (references are read later, by the run).
pub fn merge_parameters(
    from_file: BTreeMap<String, String>,
    spec: &StackSpec,
) -> BTreeMap<String, ParameterValue> {
    let mut merged: BTreeMap<String, ParameterValue> = from_file
        .into_iter()
        .map(|(k, v)| (k, ParameterValue::Text(v)))
        .collect();
    merged.extend(spec.parameters.iter().map(|(k, v)| (k.clone(), v.clone())));
    merged
}

/// The hash of everything that determines the deployed stack. Equal hashes
/// mean CloudFormation would be asked for exactly the same thing.
pub fn desired_hash(
    template_sha256: &str,
    parameters: &BTreeMap<String, String>,
    tags: &BTreeMap<String, String>,
    spec: &StackSpec,
) -> String {
    let inputs = serde_json::json!({
        "template": template_sha256,
        "parameters": parameters,
        "tags": tags,
        "capabilities": spec.capabilities,
        "roleArn": spec.role_arn,
        "stackPolicy": spec.stack_policy,
        "notificationArns": spec.notification_arns,
        "rollback": spec.rollback,
        "terminationProtection": spec.termination_protection,
    });
    sha256_hex(crate::hash::canonical(inputs).to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::fixtures::spec;

    #[test]
    fn a_template_whose_aliases_expand_past_the_bound_is_refused() {
        let text = format!(
            "Mappings: {{M: &m {{{}}}}}\nResources:\n  Q: {{Type: AWS::SQS::Queue}}\nOutputs: [{}]\n",
            (0..20_000)
                .map(|i| format!("k{i}: v"))
                .collect::<Vec<_>>()
                .join(", "),
            vec!["*m"; 100].join(", ")
        );
        assert!(text.len() < MAX_TEMPLATE_BYTES);
        let err = check_template("t.yaml", text.as_bytes()).unwrap_err();
        assert!(
            err.starts_with("template t.yaml is refused: it expands to more than"),
            "{err}"
        );
    }

    #[test]
    fn yaml_with_short_tags_and_json_templates_pass() {
        let yaml = b"Parameters:\n  Name: {Type: String}\nResources:\n  Q:\n    Type: AWS::SQS::Queue\n    Properties:\n      QueueName: !Sub '${Name}-q'\n      Tags: [{Key: a, Value: !Ref Name}]\n";
        assert_eq!(check_template("q.yaml", yaml), Ok(()));
        assert_eq!(
            check_template(
                "q.json",
                br#"{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}"#
            ),
            Ok(())
        );
    }

    #[test]
    fn bad_templates_are_named_and_explained() {
        let err = check_template("q.yaml", b"Resources:\n  Q: [unclosed\n").unwrap_err();
        assert!(
            err.starts_with("template q.yaml is not valid YAML"),
            "{err}"
        );
        let err = check_template("q.json", b"{\"Resources\": ").unwrap_err();
        assert!(
            err.starts_with("template q.json is not valid JSON"),
            "{err}"
        );
        assert!(
            check_template("q.yaml", b"just text")
                .unwrap_err()
                .contains("not a CloudFormation template")
        );
        assert!(
            check_template("q.yaml", b"Outputs: {}\n")
                .unwrap_err()
                .contains("no `Resources`")
        );
        let big = vec![b'#'; MAX_TEMPLATE_BYTES + 1];
        assert!(
            check_template("big.yaml", &big)
                .unwrap_err()
                .contains("over 1048576 bytes")
        );
        assert!(
            check_template("bin.yaml", &[0xff, 0xfe])
                .unwrap_err()
                .contains("not UTF-8")
        );
    }

    fn ab() -> BTreeMap<String, String> {
        BTreeMap::from([("A".into(), "1".into()), ("B".into(), "2".into())])
    }

    #[test]
    fn parameter_files_in_every_shape_teams_have_json_or_yaml() {
        let shapes: [&[u8]; 6] = [
            br#"[{"ParameterKey": "A", "ParameterValue": "1"}, {"ParameterKey": "B", "ParameterValue": 2}]"#,
            br#"{"Parameters": {"A": "1", "B": 2}}"#,
            br#"{"A": "1", "B": 2}"#,
            b"A: '1'\nB: 2\n",
            b"- {ParameterKey: A, ParameterValue: '1'}\n- {ParameterKey: B, ParameterValue: 2}\n",
            b"template-file-path: ./t.yaml\nparameters:\n  A: 1\n  B: 2\n",
        ];
        for shape in shapes {
            let values = read_parameter_file("p", shape, "t.yaml")
                .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(shape)));
            assert_eq!(
                values.parameters,
                ab(),
                "{}",
                String::from_utf8_lossy(shape)
            );
            assert!(values.tags.is_empty());
        }
        assert!(
            read_parameter_file("p.json", b"[{\"ParameterKey\": \"A\"}]", "t.yaml")
                .unwrap_err()
                .contains("item 0")
        );
        assert!(
            read_parameter_file("p.json", b"{nope", "t.yaml")
                .unwrap_err()
                .contains("p.json is not valid JSON")
        );
        assert!(
            read_parameter_file("p.yaml", b"a: [", "t.yaml")
                .unwrap_err()
                .contains("p.yaml is not valid JSON or YAML")
        );
    }

    #[test]
    fn codepipeline_and_git_sync_files_give_tags_too_and_what_they_cannot_say_is_refused() {
        let pipeline = br#"{"Parameters": {"A": "1", "B": "2"}, "Tags": {"team": "orders"}}"#;
        let git_sync =
            b"template-file-path: t.yaml\nparameters: {A: '1', B: '2'}\ntags: {team: orders}\n";
        for file in [&pipeline[..], &git_sync[..]] {
            let values = read_parameter_file("f", file, "./t.yaml").unwrap();
            assert_eq!(values.parameters, ab());
            assert_eq!(
                values.tags,
                BTreeMap::from([("team".into(), "orders".into())])
            );
        }
        let other =
            read_parameter_file("deploy.yaml", b"template-file-path: other.yaml\n", "t.yaml")
                .unwrap_err();
        assert!(
            other.contains("deploy.yaml")
                && other.contains("other.yaml")
                && other.contains("source.path"),
            "{other}"
        );
        let policy = read_parameter_file(
            "c.json",
            br#"{"Parameters": {}, "StackPolicy": {"Statement": []}}"#,
            "t.yaml",
        )
        .unwrap_err();
        assert!(
            policy.contains("StackPolicy") && policy.contains("stackPolicy"),
            "{policy}"
        );
        let reserved =
            read_parameter_file("c.json", br#"{"Tags": {"aws:x": "y"}}"#, "t.yaml").unwrap_err();
        assert!(
            reserved.contains("c.json") && reserved.contains("aws:"),
            "{reserved}"
        );
        let nested = read_parameter_file("c.json", br#"{"Parameters": {"A": {"B": 1}}}"#, "t.yaml")
            .unwrap_err();
        assert!(nested.contains("\"A\""), "{nested}");
    }

    #[test]
    fn the_spec_wins_over_the_parameter_file() {
        let mut s = spec("a");
        s.parameters.insert("A".into(), "spec".into());
        let merged = merge_parameters(
            BTreeMap::from([("A".into(), "file".into()), ("B".into(), "file".into())]),
            &s,
        );
        assert_eq!(merged["A"], "spec");
        assert_eq!(merged["B"], "file");
        s.tags.insert("team".into(), "spec".into());
        let tags = merge_tags(
            BTreeMap::from([
                ("team".into(), "file".into()),
                ("cost".into(), "file".into()),
            ]),
            &s,
        );
        assert_eq!(
            (tags["team"].as_str(), tags["cost"].as_str()),
            ("spec", "file")
        );
    }

    #[test]
    fn the_desired_hash_moves_with_what_is_deployed_and_only_that() {
        let s = spec("a");
        let params = BTreeMap::new();
        let none = BTreeMap::new();
        let base = desired_hash("t1", &params, &none, &s);
        assert_eq!(base, desired_hash("t1", &params, &none, &s));
        assert_ne!(base, desired_hash("t2", &params, &none, &s));
        assert_ne!(
            base,
            desired_hash("t1", &BTreeMap::from([("A".into(), "1".into())]), &none, &s)
        );
        let tags = BTreeMap::from([("team".into(), "x".into())]);
        assert_ne!(base, desired_hash("t1", &params, &tags, &s));
        let mut protected = s.clone();
        protected.termination_protection = true;
        assert_ne!(base, desired_hash("t1", &params, &none, &protected));
        // Scheduling knobs do not change the stack.
        let mut slower = s.clone();
        slower.interval = crate::Duration::from_mins(30);
        assert_eq!(base, desired_hash("t1", &params, &none, &slower));
    }
}
