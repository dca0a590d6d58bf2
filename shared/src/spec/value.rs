//! A template parameter's value in a spec: text, or where a run reads it
//! (`{ssm: …}`, `{secret: …, key: …}`, `{fromStack: …, output: …}`).
//!
//! What a reference points at is read at reconcile time, in the stack's
//! account and region; the value itself is never part of the spec, the
//! status, the run's state or a log line.

use std::fmt;

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// One parameter's value as the spec gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ParameterValue {
    /// The value itself.
    Text(String),
    /// Where a run reads it.
    From(ValueRef),
}

/// Where a parameter's value is read at reconcile time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ValueRef {
    /// An SSM parameter (String, StringList or SecureString, decrypted):
    /// its name (`/path/name`) or ARN.
    Ssm { ssm: String },
    /// A Secrets Manager secret (ARN or name): its whole `SecretString`,
    /// or one field of it when it is a JSON object and `key` is given.
    Secret {
        secret: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
    /// An output of another registered stack.
    FromStack {
        #[serde(rename = "fromStack")]
        from_stack: String,
        output: String,
    },
}

impl ValueRef {
    /// What it names, for messages and `get --explain` (never the value).
    pub fn describe(&self) -> String {
        match self {
            Self::Ssm { ssm } => format!("SSM parameter {ssm}"),
            Self::Secret { secret, key: None } => format!("secret {secret}"),
            Self::Secret {
                secret,
                key: Some(key),
            } => format!("key {key:?} of secret {secret}"),
            Self::FromStack { from_stack, output } => {
                format!("output {output} of stack {from_stack}")
            }
        }
    }

    /// Whether the value is a secret's: masked wherever it could show.
    pub fn is_secret(&self) -> bool {
        !matches!(self, Self::FromStack { .. })
    }

    /// Reads a reference from a `stacks.yaml` mapping: exactly one of the
    /// three shapes, or an error that says which keys are wrong.
    pub(super) fn read(map: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        let keys: Vec<&str> = map.keys().map(String::as_str).collect();
        let text = |key: &str| -> Result<String, String> {
            match map.get(key) {
                Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
                Some(_) => Err(format!("{key} must be non-empty text")),
                None => Err(format!("{key} is missing")),
            }
        };
        let allowed: &[&str] = if map.contains_key("ssm") {
            &["ssm"]
        } else if map.contains_key("secret") {
            &["secret", "key"]
        } else if map.contains_key("fromStack") {
            &["fromStack", "output"]
        } else {
            return Err(format!(
                "a mapping must be {{ssm: NAME}}, {{secret: ARN, key: FIELD}} or \
                 {{fromStack: NAME, output: KEY}} (found keys: {})",
                keys.join(", ")
            ));
        };
        if let Some(extra) = keys.iter().find(|k| !allowed.contains(k)) {
            return Err(format!(
                "{extra:?} does not go with {:?} (allowed: {})",
                allowed[0],
                allowed.join(", ")
            ));
        }
        Ok(match allowed[0] {
            "ssm" => Self::Ssm { ssm: text("ssm")? },
            "secret" => Self::Secret {
                secret: text("secret")?,
                key: map.contains_key("key").then(|| text("key")).transpose()?,
            },
            _ => Self::FromStack {
                from_stack: text("fromStack")?,
                output: text("output")?,
            },
        })
    }
}

impl ParameterValue {
    /// The text, when the spec gives the value itself.
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Text(s) => Some(s),
            Self::From(_) => None,
        }
    }

    /// Where it is read, when it is a reference.
    pub fn reference(&self) -> Option<&ValueRef> {
        match self {
            Self::Text(_) => None,
            Self::From(r) => Some(r),
        }
    }
}

impl From<&str> for ParameterValue {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for ParameterValue {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl PartialEq<str> for ParameterValue {
    fn eq(&self, other: &str) -> bool {
        self.text() == Some(other)
    }
}

impl PartialEq<&str> for ParameterValue {
    fn eq(&self, other: &&str) -> bool {
        self.text() == Some(*other)
    }
}

impl fmt::Display for ParameterValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(s) => f.write_str(s),
            Self::From(r) => write!(f, "({})", r.describe()),
        }
    }
}

/// A YAML scalar read as text: `14`, `true` and `"14"` all mean the string "14"/"true".
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    fn into_text(self) -> String {
        match self {
            Self::Text(s) => s,
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Bool(b) => b.to_string(),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawParameter {
    One(Scalar),
    List(Vec<Scalar>),
    From(serde_json::Map<String, serde_json::Value>),
}

pub(super) fn scalar_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    let raw: Option<BTreeMap<String, serde_json::Value>> = Option::deserialize(d)?;
    raw.unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            let scalar: Scalar = serde_json::from_value(v).map_err(|_| {
                serde::de::Error::custom(format!(
                    "the value of {k:?} must be text, a number or true/false"
                ))
            })?;
            Ok((k, scalar.into_text()))
        })
        .collect()
}

pub(super) fn parameter_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, ParameterValue>, D::Error> {
    let raw: Option<BTreeMap<String, serde_json::Value>> = Option::deserialize(d)?;
    raw.unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            let value: RawParameter = serde_json::from_value(v).map_err(|_| {
                serde::de::Error::custom(format!(
                    "the value of parameter {k:?} must be text, a number, true/false, \
                     a list of those, or {{ssm: NAME}}, {{secret: ARN, key: FIELD}} or \
                     {{fromStack: NAME, output: KEY}}"
                ))
            })?;
            let value = match value {
                RawParameter::One(s) => ParameterValue::Text(s.into_text()),
                RawParameter::List(items) => ParameterValue::Text(
                    items
                        .into_iter()
                        .map(Scalar::into_text)
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                RawParameter::From(map) => ParameterValue::From(
                    ValueRef::read(&map)
                        .map_err(|e| serde::de::Error::custom(format!("parameter {k:?}: {e}")))?,
                ),
            };
            Ok((k, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: serde_json::Value) -> Result<ValueRef, String> {
        ValueRef::read(json.as_object().unwrap_or(&serde_json::Map::new()))
    }

    #[test]
    fn each_reference_shape_is_read_and_written_back_as_it_was() {
        for (json, want) in [
            (
                serde_json::json!({"ssm": "/net/vpc"}),
                ValueRef::Ssm {
                    ssm: "/net/vpc".into(),
                },
            ),
            (
                serde_json::json!({"secret": "arn:s", "key": "password"}),
                ValueRef::Secret {
                    secret: "arn:s".into(),
                    key: Some("password".into()),
                },
            ),
            (
                serde_json::json!({"secret": "arn:s"}),
                ValueRef::Secret {
                    secret: "arn:s".into(),
                    key: None,
                },
            ),
            (
                serde_json::json!({"fromStack": "network", "output": "VpcId"}),
                ValueRef::FromStack {
                    from_stack: "network".into(),
                    output: "VpcId".into(),
                },
            ),
        ] {
            assert_eq!(read(json.clone()), Ok(want.clone()));
            assert_eq!(serde_json::to_value(&want).unwrap_or_default(), json);
        }
    }

    #[test]
    fn a_wrong_reference_says_which_key_is_wrong() {
        for (json, words) in [
            (
                serde_json::json!({"ssm": "/a", "key": "b"}),
                "\"key\" does not go with \"ssm\"",
            ),
            (serde_json::json!({"fromStack": "n"}), "output is missing"),
            (
                serde_json::json!({"secret": ""}),
                "secret must be non-empty",
            ),
            (serde_json::json!({"vault": "x"}), "found keys: vault"),
            (serde_json::json!({"ssm": 3}), "ssm must be non-empty text"),
        ] {
            let err = read(json).unwrap_err();
            assert!(err.contains(words), "{err}");
        }
    }
}
