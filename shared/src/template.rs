//! Templates and parameter files, checked before CloudFormation sees them, and
//! the desired hash: everything that determines the deployed stack.

use std::collections::BTreeMap;

use crate::hash::sha256_hex;
use crate::spec::StackSpec;

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

/// Reads a parameter file in any of the usual shapes:
/// `[{"ParameterKey": k, "ParameterValue": v}]` (the AWS CLI's),
/// `{"Parameters": {k: v}}` (CodePipeline's), or a plain `{k: v}`.
pub fn read_parameter_file(path: &str, bytes: &[u8]) -> Result<BTreeMap<String, String>, String> {
    if bytes.len() > MAX_PARAMETER_FILE_BYTES {
        return Err(format!(
            "parameter file {path} is over {MAX_PARAMETER_FILE_BYTES} bytes"
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("parameter file {path} is not valid JSON: {e}"))?;
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let bad = |what: &str| format!("parameter file {path}: {what}");
    match &value {
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let key = item.get("ParameterKey").and_then(|k| k.as_str());
                let val = item.get("ParameterValue").and_then(text);
                match (key, val) {
                    (Some(k), Some(v)) => Ok((k.to_owned(), v)),
                    _ => Err(bad(&format!(
                        "item {i} needs ParameterKey and ParameterValue"
                    ))),
                }
            })
            .collect(),
        serde_json::Value::Object(map) => {
            let map = match map.get("Parameters") {
                Some(serde_json::Value::Object(inner)) => inner,
                _ => map,
            };
            map.iter()
                .map(|(k, v)| {
                    text(v).map(|v| (k.clone(), v)).ok_or_else(|| {
                        bad(&format!(
                            "the value of {k:?} must be text, a number or true/false"
                        ))
                    })
                })
                .collect()
        }
        _ => Err(bad(
            "expected a list of ParameterKey/ParameterValue or an object",
        )),
    }
}

/// The parameters CloudFormation gets: the file's, then the spec's on top.
pub fn merge_parameters(
    from_file: BTreeMap<String, String>,
    spec: &StackSpec,
) -> BTreeMap<String, String> {
    let mut merged = from_file;
    merged.extend(spec.parameters.iter().map(|(k, v)| (k.clone(), v.clone())));
    merged
}

/// The hash of everything that determines the deployed stack. Equal hashes
/// mean CloudFormation would be asked for exactly the same thing.
pub fn desired_hash(
    template_sha256: &str,
    parameters: &BTreeMap<String, String>,
    spec: &StackSpec,
) -> String {
    let inputs = serde_json::json!({
        "template": template_sha256,
        "parameters": parameters,
        "tags": spec.tags,
        "capabilities": spec.capabilities,
        "roleArn": spec.role_arn,
        "stackPolicy": spec.stack_policy,
        "notificationArns": spec.notification_arns,
        "rollback": spec.rollback,
        "terminationProtection": spec.termination_protection,
    });
    sha256_hex(inputs.to_string().as_bytes())
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

    #[test]
    fn parameter_files_in_all_three_shapes() {
        let cli = br#"[{"ParameterKey": "A", "ParameterValue": "1"}, {"ParameterKey": "B", "ParameterValue": 2}]"#;
        let pipeline = br#"{"Parameters": {"A": "1", "B": 2}}"#;
        let plain = br#"{"A": "1", "B": 2}"#;
        for shape in [&cli[..], &pipeline[..], &plain[..]] {
            let params = read_parameter_file("p.json", shape).unwrap();
            assert_eq!(
                params,
                BTreeMap::from([("A".into(), "1".into()), ("B".into(), "2".into())])
            );
        }
        assert!(
            read_parameter_file("p.json", b"[{\"ParameterKey\": \"A\"}]")
                .unwrap_err()
                .contains("item 0")
        );
        assert!(
            read_parameter_file("p.json", b"nope")
                .unwrap_err()
                .contains("p.json is not valid JSON")
        );
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
    }

    #[test]
    fn the_desired_hash_moves_with_what_is_deployed_and_only_that() {
        let s = spec("a");
        let params = BTreeMap::new();
        let base = desired_hash("t1", &params, &s);
        assert_eq!(base, desired_hash("t1", &params, &s));
        assert_ne!(base, desired_hash("t2", &params, &s));
        assert_ne!(
            base,
            desired_hash("t1", &BTreeMap::from([("A".into(), "1".into())]), &s)
        );
        let mut tagged = s.clone();
        tagged.tags.insert("team".into(), "x".into());
        assert_ne!(base, desired_hash("t1", &params, &tagged));
        let mut protected = s.clone();
        protected.termination_protection = true;
        assert_ne!(base, desired_hash("t1", &params, &protected));
        // Scheduling knobs do not change the stack.
        let mut slower = s.clone();
        slower.interval = crate::Duration::from_mins(30);
        assert_eq!(base, desired_hash("t1", &params, &slower));
    }
}
