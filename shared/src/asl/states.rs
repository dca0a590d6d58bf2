//! The states of a definition, parsed when it loads: one variant per state
//! type, each with its fields typed, so that running a state never has to
//! wonder whether a field is there or of the right kind.

use serde_json::{Value, json};

use super::AslError;
use super::choice::ChoiceRule;
use super::fields::Fields;
use super::parameters::Template;
use super::path::ReferencePath;
use super::retry::{Catcher, Retrier};

/// One state of a loaded definition.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum State {
    Pass(Pass),
    Task(Task),
    Choice(Choice),
    Wait(Wait),
    Succeed(Succeed),
    Fail(Fail),
}

/// A `Pass` state: its input, `Result` or `Parameters` put at `ResultPath`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pass {
    pub(super) filters: Filters,
    /// `Result`: wins over `Parameters` when both are given.
    pub(super) result: Option<Value>,
    pub(super) parameters: Option<Template>,
    pub(super) result_path: ResultPath,
    pub(super) transition: Transition,
}

/// A `Task` state: a call of the [`TaskRunner`](super::TaskRunner) with its rules.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Task {
    pub(super) resource: String,
    pub(super) filters: Filters,
    pub(super) parameters: Option<Template>,
    pub(super) result_path: ResultPath,
    /// `TimeoutSeconds`; without it, the longest wait the interpreter honours.
    pub(super) timeout_seconds: Option<f64>,
    /// `TimeoutSecondsPath`: the timeout read from the effective input.
    pub(super) timeout_seconds_path: Option<ReferencePath>,
    pub(super) retry: Vec<Retrier>,
    pub(super) catch: Vec<Catcher>,
    pub(super) transition: Transition,
}

/// A `Choice` state: the first rule that matches, else `Default`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Choice {
    pub(super) filters: Filters,
    pub(super) choices: Vec<ChoiceRule>,
    pub(super) default: Option<String>,
}

/// A `Wait` state.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Wait {
    pub(super) filters: Filters,
    pub(super) duration: WaitFor,
    pub(super) transition: Transition,
}

/// How long a `Wait` state waits (`Timestamp` and `TimestampPath` are refused at load).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum WaitFor {
    /// `Seconds`.
    Seconds(f64),
    /// `SecondsPath`: a number at a path of the effective input.
    SecondsPath(ReferencePath),
}

/// A `Succeed` state.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Succeed {
    pub(super) filters: Filters,
}

/// A `Fail` state: the execution fails with this error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fail {
    /// `Error`; `States.Failed` when absent.
    pub(super) error: String,
    /// `Cause`; empty when absent.
    pub(super) cause: String,
}

/// Where a state goes when it is done: `Next` or `End: true`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Transition {
    Next(String),
    End,
}

/// `InputPath` and `OutputPath`: absent is `$`, `null` (`None`) is `{}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Filters {
    input_path: Option<ReferencePath>,
    output_path: Option<ReferencePath>,
}

/// `ResultPath`: where a result goes in the state's input; `None` (`null`)
/// discards the result and passes the input on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ResultPath(pub(super) Option<ReferencePath>);

impl State {
    /// Parses the state `name` of a definition.
    pub(super) fn parse(name: &str, value: &Value) -> Result<Self, AslError> {
        let mut fields = Fields::new(name, String::new(), value)?;
        fields.refuse_unsupported()?;
        fields.string("Comment")?;
        let kind = fields.required_string("Type")?;
        let state = match kind.as_str() {
            "Pass" => Self::Pass(Pass::parse(&mut fields)?),
            "Task" => Self::Task(Task::parse(&mut fields)?),
            "Choice" => Self::Choice(Choice::parse(&mut fields)?),
            "Wait" => Self::Wait(Wait::parse(&mut fields)?),
            "Succeed" => Self::Succeed(Succeed {
                filters: Filters::parse(&mut fields)?,
            }),
            "Fail" => Self::Fail(Fail::parse(&mut fields)?),
            other => {
                return Err(AslError::runtime(format!(
                    "state {name}: type {other:?} is not supported by the local runner"
                )));
            }
        };
        fields.finish(&format!("a {kind} state"))?;
        Ok(state)
    }

    /// The state's `Type`.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Self::Pass(_) => "Pass",
            Self::Task(_) => "Task",
            Self::Choice(_) => "Choice",
            Self::Wait(_) => "Wait",
            Self::Succeed(_) => "Succeed",
            Self::Fail(_) => "Fail",
        }
    }

    /// Every state this one may go to, each with the field that names it.
    pub(super) fn targets(&self) -> Vec<(String, &str)> {
        fn next(transition: &Transition) -> Vec<(String, &str)> {
            match transition {
                Transition::Next(next) => vec![("Next".to_owned(), next.as_str())],
                Transition::End => Vec::new(),
            }
        }
        match self {
            Self::Pass(pass) => next(&pass.transition),
            Self::Wait(wait) => next(&wait.transition),
            Self::Task(task) => {
                let caught = task.catch.iter().enumerate();
                let catchers = caught.map(|(i, c)| (format!("Catch[{i}].Next"), c.next.as_str()));
                next(&task.transition).into_iter().chain(catchers).collect()
            }
            Self::Choice(choice) => {
                let rules = choice.choices.iter().enumerate();
                let rules = rules.map(|(i, c)| (format!("Choices[{i}].Next"), c.next.as_str()));
                let default = choice
                    .default
                    .iter()
                    .map(|d| ("Default".to_owned(), d.as_str()));
                rules.chain(default).collect()
            }
            Self::Succeed(_) | Self::Fail(_) => Vec::new(),
        }
    }
}

impl Pass {
    fn parse(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        Ok(Self {
            filters: Filters::parse(fields)?,
            result: fields.take("Result").cloned(),
            parameters: parameters(fields)?,
            result_path: ResultPath(fields.result_path()?),
            transition: Transition::parse(fields)?,
        })
    }
}

impl Task {
    fn parse(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        let state = fields.state();
        let timeout_seconds = fields.number("TimeoutSeconds", 0.0)?;
        if timeout_seconds == Some(0.0) {
            return Err(fields.error("TimeoutSeconds", "must be more than 0"));
        }
        let timeout_seconds_path = fields.path("TimeoutSecondsPath")?;
        if timeout_seconds.is_some() && timeout_seconds_path.is_some() {
            return Err(fields.error(
                "TimeoutSecondsPath",
                "and TimeoutSeconds may not both be given",
            ));
        }
        let retry = fields.array("Retry")?.into_iter().flatten().enumerate();
        let retry = retry.map(|(i, rule)| Retrier::parse(state, i, rule));
        let catch = fields.array("Catch")?.into_iter().flatten().enumerate();
        let catch = catch.map(|(i, rule)| Catcher::parse(state, i, rule));
        Ok(Self {
            resource: fields.required_string("Resource")?,
            filters: Filters::parse(fields)?,
            parameters: parameters(fields)?,
            result_path: ResultPath(fields.result_path()?),
            timeout_seconds,
            timeout_seconds_path,
            retry: retry.collect::<Result<_, _>>()?,
            catch: catch.collect::<Result<_, _>>()?,
            transition: Transition::parse(fields)?,
        })
    }
}

impl Choice {
    fn parse(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        let rules = fields
            .array("Choices")?
            .ok_or_else(|| fields.error("Choices", "is missing"))?;
        if rules.is_empty() {
            return Err(fields.error("Choices", "must not be empty"));
        }
        let rules = rules.iter().enumerate();
        Ok(Self {
            filters: Filters::parse(fields)?,
            choices: rules
                .map(|(i, rule)| ChoiceRule::parse(fields.state(), i, rule))
                .collect::<Result<_, _>>()?,
            default: fields.string("Default")?,
        })
    }
}

impl Wait {
    fn parse(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        let seconds = fields.number("Seconds", 0.0)?;
        let path = fields.path("SecondsPath")?;
        let duration = match (seconds, path) {
            (Some(seconds), None) => WaitFor::Seconds(seconds),
            (None, Some(path)) => WaitFor::SecondsPath(path),
            (Some(_), Some(_)) => {
                return Err(fields.error("SecondsPath", "may not be given with Seconds"));
            }
            (None, None) => return Err(fields.error_here("needs Seconds or SecondsPath")),
        };
        Ok(Self {
            filters: Filters::parse(fields)?,
            duration,
            transition: Transition::parse(fields)?,
        })
    }
}

impl Fail {
    fn parse(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        Ok(Self {
            error: fields
                .string("Error")?
                .unwrap_or_else(|| "States.Failed".to_owned()),
            cause: fields.string("Cause")?.unwrap_or_default(),
        })
    }
}

/// `Parameters`, if the state has them.
fn parameters(fields: &mut Fields<'_>) -> Result<Option<Template>, AslError> {
    fields
        .take("Parameters")
        .map(|value| Template::parse(fields, "Parameters", value))
        .transpose()
}

impl Transition {
    fn parse(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        match (fields.string("Next")?, fields.boolean("End")?) {
            (Some(next), None) => Ok(Self::Next(next)),
            (None, Some(true)) => Ok(Self::End),
            (Some(_), Some(_)) => Err(fields.error("End", "may not be given with Next")),
            (None, Some(false)) => Err(fields.error("End", "must be true (or give Next)")),
            (None, None) => Err(fields.error_here("needs Next or End: true")),
        }
    }
}

impl Filters {
    fn parse(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        Ok(Self {
            input_path: fields.nullable_path("InputPath")?,
            output_path: fields.nullable_path("OutputPath")?,
        })
    }

    /// The effective input: `InputPath` applied to the state's input.
    pub(super) fn input(&self, input: &Value) -> Result<Value, AslError> {
        match &self.input_path {
            None => Ok(json!({})),
            Some(path) => path.get(input),
        }
    }

    /// The state's output: `OutputPath` applied to what the state made.
    pub(super) fn output(&self, output: Value) -> Result<Value, AslError> {
        match &self.output_path {
            None => Ok(json!({})),
            Some(path) if path.is_root() => Ok(output),
            Some(path) => path.get(&output),
        }
    }
}

impl ResultPath {
    /// `input` with `result` at the path (`$`: the result alone).
    pub(super) fn place(&self, input: Value, result: Value) -> Result<Value, AslError> {
        match &self.0 {
            None => Ok(input),
            Some(path) => path.set(input, result),
        }
    }
}
