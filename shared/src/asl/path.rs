//! Reference paths: `$`, `$.a.b`, `$.a[0].b`; `$['key with space']` is not needed here.
//!
//! A definition's paths are parsed once, when it loads ([`ReferencePath`]),
//! so that a malformed path is refused there rather than found mid-run.

use serde_json::{Map, Value};

use super::AslError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A parsed reference path, keeping its text for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferencePath {
    text: String,
    segments: Vec<Segment>,
}

impl ReferencePath {
    /// Parses `path`; anything but `$` followed by `.key` and `[index]` is an error.
    pub fn parse(path: &str) -> Result<Self, AslError> {
        Ok(Self {
            text: path.to_owned(),
            segments: parse(path)?,
        })
    }

    /// `$`: the whole value.
    pub fn root() -> Self {
        Self {
            text: "$".to_owned(),
            segments: Vec::new(),
        }
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this is `$`.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// Whether the path goes through an array index (which a `ResultPath` may not).
    pub fn indexes_arrays(&self) -> bool {
        self.segments.iter().any(|s| matches!(s, Segment::Index(_)))
    }

    /// The value at this path, if there is one.
    pub fn lookup<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        let mut current = value;
        for segment in &self.segments {
            current = match (segment, current) {
                (Segment::Key(k), Value::Object(map)) => map.get(k),
                (Segment::Index(i), Value::Array(items)) => items.get(*i),
                _ => None,
            }?;
        }
        Some(current)
    }

    /// The value at this path; a missing field is `States.Runtime` as in Step Functions.
    pub fn get(&self, value: &Value) -> Result<Value, AslError> {
        self.lookup(value).cloned().ok_or_else(|| {
            AslError::new(
                "States.Runtime",
                format!("the path {} does not exist in the input", self.text),
            )
        })
    }

    /// `input` with `value` put at this path (creating objects on the way); `$` replaces all.
    pub fn set(&self, input: Value, value: Value) -> Result<Value, AslError> {
        let path = &self.text;
        if self.segments.is_empty() {
            return Ok(value);
        }
        let mut root = input;
        if !root.is_object() {
            root = Value::Object(Map::new());
        }
        let mut current = &mut root;
        for (i, segment) in self.segments.iter().enumerate() {
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
            if i + 1 == self.segments.len() {
                map.insert(key.clone(), value);
                break;
            }
            current = map
                .entry(key.clone())
                .or_insert_with(|| Value::Object(Map::new()));
        }
        Ok(root)
    }
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
    ReferencePath::parse(path)?.get(value)
}

/// `input` with `value` put at `path` (creating objects on the way); `$` replaces all.
pub fn set_path(input: Value, path: &str, value: Value) -> Result<Value, AslError> {
    ReferencePath::parse(path)?.set(input, value)
}
