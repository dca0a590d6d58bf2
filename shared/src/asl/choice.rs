//! Choice rules: parsed into a tree when the definition loads, evaluated
//! against a Choice state's effective input.
//!
//! Supported: `And`, `Or`, `Not`, and the comparisons in [`Test`]. Any other
//! comparison (`StringMatches`, `Timestamp…`, `…Path`) is refused at load time.

use serde_json::Value;

use super::AslError;
use super::fields::Fields;
use super::path::ReferencePath;

/// A top-level rule of a Choice state: the state to go to when it matches.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ChoiceRule {
    pub(super) rule: Rule,
    pub(super) next: String,
}

/// A boolean expression over the input.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Rule {
    /// True when every rule is (the first false one stops the evaluation).
    And(Vec<Rule>),
    /// True when some rule is (the first true one stops the evaluation).
    Or(Vec<Rule>),
    Not(Box<Rule>),
    /// `Variable` compared by one operator.
    Compare {
        variable: ReferencePath,
        test: Test,
    },
}

/// The comparison operators this interpreter runs.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Test {
    IsPresent(bool),
    IsNull(bool),
    StringEquals(String),
    BooleanEquals(bool),
    NumericEquals(f64),
    NumericGreaterThan(f64),
    NumericLessThan(f64),
}

const OPERATORS: [&str; 7] = [
    "IsPresent",
    "IsNull",
    "StringEquals",
    "BooleanEquals",
    "NumericEquals",
    "NumericGreaterThan",
    "NumericLessThan",
];

impl ChoiceRule {
    /// Parses `Choices[index]` of `state`.
    pub(super) fn parse(state: &str, index: usize, value: &Value) -> Result<Self, AslError> {
        let mut fields = Fields::new(state, format!("Choices[{index}]."), value)?;
        let next = fields.required_string("Next")?;
        let rule = Rule::parse(fields)?;
        Ok(Self { rule, next })
    }
}

impl Rule {
    /// Parses the rule in `fields`, refusing any field it does not use.
    fn parse(mut fields: Fields<'_>) -> Result<Self, AslError> {
        let rule = if let Some(rules) = fields.array("And")? {
            Self::And(Self::parse_all(&fields, "And", rules)?)
        } else if let Some(rules) = fields.array("Or")? {
            Self::Or(Self::parse_all(&fields, "Or", rules)?)
        } else if let Some(rule) = fields.take("Not") {
            let nested = Fields::new(fields.state(), fields.name("Not."), rule)?;
            Self::Not(Box::new(Self::parse(nested)?))
        } else {
            Self::comparison(&mut fields)?
        };
        fields.finish("a choice rule")?;
        Ok(rule)
    }

    /// The nested rules of `And` or `Or`: at least one.
    fn parse_all(fields: &Fields<'_>, field: &str, rules: &[Value]) -> Result<Vec<Self>, AslError> {
        if rules.is_empty() {
            return Err(fields.error(field, "must not be empty"));
        }
        rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let nested =
                    Fields::new(fields.state(), fields.name(&format!("{field}[{i}].")), rule)?;
                Self::parse(nested)
            })
            .collect()
    }

    /// `Variable` and exactly one supported operator.
    fn comparison(fields: &mut Fields<'_>) -> Result<Self, AslError> {
        let variable = fields
            .path("Variable")?
            .ok_or_else(|| fields.error("Variable", "is missing"))?;
        let mut tests = Vec::new();
        for operator in OPERATORS {
            if let Some(value) = fields.take(operator) {
                tests.push(Test::parse(fields, operator, value)?);
            }
        }
        // Every other operator Step Functions has starts like these.
        let is_operator = |name: &str| {
            ["String", "Numeric", "Boolean", "Timestamp", "Is"]
                .iter()
                .any(|p| name.starts_with(p))
        };
        if let Some(other) = fields.leftover()
            && is_operator(other)
        {
            return Err(fields.error(other, "is not supported by the local runner"));
        }
        let test = tests
            .pop()
            .ok_or_else(|| fields.error_here("has no comparison"))?;
        if !tests.is_empty() {
            return Err(fields.error_here("has more than one comparison"));
        }
        Ok(Self::Compare { variable, test })
    }

    /// Whether the rule holds for `input`; a compared variable that is not
    /// there is an error (only `IsPresent` may look for it).
    pub(super) fn matches(&self, input: &Value) -> Result<bool, AslError> {
        match self {
            Self::And(rules) => {
                for rule in rules {
                    if !rule.matches(input)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Self::Or(rules) => {
                for rule in rules {
                    if rule.matches(input)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Self::Not(rule) => Ok(!rule.matches(input)?),
            Self::Compare { variable, test } => test.check(variable, input),
        }
    }
}

impl Test {
    /// Parses the value of `operator` (one of [`OPERATORS`]).
    fn parse(fields: &Fields<'_>, operator: &str, value: &Value) -> Result<Self, AslError> {
        let boolean = || {
            value
                .as_bool()
                .ok_or_else(|| fields.error(operator, "must be true or false"))
        };
        let number = || {
            value
                .as_f64()
                .ok_or_else(|| fields.error(operator, "must be a number"))
        };
        Ok(match operator {
            "IsPresent" => Self::IsPresent(boolean()?),
            "IsNull" => Self::IsNull(boolean()?),
            "BooleanEquals" => Self::BooleanEquals(boolean()?),
            "StringEquals" => Self::StringEquals(
                value
                    .as_str()
                    .ok_or_else(|| fields.error(operator, "must be a string"))?
                    .to_owned(),
            ),
            "NumericEquals" => Self::NumericEquals(number()?),
            "NumericGreaterThan" => Self::NumericGreaterThan(number()?),
            "NumericLessThan" => Self::NumericLessThan(number()?),
            other => return Err(fields.error(other, "is not supported by the local runner")),
        })
    }

    /// The comparison of the value at `variable` in `input`.
    fn check(&self, variable: &ReferencePath, input: &Value) -> Result<bool, AslError> {
        let value = variable.lookup(input);
        let Some(value) = value else {
            return match self {
                Self::IsPresent(expected) => Ok(!expected),
                _ => Err(AslError::runtime(format!(
                    "choice variable {} is not in the input",
                    variable.as_str()
                ))),
            };
        };
        // A value of another type than the operator's never matches.
        Ok(match self {
            Self::IsPresent(expected) => *expected,
            Self::IsNull(expected) => value.is_null() == *expected,
            Self::StringEquals(s) => value.as_str() == Some(s.as_str()),
            Self::BooleanEquals(b) => value.as_bool() == Some(*b),
            Self::NumericEquals(n) => value.as_f64() == Some(*n),
            Self::NumericGreaterThan(n) => value.as_f64().is_some_and(|v| v > *n),
            Self::NumericLessThan(n) => value.as_f64().is_some_and(|v| v < *n),
        })
    }
}
