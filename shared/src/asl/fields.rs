//! Reading one JSON object of a definition, field by field.
//!
//! Every error names the state and the field (`state T: field Retry[0].MaxAttempts
//! must be ...`), and [`Fields::finish`] refuses whatever no parser took, so a
//! field the interpreter would ignore can never slip through.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::AslError;
use super::path::ReferencePath;

/// Fields Step Functions defines on some state but this interpreter does not
/// run: refused with "not supported by the local runner" rather than "not allowed".
const UNSUPPORTED: &[&str] = &[
    "ResultSelector",
    "Credentials",
    "QueryLanguage",
    "Timestamp",
    "TimestampPath",
    "ErrorPath",
    "CausePath",
    "HeartbeatSeconds",
    "HeartbeatSecondsPath",
    "Arguments",
    "Output",
    "Assign",
    "Items",
];

/// Fields that belong to some state type this interpreter runs: on a state of
/// another type they are a mistake in the definition, not a missing feature.
const STATE_FIELDS: &[&str] = &[
    "Type",
    "Comment",
    "Next",
    "End",
    "InputPath",
    "OutputPath",
    "ResultPath",
    "Parameters",
    "Result",
    "Resource",
    "TimeoutSeconds",
    "Retry",
    "Catch",
    "Choices",
    "Default",
    "Seconds",
    "SecondsPath",
    "Error",
    "Cause",
];

/// One JSON object of a definition being read; see the module documentation.
#[derive(Debug)]
pub(super) struct Fields<'a> {
    state: &'a str,
    /// Where the object is inside the state (`Retry[0].`), empty for the state itself.
    prefix: String,
    object: &'a Map<String, Value>,
    taken: BTreeSet<&'a str>,
}

impl<'a> Fields<'a> {
    /// The object `value`, found at `prefix` (`""` or ending in `.`) in `state`.
    pub(super) fn new(state: &'a str, prefix: String, value: &'a Value) -> Result<Self, AslError> {
        let object = value.as_object().ok_or_else(|| {
            AslError::runtime(match prefix.strip_suffix('.') {
                Some(place) => format!("state {state}: field {place} must be an object"),
                None => format!("state {state} must be an object"),
            })
        })?;
        Ok(Self {
            state,
            prefix,
            object,
            taken: BTreeSet::new(),
        })
    }

    /// The state this object belongs to.
    pub(super) fn state(&self) -> &'a str {
        self.state
    }

    /// The full name of `field` (`Retry[0].MaxAttempts`), for messages and nested objects.
    pub(super) fn name(&self, field: &str) -> String {
        format!("{}{field}", self.prefix)
    }

    /// An error about `field`: `state S: field F {problem}`.
    pub(super) fn error(&self, field: &str, problem: &str) -> AslError {
        AslError::runtime(format!(
            "state {}: field {} {problem}",
            self.state,
            self.name(field)
        ))
    }

    /// An error about the object itself: `state S: field Choices[0] {problem}`
    /// (`state S: {problem}` for the state).
    pub(super) fn error_here(&self, problem: &str) -> AslError {
        match self.prefix.strip_suffix('.') {
            Some(place) => {
                AslError::runtime(format!("state {}: field {place} {problem}", self.state))
            }
            None => AslError::runtime(format!("state {}: {problem}", self.state)),
        }
    }

    /// Takes `field` if it is there (a JSON `null` is there).
    pub(super) fn take(&mut self, field: &str) -> Option<&'a Value> {
        let (key, value) = self.object.get_key_value(field)?;
        self.taken.insert(key.as_str());
        Some(value)
    }

    /// An optional string.
    pub(super) fn string(&mut self, field: &str) -> Result<Option<String>, AslError> {
        self.take(field)
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| self.error(field, "must be a string"))
            })
            .transpose()
    }

    /// A string that must be there.
    pub(super) fn required_string(&mut self, field: &str) -> Result<String, AslError> {
        self.string(field)?
            .ok_or_else(|| self.error(field, "is missing"))
    }

    /// An optional number of at least `min` (seconds, rates: never negative).
    pub(super) fn number(&mut self, field: &str, min: f64) -> Result<Option<f64>, AslError> {
        self.take(field)
            .map(|v| {
                v.as_f64()
                    .filter(|n| n.is_finite() && *n >= min)
                    .ok_or_else(|| {
                        self.error(field, &format!("must be a number of at least {min}"))
                    })
            })
            .transpose()
    }

    /// An optional whole number that fits a `u32`.
    pub(super) fn count(&mut self, field: &str) -> Result<Option<u32>, AslError> {
        self.take(field)
            .map(|v| {
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| self.error(field, "must be a whole number, 0 or more"))
            })
            .transpose()
    }

    /// An optional boolean.
    pub(super) fn boolean(&mut self, field: &str) -> Result<Option<bool>, AslError> {
        self.take(field)
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| self.error(field, "must be true or false"))
            })
            .transpose()
    }

    /// An optional array (which may be empty).
    pub(super) fn array(&mut self, field: &str) -> Result<Option<&'a Vec<Value>>, AslError> {
        self.take(field)
            .map(|v| {
                v.as_array()
                    .ok_or_else(|| self.error(field, "must be an array"))
            })
            .transpose()
    }

    /// An optional reference path, checked now.
    pub(super) fn path(&mut self, field: &str) -> Result<Option<ReferencePath>, AslError> {
        self.string(field)?
            .map(|p| self.parse_path(field, &p))
            .transpose()
    }

    /// `path`, the value of `field`, parsed.
    pub(super) fn parse_path(&self, field: &str, path: &str) -> Result<ReferencePath, AslError> {
        ReferencePath::parse(path)
            .map_err(|_| self.error(field, &format!("is not a reference path: {path:?}")))
    }

    /// A path field that may also be `null` (`InputPath`, `OutputPath`,
    /// `ResultPath`): absent is `$`, `null` is `None`.
    pub(super) fn nullable_path(&mut self, field: &str) -> Result<Option<ReferencePath>, AslError> {
        match self.take(field) {
            None => Ok(Some(ReferencePath::root())),
            Some(Value::Null) => Ok(None),
            Some(Value::String(p)) => self.parse_path(field, p).map(Some),
            Some(_) => Err(self.error(field, "must be a path or null")),
        }
    }

    /// Refuses the fields Step Functions has but this interpreter does not run,
    /// before anything else can complain that what they stand for is missing.
    pub(super) fn refuse_unsupported(&self) -> Result<(), AslError> {
        match self
            .object
            .keys()
            .find(|k| UNSUPPORTED.contains(&k.as_str()))
        {
            Some(field) => Err(self.error(field, "is not supported by the local runner")),
            None => Ok(()),
        }
    }

    /// A `ResultPath` (a state's or a catcher's): absent is `$`, `null`
    /// discards the result, and a path may not go through an array.
    pub(super) fn result_path(&mut self) -> Result<Option<ReferencePath>, AslError> {
        let path = self.nullable_path("ResultPath")?;
        if path.as_ref().is_some_and(ReferencePath::indexes_arrays) {
            return Err(self.error("ResultPath", "may not index arrays"));
        }
        Ok(path)
    }

    /// The first field no one took, if any.
    pub(super) fn leftover(&self) -> Option<&'a str> {
        self.object
            .keys()
            .map(String::as_str)
            .find(|k| !self.taken.contains(k))
    }

    /// Refuses every field no one took; `what` says what the object is ("a Pass state").
    pub(super) fn finish(self, what: &str) -> Result<(), AslError> {
        let Some(field) = self.leftover() else {
            return Ok(());
        };
        let is_state = self.prefix.is_empty();
        if UNSUPPORTED.contains(&field) || (is_state && !STATE_FIELDS.contains(&field)) {
            Err(self.error(field, "is not supported by the local runner"))
        } else {
            Err(self.error(field, &format!("is not allowed in {what}")))
        }
    }
}
