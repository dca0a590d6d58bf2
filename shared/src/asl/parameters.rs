//! `Parameters`: a JSON template whose keys ending in `.$` take the value at a
//! path of the state's input, or of the context object for paths in `$$`.

use serde_json::{Map, Value};

use super::AslError;
use super::fields::Fields;
use super::path::ReferencePath;

/// A parsed `Parameters` template; its paths were checked at load time.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Template {
    /// An object, its keys in the definition's order (`.$` already stripped).
    Object(Vec<(String, Template)>),
    Array(Vec<Template>),
    /// A value copied as it is.
    Literal(Value),
    /// `"key.$": "$.a"`: the value at a path of the effective input.
    Input(ReferencePath),
    /// `"key.$": "$$.Execution.Name"`: the value at a path of the context object.
    Context(ReferencePath),
    /// `"key.$": "States.MathAdd($.a, $.b)"`: the sum of two integers, each
    /// a path of the effective input or a literal (the one intrinsic
    /// function the definitions use).
    MathAdd(Operand, Operand),
}

/// An argument of `States.MathAdd`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Operand {
    Path(ReferencePath),
    Number(i64),
}

impl Operand {
    fn value(&self, input: &Value) -> Result<i64, AslError> {
        match self {
            Self::Number(n) => Ok(*n),
            Self::Path(path) => {
                let value = path.get(input)?;
                value.as_i64().ok_or_else(|| {
                    AslError::runtime(format!("States.MathAdd: {value} is not an integer"))
                })
            }
        }
    }
}

impl Template {
    /// Parses `value`, the field `name` of the state being read by `fields`.
    pub(super) fn parse(fields: &Fields<'_>, name: &str, value: &Value) -> Result<Self, AslError> {
        match value {
            Value::Object(map) => map
                .iter()
                .map(|(key, value)| {
                    let inner = format!("{name}.{key}");
                    match key.strip_suffix(".$") {
                        Some(stripped) => {
                            Ok((stripped.to_owned(), Self::path(fields, &inner, value)?))
                        }
                        None => Ok((key.clone(), Self::parse(fields, &inner, value)?)),
                    }
                })
                .collect::<Result<_, _>>()
                .map(Self::Object),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| Self::parse(fields, &format!("{name}[{i}]"), item))
                .collect::<Result<_, _>>()
                .map(Self::Array),
            other => Ok(Self::Literal(other.clone())),
        }
    }

    /// The value of a `.$` key: a path of the input, or of the context (`$$`).
    fn path(fields: &Fields<'_>, name: &str, value: &Value) -> Result<Self, AslError> {
        let path = value
            .as_str()
            .ok_or_else(|| fields.error(name, "must be a path"))?;
        if let Some(args) = path
            .strip_prefix("States.MathAdd(")
            .and_then(|rest| rest.strip_suffix(')'))
        {
            let operand = |arg: &str| -> Result<Operand, AslError> {
                let arg = arg.trim();
                match arg.parse::<i64>() {
                    Ok(n) => Ok(Operand::Number(n)),
                    Err(_) => fields.parse_path(name, arg).map(Operand::Path),
                }
            };
            return match args.split(',').collect::<Vec<_>>().as_slice() {
                [a, b] => Ok(Self::MathAdd(operand(a)?, operand(b)?)),
                _ => Err(fields.error(name, "States.MathAdd takes two arguments")),
            };
        }
        if path.starts_with("States.") {
            return Err(fields.error(
                name,
                &format!("{path:?}: the local runner knows one intrinsic function, States.MathAdd"),
            ));
        }
        match path.strip_prefix("$$") {
            // The context object is read with the same paths, rooted at `$$`.
            Some(rest) => ReferencePath::parse(&format!("${rest}"))
                .map(Self::Context)
                .map_err(|_| fields.error(name, &format!("is not a reference path: {path:?}"))),
            None => fields.parse_path(name, path).map(Self::Input),
        }
    }

    /// The template filled from `input` and `context`.
    pub(super) fn resolve(&self, input: &Value, context: &Value) -> Result<Value, AslError> {
        match self {
            Self::Object(entries) => {
                let mut out = Map::new();
                for (key, template) in entries {
                    out.insert(key.clone(), template.resolve(input, context)?);
                }
                Ok(Value::Object(out))
            }
            Self::Array(items) => items
                .iter()
                .map(|item| item.resolve(input, context))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Self::Literal(value) => Ok(value.clone()),
            Self::Input(path) => path.get(input),
            Self::Context(path) => path.get(context),
            Self::MathAdd(a, b) => {
                let sum = a
                    .value(input)?
                    .checked_add(b.value(input)?)
                    .ok_or_else(|| {
                        AslError::runtime("States.MathAdd: the sum overflows".to_owned())
                    })?;
                Ok(Value::from(sum))
            }
        }
    }
}
