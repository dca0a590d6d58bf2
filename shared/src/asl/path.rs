//! Reference paths: `$`, `$.a.b`, `$.a[0].b`, `$['key with space']` is not needed here.

use serde_json::{Map, Value};

use super::AslError;

enum Segment {
    Key(String),
    Index(usize),
}

fn parse(path: &str) -> Result<Vec<Segment>, AslError> {
    let bad = || {
        AslError::new(
            "States.Runtime",
            format!("{path:?} is not a reference path"),
        )
    };
    let rest = path.strip_prefix('$').ok_or_else(bad)?;
    let mut segments = Vec::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                let mut key = String::new();
                while let Some(&n) = chars.peek() {
                    if n == '.' || n == '[' {
                        break;
                    }
                    key.push(n);
                    chars.next();
                }
                if key.is_empty() {
                    return Err(bad());
                }
                segments.push(Segment::Key(key));
            }
            '[' => {
                let mut digits = String::new();
                for n in chars.by_ref() {
                    if n == ']' {
                        break;
                    }
                    digits.push(n);
                }
                segments.push(Segment::Index(digits.parse().map_err(|_| bad())?));
            }
            _ => return Err(bad()),
        }
    }
    Ok(segments)
}

/// The value at `path`; a missing field is `States.Runtime` as in Step Functions.
pub fn get_path(value: &Value, path: &str) -> Result<Value, AslError> {
    let mut current = value;
    for segment in parse(path)? {
        current = match (&segment, current) {
            (Segment::Key(k), Value::Object(map)) => map.get(k),
            (Segment::Index(i), Value::Array(items)) => items.get(*i),
            _ => None,
        }
        .ok_or_else(|| {
            AslError::new(
                "States.Runtime",
                format!("the path {path} does not exist in the input"),
            )
        })?;
    }
    Ok(current.clone())
}

/// `input` with `value` put at `path` (creating objects on the way); `$` replaces all.
pub fn set_path(input: Value, path: &str, value: Value) -> Result<Value, AslError> {
    let segments = parse(path)?;
    if segments.is_empty() {
        return Ok(value);
    }
    let mut root = input;
    if !root.is_object() {
        root = Value::Object(Map::new());
    }
    let mut current = &mut root;
    for (i, segment) in segments.iter().enumerate() {
        let Segment::Key(key) = segment else {
            return Err(AslError::new(
                "States.Runtime",
                format!("ResultPath {path} may not index arrays"),
            ));
        };
        let map = current.as_object_mut().ok_or_else(|| {
            AslError::new(
                "States.Runtime",
                format!("ResultPath {path} goes through a non-object"),
            )
        })?;
        if i + 1 == segments.len() {
            map.insert(key.clone(), value);
            break;
        }
        current = map
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    Ok(root)
}
