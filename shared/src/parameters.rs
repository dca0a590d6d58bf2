//! The parameters a run gives CloudFormation, once read: what is stored
//! between the steps (never a secret's value), where each came from (for
//! `stacksync get --explain`), and what the desired hash takes of them.
//!
//! A value read from SSM or Secrets Manager enters the desired hash as the
//! version it was read at (so a rotation, a new version, triggers an
//! update), is stored as the reference it was read from, and is read again
//! by the step that makes the change set: it is never in the run's state,
//! the registry, a blob or a log line, and nothing derived from it is
//! either (a hash of a short password would let a reader confirm guesses).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::spec::ValueRef;

/// One parameter as the parameters object (in the bucket) holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Stored {
    /// The value (a literal, a file's, another stack's output).
    Text(String),
    /// A secret's: where to read it again, and the version that was read
    /// (SSM's `Version`, Secrets Manager's `VersionId`).
    Read { from: ValueRef, version: String },
}

impl Stored {
    /// What the desired hash takes of it: the text, or where a secret is
    /// read and its version (tagged, so no text can collide with it).
    pub fn hash_input(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::Read { from, version } => format!(
                "\0{}@{version}",
                serde_json::to_string(from).unwrap_or_default()
            ),
        }
    }
}

/// Whether a parameter or a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    Parameter,
    Tag,
}

/// Where one parameter or tag of the last run came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub kind: Kind,
    pub name: String,
    /// `stacks.yaml`, `parameter file P`, `deployment file P`, `SSM
    /// parameter N`, `key K of secret S`, `output O of stack N`, `stacksync`.
    pub from: String,
    /// The value, unless it is a secret's or the template says `NoEcho`
    /// (`None`: masked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The longest output value the registry records as it is; a longer one
/// is recorded by its hash (`sha256:…`), so the status stays small.
pub const MAX_RECORDED_OUTPUT: usize = 128;

/// An output's value as the registry records it: itself, or its hash when
/// longer than [`MAX_RECORDED_OUTPUT`] bytes (outputs are no secrets:
/// CloudFormation shows them to whoever may describe the stack).
pub fn output_record(value: &str) -> String {
    if value.len() <= MAX_RECORDED_OUTPUT {
        value.to_owned()
    } else {
        format!("sha256:{}", crate::hash::sha256_hex(value.as_bytes()))
    }
}

/// How the registry records an output whose value holds a secret the run
/// read: never the value, nor a hash of it.
pub const MASKED_OUTPUT: &str = "****";

/// How the registry records an output it could not check for secrets (the
/// run's secrets could not be read again): not the value, which may hold
/// one. The stack's next run checks it again.
pub const UNCHECKED_OUTPUT: &str = "(unchecked: the secrets could not be read again)";

/// A secret at least this long is looked for inside outputs too (a
/// connection string that embeds a password); a shorter one only as a
/// whole value, lest every output holding its letters be masked.
const FOUND_WITHIN: usize = 8;

/// `outputs` with every value that is, or holds, one of `secrets`
/// replaced by [`MASKED_OUTPUT`]. A template may echo a `NoEcho`
/// parameter into an output (CloudFormation masks no output), and outputs
/// are recorded in the registry: a secret's value never is.
pub fn without_secrets(
    outputs: BTreeMap<String, String>,
    secrets: &[String],
) -> BTreeMap<String, String> {
    outputs
        .into_iter()
        .map(|(key, value)| {
            let holds = secrets.iter().any(|s| {
                !s.is_empty() && (value == *s || (s.len() >= FOUND_WITHIN && value.contains(s)))
            });
            let value = if holds {
                MASKED_OUTPUT.to_owned()
            } else {
                value
            };
            (key, value)
        })
        .collect()
}

/// Refuses a secret's value for a parameter the template does not mark
/// `NoEcho` (`no_echo`; `None`: the template cannot be read here, so none
/// is): CloudFormation shows such a parameter's value to whoever may
/// describe the stack or its change sets. `secrets`: each parameter given
/// a secret's value, and where it was read.
pub fn refuse_exposed_secrets(
    secrets: &BTreeMap<String, crate::spec::ValueRef>,
    no_echo: Option<&BTreeSet<String>>,
) -> Result<(), String> {
    let exposed: Vec<String> = secrets
        .iter()
        .filter(|(name, _)| no_echo.is_none_or(|n| !n.contains(name.as_str())))
        .map(|(name, from)| format!("{name} (from {})", from.describe()))
        .collect();
    if exposed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "a secret's value would be passed to a parameter the template does not mark NoEcho: \
         {}; anyone who may describe the stack would read it there. Mark the parameter \
         `NoEcho: true`, or let CloudFormation read the secret itself with a dynamic reference \
         in the template ({{{{resolve:secretsmanager:ARN:SecretString:KEY}}}}, \
         {{{{resolve:ssm-secure:NAME}}}}); nothing was deployed",
        exposed.join(", ")
    ))
}

/// The value of `key` in a secret's `SecretString` (a JSON object), or the
/// whole string when no key is asked. The error never shows the secret.
pub fn pick(secret: &str, raw: &str, key: Option<&str>) -> Result<String, String> {
    let Some(key) = key else {
        return Ok(raw.to_owned());
    };
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(raw)
        .map_err(|_| format!("secret {secret} is not a JSON object, so it has no key {key:?}"))?;
    match object.get(key) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(v.to_string()),
        Some(_) => Err(format!(
            "key {key:?} of secret {secret} is not text, a number or true/false"
        )),
        None => Err(format!(
            "secret {secret} has no key {key:?} (keys: {})",
            object.keys().cloned().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The template's parameters marked `NoEcho: true`: their values are
/// masked wherever a status shows parameters. `None` when the template
/// cannot be read here: then every value is masked (never shown by
/// mistake).
pub fn no_echo(template: &[u8]) -> Option<BTreeSet<String>> {
    let text = std::str::from_utf8(template).ok()?;
    let value: Option<serde_json::Value> = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).ok()
    } else {
        serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text)
            .ok()
            .and_then(|v| serde_json::to_value(v).ok())
    };
    let value = value?;
    let Some(params) = value.get("Parameters") else {
        return Some(BTreeSet::new());
    };
    let params = params.as_object()?;
    let names = params
        .iter()
        .filter(|(_, p)| match p.get("NoEcho") {
            Some(serde_json::Value::Bool(b)) => *b,
            Some(serde_json::Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        })
        .map(|(k, _)| k.clone())
        .collect();
    Some(names)
}

/// The map the desired hash is computed over.
pub fn hash_inputs(stored: &BTreeMap<String, Stored>) -> BTreeMap<String, String> {
    stored
        .iter()
        .map(|(k, v)| (k.clone(), v.hash_input()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_picked_from_a_json_secret_and_errors_never_show_the_value() {
        let raw = r#"{"password": "hunter2", "port": 5432}"#;
        assert_eq!(pick("db", raw, Some("password")).as_deref(), Ok("hunter2"));
        assert_eq!(pick("db", raw, Some("port")).as_deref(), Ok("5432"));
        assert_eq!(pick("db", raw, None).as_deref(), Ok(raw));
        let missing = pick("db", raw, Some("user")).unwrap_err();
        assert!(missing.contains("no key \"user\"") && missing.contains("password"));
        assert!(!missing.contains("hunter2"), "{missing}");
        let plain = pick("db", "hunter2", Some("password")).unwrap_err();
        assert!(!plain.contains("hunter2") && plain.contains("not a JSON object"));
    }

    #[test]
    fn no_echo_parameters_are_found_in_yaml_and_json_templates() {
        let yaml = b"Parameters:\n  Pw: {Type: String, NoEcho: true}\n  Name: {Type: String}\n  Key: {Type: String, NoEcho: 'true'}\nResources: {}\n";
        assert_eq!(
            no_echo(yaml),
            Some(BTreeSet::from(["Key".to_owned(), "Pw".to_owned()]))
        );
        let json =
            br#"{"Parameters": {"Pw": {"Type": "String", "NoEcho": true}}, "Resources": {}}"#;
        assert_eq!(no_echo(json), Some(BTreeSet::from(["Pw".to_owned()])));
        assert_eq!(no_echo(b"Resources: {}"), Some(BTreeSet::new()));
        // Unreadable here: everything is masked (`None`), never nothing.
        assert_eq!(no_echo(b"Parameters: [a, b]\nResources: {}"), None);
        assert_eq!(no_echo(b"\xff"), None);
    }

    #[test]
    fn a_secret_enters_the_hash_as_where_it_is_read_and_its_version() {
        let from = ValueRef::Ssm {
            ssm: "/db/pw".into(),
        };
        let at = |version: &str| Stored::Read {
            from: from.clone(),
            version: version.into(),
        };
        assert_ne!(at("1").hash_input(), at("2").hash_input());
        let other = Stored::Read {
            from: ValueRef::Ssm {
                ssm: "/db/other".into(),
            },
            version: "1".into(),
        };
        assert_ne!(
            other.hash_input(),
            at("1").hash_input(),
            "another parameter at its version 1"
        );
        let json = serde_json::to_string(&at("7")).unwrap_or_default();
        assert_eq!(json, r#"{"from":{"ssm":"/db/pw"},"version":"7"}"#);
        let back: Stored = serde_json::from_str(&json).unwrap_or(Stored::Text(String::new()));
        assert_eq!(back, at("7"));
        let text: Stored = serde_json::from_str("\"x\"").unwrap_or(Stored::Read {
            from: from.clone(),
            version: String::new(),
        });
        assert_eq!(text, Stored::Text("x".into()));
    }
}
