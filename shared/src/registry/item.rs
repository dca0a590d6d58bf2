//! DynamoDB attribute values ⇄ JSON values, and item ⇄ [`StackEntry`].

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Number, Value};

use super::schema::{ITEM_SCHEMA_VERSION, PK, attr};
use super::{Lease, StackEntry};
use crate::seen::Seen;
use crate::spec::StackSpec;
use crate::status::{Phase, Status, Timestamp};

/// A JSON value as a DynamoDB attribute (maps stay maps: readable in the console).
pub fn to_attr(value: &Value) -> AttributeValue {
    match value {
        Value::Null => AttributeValue::Null(true),
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Number(n) => AttributeValue::N(n.to_string()),
        Value::String(s) => AttributeValue::S(s.clone()),
        Value::Array(items) => AttributeValue::L(items.iter().map(to_attr).collect()),
        Value::Object(map) => {
            AttributeValue::M(map.iter().map(|(k, v)| (k.clone(), to_attr(v))).collect())
        }
    }
}

/// A DynamoDB attribute as JSON; sets and binary values are not used by stacksync.
pub fn from_attr(value: &AttributeValue) -> Result<Value, String> {
    Ok(match value {
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::S(s) => Value::String(s.clone()),
        AttributeValue::N(n) => Value::Number(parse_number(n)?),
        AttributeValue::L(items) => {
            Value::Array(items.iter().map(from_attr).collect::<Result<_, _>>()?)
        }
        AttributeValue::M(map) => {
            // In key order: a DynamoDB map comes as a hash map, in no
            // order, and serde_json keeps the order keys are inserted in
            // (`preserve_order`, which Guard's engine turns on). A value
            // read twice then serializes the same (a stack policy sent to
            // CloudFormation, a spec printed).
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), from_attr(&map[k])?);
            }
            Value::Object(out)
        }
        other => return Err(format!("unexpected attribute type {other:?}")),
    })
}

fn parse_number(text: &str) -> Result<Number, String> {
    if let Ok(i) = text.parse::<i64>() {
        return Ok(i.into());
    }
    if let Ok(u) = text.parse::<u64>() {
        return Ok(u.into());
    }
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .ok_or_else(|| format!("{text:?} is not a number"))
}

/// A serializable value as an attribute.
pub fn to_attr_of<T: serde::Serialize>(value: &T) -> AttributeValue {
    to_attr(&serde_json::to_value(value).unwrap_or(Value::Null))
}

/// The `watch` attribute of a stack item: its phase, and the stack as the
/// last successful run left it. Kept apart from the status record so that
/// the health check's index holds only this.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Watch {
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<Seen>,
    /// What the scheduler needs of `status.findings.drift`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<crate::drift::DriftWatch>,
}

/// A status as it is stored: the record (`status`, without what `watch`
/// holds) and the `watch` attribute.
pub fn status_attributes(status: &Status) -> (AttributeValue, AttributeValue) {
    let watch = Watch {
        phase: status.phase,
        seen: status.applied.seen.clone(),
        drift: status
            .findings
            .drift
            .as_ref()
            .map(crate::drift::DriftRecord::watch),
    };
    // `seen` is the watch's, not the record's.
    let mut record = status.clone();
    record.applied.seen = None;
    (to_attr_of(&record), to_attr_of(&watch))
}

pub fn s(text: impl Into<String>) -> AttributeValue {
    AttributeValue::S(text.into())
}

pub fn n(number: impl ToString) -> AttributeValue {
    AttributeValue::N(number.to_string())
}

type Item = HashMap<String, AttributeValue>;

fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

fn get_n(item: &Item, name: &str) -> Result<Option<i64>, String> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::N(text)) => text
            .parse()
            .map(Some)
            .map_err(|_| format!("{name} is not a whole number: {text:?}")),
        Some(other) => Err(format!("{name} has the wrong type: {other:?}")),
    }
}

fn get_time(item: &Item, name: &str) -> Result<Option<Timestamp>, String> {
    get_s(item, name)
        .map(|text| {
            crate::clock::parse_rfc3339(text)
                .map(Timestamp)
                .ok_or_else(|| format!("{name} is not an RFC 3339 time: {text:?}"))
        })
        .transpose()
}

fn decode<T: serde::de::DeserializeOwned>(item: &Item, name: &str) -> Result<Option<T>, String> {
    item.get(name)
        .map(|v| {
            let json = from_attr(v).map_err(|e| format!("{name}: {e}"))?;
            serde_json::from_value(json).map_err(|e| format!("{name}: {e}"))
        })
        .transpose()
}

/// The most unknown fields dropped from one spec before it is given up on.
const MAX_UNKNOWN_FIELDS: usize = 32;

/// Reads a stored spec, leaving out the fields this version does not know
/// (a later CLI's, or a hand edit): the spec and the fields left out, by
/// path. `stacks.yaml` is read strictly ([`crate::manifest`]); the registry
/// tolerates what a newer writer added, so one such entry never stops
/// the readers of all the others.
pub fn lenient_spec(mut json: Value) -> Result<(StackSpec, Vec<String>), String> {
    let mut unknown = Vec::new();
    loop {
        let error = match serde_json::from_value::<StackSpec>(json.clone()) {
            Ok(spec) => {
                // In name order, however the JSON map keeps its keys.
                unknown.sort();
                return Ok((spec, unknown));
            }
            Err(e) => e.to_string(),
        };
        let field = error
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
            .map(str::to_owned);
        let removed = field
            .filter(|_| unknown.len() < MAX_UNKNOWN_FIELDS)
            .and_then(|f| remove_field(&mut json, &f));
        match removed {
            Some(path) => unknown.push(path),
            None => return Err(format!("{}: {error}", attr::SPEC)),
        }
    }
}

/// Removes `field` from the spec or the maps in it (`source`, `rollback`,
/// its triggers); where it was, by path.
fn remove_field(json: &mut Value, field: &str) -> Option<String> {
    fn take(map: &mut Value, field: &str) -> bool {
        map.as_object_mut()
            .is_some_and(|m| m.remove(field).is_some())
    }
    if take(json, field) {
        return Some(field.to_owned());
    }
    for nested in ["source", "rollback"] {
        if let Some(inner) = json.get_mut(nested)
            && take(inner, field)
        {
            return Some(format!("{nested}.{field}"));
        }
    }
    let triggers = json
        .get_mut("rollback")?
        .get_mut("triggers")?
        .as_array_mut()?;
    let mut found = false;
    for trigger in triggers {
        found |= take(trigger, field);
    }
    found.then(|| format!("rollback.triggers.{field}"))
}

/// Decodes a stack item; the error says which attribute is wrong.
pub fn entry_from_item(item: &Item) -> Result<StackEntry, String> {
    let name = get_s(item, attr::NAME)
        .ok_or("the item has no name")?
        .to_owned();
    let json = item
        .get(attr::SPEC)
        .map(|v| from_attr(v).map_err(|e| format!("{}: {e}", attr::SPEC)))
        .transpose()?
        .ok_or("the item has no spec")?;
    let (spec, unknown) = lenient_spec(json)?;
    let schema_version = get_n(item, attr::SCHEMA_VERSION)?
        .and_then(|v| u64::try_from(v).ok())
        .unwrap_or(0);
    let unsupported = if schema_version > ITEM_SCHEMA_VERSION {
        Some(format!(
            "the entry was written by a later stacksync (item schema {schema_version}; \
             this installation reads schema {ITEM_SCHEMA_VERSION}): upgrade the installation"
        ))
    } else if !unknown.is_empty() {
        Some(format!(
            "the entry's spec holds fields this version of stacksync does not know ({}): \
             upgrade the installation, or apply the entry again without them",
            unknown.join(", ")
        ))
    } else {
        None
    };
    let spec_version = get_n(item, attr::SPEC_VERSION)?
        .and_then(|v| u64::try_from(v).ok())
        .ok_or("the item has no valid specVersion")?;
    let mut status: Status = decode(item, attr::STATUS)?.unwrap_or_default();
    status.times.next_reconcile_at = get_n(item, attr::NEXT_RECONCILE_AT)?.map(Timestamp);
    status.applied.seen = decode::<Watch>(item, attr::WATCH)?.and_then(|w| w.seen);
    let lease = match (
        get_s(item, attr::LEASE_OWNER),
        get_n(item, attr::LEASE_EXPIRES_AT)?,
    ) {
        (Some(owner), Some(expires)) => Some(Lease {
            owner: owner.to_owned(),
            expires_at: Timestamp(expires),
            taken_at: get_n(item, attr::LEASE_TAKEN_AT)?.map(Timestamp),
            parked: decode(item, attr::LEASE_PARKED)?,
        }),
        _ => None,
    };
    Ok(StackEntry {
        name,
        spec_version,
        spec_hash: get_s(item, attr::SPEC_HASH).unwrap_or_default().to_owned(),
        spec,
        suspended: matches!(item.get(attr::SUSPENDED), Some(AttributeValue::Bool(true))),
        deletion_requested_at: get_time(item, attr::DELETION_REQUESTED_AT)?,
        created_at: get_time(item, attr::CREATED_AT)?.unwrap_or(Timestamp(0)),
        updated_at: get_time(item, attr::UPDATED_AT)?.unwrap_or(Timestamp(0)),
        status,
        lease,
        unsupported,
        stored_source_key: item
            .get(attr::SOURCE_KEY)
            .and_then(|v| v.as_s().ok())
            .cloned(),
        owner: decode(item, attr::OWNER)?,
        reviewed: decode(item, attr::REVIEWED)?,
    })
}

/// The key of an item, for error messages.
pub fn item_key(item: &Item) -> String {
    get_s(item, PK).unwrap_or("?").to_owned()
}

#[cfg(test)]
mod tests {

    /// A map read back from DynamoDB (a hash map, in no order) serializes
    /// in key order, whatever serde_json's map keeps: a stack policy read
    /// twice is sent to CloudFormation as the same text.
    #[test]
    fn a_map_read_back_serializes_in_key_order() {
        let map: std::collections::HashMap<String, AttributeValue> =
            ["Resource", "Effect", "Action", "Principal", "Condition"]
                .iter()
                .map(|k| ((*k).to_owned(), AttributeValue::S("x".into())))
                .collect();
        let value = from_attr(&AttributeValue::M(map)).unwrap();
        assert_eq!(
            value.to_string(),
            r#"{"Action":"x","Condition":"x","Effect":"x","Principal":"x","Resource":"x"}"#
        );
    }
    use super::*;
    use serde_json::json;

    #[test]
    fn json_survives_the_round_trip_through_attributes() {
        let value = json!({
            "s": "text", "i": -3, "u": 18_446_744_073_709_551_615u64, "f": 0.5,
            "b": true, "z": null, "l": [1, "two", {"three": 3}], "m": {"nested": {"deep": []}}
        });
        assert_eq!(from_attr(&to_attr(&value)).unwrap(), value);
    }

    #[test]
    fn fields_a_later_version_wrote_are_left_out_and_named() {
        let spec = json!({
            "name": "a", "canary": "always", "waves": ["ops"],
            "source": {"git": "https://h/r.git", "path": "t.yaml", "verify": {"keys": []}},
            "rollback": {"triggers": [{"arn": "arn:aws:cloudwatch:us-east-1:1:alarm:x", "weight": 2}]}
        });
        let (read, unknown) = lenient_spec(spec).unwrap();
        assert_eq!(read.source.path, "t.yaml");
        assert_eq!(
            unknown,
            [
                "canary",
                "rollback.triggers.weight",
                "source.verify",
                "waves"
            ]
        );
        // A wrong type is not a field to leave out.
        let err = lenient_spec(json!({"name": "a", "source": {"path": 3}})).unwrap_err();
        assert!(err.starts_with("spec: invalid type"), "{err}");
    }

    #[test]
    fn an_item_of_a_later_schema_or_with_unknown_fields_is_read_but_marked_unsupported() {
        let spec = json!({"name": "a", "source": {"git": "https://h/r.git", "path": "t.yaml"}});
        let item = |schema: i64, spec: &Value| {
            let mut item = Item::new();
            item.insert(attr::NAME.into(), s("a"));
            item.insert(attr::SPEC.into(), to_attr(spec));
            item.insert(attr::SPEC_VERSION.into(), n(1));
            item.insert(attr::SCHEMA_VERSION.into(), n(schema));
            item
        };
        assert_eq!(entry_from_item(&item(1, &spec)).unwrap().unsupported, None);
        let later = entry_from_item(&item(2, &spec))
            .unwrap()
            .unsupported
            .unwrap();
        assert!(later.contains("item schema 2"), "{later}");
        let mut extra = spec.clone();
        extra["canary"] = json!("always");
        let unknown = entry_from_item(&item(1, &extra))
            .unwrap()
            .unsupported
            .unwrap();
        assert!(unknown.contains("(canary)"), "{unknown}");
    }

    #[test]
    fn a_broken_item_names_the_bad_attribute() {
        let mut item = Item::new();
        item.insert(attr::NAME.into(), s("a"));
        item.insert(attr::SPEC.into(), to_attr(&json!({"name": "a"})));
        let err = entry_from_item(&item).unwrap_err();
        assert!(err.starts_with("spec: missing field `source`"), "{err}");
    }
}
