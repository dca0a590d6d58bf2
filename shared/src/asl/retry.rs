//! A Task state's `Retry` and `Catch` rules.

use std::time::Duration;

use serde_json::{Value, json};

use super::AslError;
use super::fields::Fields;
use super::run::seconds_to_wait;
use super::states::ResultPath;

/// `ErrorEquals`: the error names a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ErrorEquals(Vec<String>);

impl ErrorEquals {
    /// The rule's `ErrorEquals`: a non-empty array of names.
    fn parse(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        let names = fields
            .array("ErrorEquals")?
            .ok_or_else(|| fields.error("ErrorEquals", "is missing"))?;
        if names.is_empty() {
            return Err(fields.error("ErrorEquals", "must not be empty"));
        }
        names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                name.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| fields.error(&format!("ErrorEquals[{i}]"), "must be a string"))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether the rule applies to the error `name`.
    pub(super) fn matches(&self, name: &str) -> bool {
        self.0.iter().any(|e| {
            // States.ALL matches everything but States.Runtime-class interpreter errors
            // are matched too here: they are bugs we want recorded, not hidden.
            e == name
                || e == "States.ALL"
                || (e == "States.TaskFailed" && !name.starts_with("States."))
        })
    }
}

/// One rule of `Retry`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Retrier {
    pub(super) errors: ErrorEquals,
    pub(super) interval_seconds: f64,
    pub(super) max_attempts: u32,
    pub(super) backoff_rate: f64,
    pub(super) max_delay_seconds: Option<f64>,
    /// `JitterStrategy: FULL`: each delay is a random part of itself.
    pub(super) full_jitter: bool,
}

impl Retrier {
    /// Parses `Retry[index]` of `state`, with Step Functions' defaults.
    pub(super) fn parse(state: &str, index: usize, value: &Value) -> Result<Self, AslError> {
        let mut fields = Fields::new(state, format!("Retry[{index}]."), value)?;
        let errors = ErrorEquals::parse(&mut fields)?;
        let full_jitter = match fields.string("JitterStrategy")?.as_deref() {
            None | Some("NONE") => false,
            Some("FULL") => true,
            Some(_) => return Err(fields.error("JitterStrategy", "must be FULL or NONE")),
        };
        let retrier = Self {
            errors,
            interval_seconds: fields.number("IntervalSeconds", 0.0)?.unwrap_or(1.0),
            max_attempts: fields.count("MaxAttempts")?.unwrap_or(3),
            backoff_rate: fields.number("BackoffRate", 1.0)?.unwrap_or(2.0),
            max_delay_seconds: fields.number("MaxDelaySeconds", 0.0)?,
            full_jitter,
        };
        fields.finish("a retrier")?;
        Ok(retrier)
    }

    /// The delay before retry number `done + 1`.
    fn delay(&self, done: u32) -> Duration {
        let exponent = i32::try_from(done).unwrap_or(i32::MAX);
        let mut delay = self.interval_seconds * self.backoff_rate.powi(exponent);
        if let Some(max) = self.max_delay_seconds {
            delay = delay.min(max);
        }
        if self.full_jitter {
            delay *= jitter();
        }
        seconds_to_wait(delay, 1.0)
    }
}

/// The attempts of one Task state so far, counted per retrier.
#[derive(Debug)]
pub(super) struct Retries<'a> {
    retriers: &'a [Retrier],
    done: Vec<u32>,
}

impl<'a> Retries<'a> {
    /// No retries yet.
    pub(super) fn new(retriers: &'a [Retrier]) -> Self {
        Self {
            retriers,
            done: vec![0; retriers.len()],
        }
    }

    /// The delay before the next attempt, or `None` when no retrier applies
    /// or the first one that does has used up its attempts (later retriers
    /// are not tried then, as in Step Functions).
    pub(super) fn delay(&mut self, error: &AslError) -> Option<Duration> {
        let (index, retrier) = self
            .retriers
            .iter()
            .enumerate()
            .find(|(_, r)| r.errors.matches(&error.name))?;
        let done = &mut self.done[index];
        if *done >= retrier.max_attempts {
            return None;
        }
        let delay = retrier.delay(*done);
        *done += 1;
        Some(delay)
    }
}

/// A number in [0, 1) without a random-number crate: the clock's nanoseconds.
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1_000_000) / 1_000_000.0
}

/// One rule of `Catch`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Catcher {
    pub(super) errors: ErrorEquals,
    /// Where the error goes in the state's input (`$` when absent: it replaces it).
    pub(super) result_path: ResultPath,
    pub(super) next: String,
}

impl Catcher {
    /// Parses `Catch[index]` of `state`.
    pub(super) fn parse(state: &str, index: usize, value: &Value) -> Result<Self, AslError> {
        let mut fields = Fields::new(state, format!("Catch[{index}]."), value)?;
        let catcher = Self {
            errors: ErrorEquals::parse(&mut fields)?,
            result_path: ResultPath(fields.result_path()?),
            next: fields.required_string("Next")?,
        };
        fields.finish("a catcher")?;
        Ok(catcher)
    }

    /// The first of `catchers` that applies to `error`.
    pub(super) fn find<'c>(catchers: &'c [Self], error: &AslError) -> Option<&'c Self> {
        catchers.iter().find(|c| c.errors.matches(&error.name))
    }

    /// The input of the state the catcher goes to: `input` with the error at
    /// the catcher's `ResultPath`.
    pub(super) fn output(&self, input: Value, error: &AslError) -> Result<Value, AslError> {
        let caught = json!({"Error": error.name, "Cause": error.cause});
        self.result_path.place(input, caught)
    }
}
