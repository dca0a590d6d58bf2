//! Policy: CloudFormation Guard rules, checked in-process with Guard's own
//! engine (the `cfn-guard` crate) before any change set is made.
//!
//! - **Rule files** are `.guard` files: every file of a rule set is
//!   evaluated on its own (its `let`s are its own), against one input.
//! - **The input** is the template as written, JSON or YAML (short forms
//!   such as `!Sub` read as `Fn::Sub`), with one key added at its root:
//!   `StackSync: {StackName, Parameters, Tags}`, the stack's name and its
//!   resolved parameters and tags. A macro's output (the SAM transform's
//!   included) is not seen: CloudFormation expands it, not stacksync.
//!   A parameter whose value is a secret, or that the template marks
//!   `NoEcho`, is given as `****`.
//! - **Severity** comes from the rule file: a rule is a warning when the
//!   comment block right above its `rule NAME` line holds `severity: warn`,
//!   and every rule of a file is when its first line is `# severity: warn`.
//!   Everything else blocks.
//! - **Findings** name the rule, its file, the resources (logical ids) the
//!   failing clauses reached, and the rule's own message (`<<…>>`), else
//!   Guard's, without the values it quotes (a parameter may be a secret).
//! - **Guard's reports** are read from its summary, else (cfn-guard 3.2.1
//!   returns only the last 8 KB of a longer one) its whole record tree
//!   (`guard/report.rs`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest message a finding keeps (characters).
pub(crate) const MAX_FINDING_MESSAGE: usize = 300;

/// The most resources a finding names.
pub(crate) const MAX_FINDING_RESOURCES: usize = 20;

/// The root key the stack's name, parameters and tags are given under.
pub const INPUT_KEY: &str = "StackSync";

/// One rule file: its path in the rule set's source, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFile {
    pub path: String,
    pub text: String,
}

/// A rule set: where it comes from (`origin`, as messages name it) and its
/// files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    pub origin: String,
    pub files: Vec<RuleFile>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// The run ends `Failed (PolicyViolation)`; nothing is made.
    Block,
    /// Recorded and shown; the run goes on.
    Warn,
}

/// A rule the input breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub rule: String,
    /// The rule file, as `origin:path`.
    pub file: String,
    pub severity: Severity,
    /// The logical ids of the resources its failing clauses reached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    pub message: String,
}

impl Finding {
    /// One line: `RULE (file) on A, B: message`.
    pub fn line(&self) -> String {
        let on = if self.resources.is_empty() {
            String::new()
        } else {
            format!(" on {}", self.resources.join(", "))
        };
        format!("{}{on}: {} ({})", self.rule, self.message, self.file)
    }
}

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Report {
    /// The rule sets checked (their origins).
    pub rule_sets: Vec<String>,
    /// The rules evaluated (named rules, and a file's unnamed clauses).
    pub rules: u32,
    /// The blocking rules broken.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<Finding>,
    /// The warnings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Finding>,
}

impl Report {
    pub fn passes(&self) -> bool {
        self.violations.is_empty()
    }

    /// `policy: 2 rule(s) broken, 1 warning (12 rules in 1 rule set)`.
    pub fn summary(&self) -> String {
        let sets = self.rule_sets.len();
        let of = format!(
            "{} rule{} in {sets} rule set{}",
            self.rules,
            plural(self.rules as usize),
            plural(sets)
        );
        match (self.violations.len(), self.warnings.len()) {
            (0, 0) => format!("policy: passed ({of})"),
            (0, w) => format!("policy: passed with {w} warning{} ({of})", plural(w)),
            (v, 0) => format!("policy: {v} rule{} broken ({of})", plural(v)),
            (v, w) => format!(
                "policy: {v} rule{} broken, {w} warning{} ({of})",
                plural(v),
                plural(w)
            ),
        }
    }

    /// The violations, then the warnings, one line each, prefixed.
    pub fn lines(&self) -> Vec<String> {
        let violations = self.violations.iter().map(|f| format!("✗ {}", f.line()));
        let warnings = self.warnings.iter().map(|f| format!("! {}", f.line()));
        violations.chain(warnings).collect()
    }

    /// The message a run that breaks a blocking rule ends with.
    pub fn violation_message(&self) -> String {
        let broken: Vec<String> = self.violations.iter().map(Finding::line).collect();
        format!(
            "policy: {} rule{} broken: {}",
            broken.len(),
            plural(broken.len()),
            broken.join("; ")
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A rule set that cannot be used: every run that uses it fails, naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A rule file does not parse.
    #[error("policy: {file}:{line}:{column}: the rule file does not parse: {message}")]
    Parse {
        file: String,
        line: u32,
        column: u32,
        message: String,
    },
    /// Guard could not evaluate a rule file (an unknown function, a
    /// variable that cannot be resolved…).
    #[error("policy: {file}: Guard could not evaluate the rule file: {message}")]
    Evaluation { file: String, message: String },
    /// The template cannot be read as Guard's input.
    #[error("policy: the template cannot be checked: {0}")]
    Input(String),
}

/// The entry's own rule source (`policy:`), as a source to fetch, and
/// whether it is the entry's own source (no `git`, no `s3`: read at the
/// run's revision).
pub fn entry_policy(spec: &crate::spec::StackSpec) -> Option<(crate::spec::Source, bool)> {
    let own = spec.policy.as_ref()?;
    if own.git.is_none() && own.s3.is_none() {
        let source = crate::spec::Source {
            path: own.path.clone(),
            ..spec.source.clone()
        };
        return Some((source, true));
    }
    Some((own.clone(), false))
}

/// What a rule set's source gives: its folder (or file), everything under
/// it; its commit signed as the source says.
pub fn rules_wanted(source: &crate::spec::Source) -> crate::content::Wanted {
    let folder = source.path.trim_end_matches('/').to_owned();
    let mut wanted = crate::content::Wanted::new(vec![(folder, crate::content::Role::Included)]);
    wanted.signed_by = source.signed_by.clone();
    wanted
}

/// The rule files among `files` (their `.guard` files, in path order):
/// none, or one that is not UTF-8, is refused (`origin` names the set).
pub fn rule_files(origin: &str, files: Vec<(String, Vec<u8>)>) -> Result<Vec<RuleFile>, String> {
    let mut rules = files
        .into_iter()
        .filter(|(path, _)| path.ends_with(".guard"))
        .map(|(path, bytes)| match String::from_utf8(bytes) {
            Ok(text) => Ok(RuleFile { path, text }),
            Err(_) => Err(format!(
                "policy: {origin}:{path}: the rule file is not UTF-8"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if rules.is_empty() {
        return Err(format!("policy {origin}: no .guard file there"));
    }
    rules.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(rules)
}

/// The installation's policy source (`PolicySource`: a flow mapping with
/// an entry's `policy:` fields, `{git: URL, ref: main, path: policies}` or
/// `{s3: s3://bucket/rules.zip, path: policies}`); `None` when empty.
pub fn policy_source(text: &str) -> Result<Option<crate::spec::Source>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let source: crate::spec::Source = serde_yaml_ng::from_str(text).map_err(|e| {
        format!("PolicySource: not a source ({{git: URL, ref: REF, path: FOLDER}}): {e}")
    })?;
    if source.git.is_none() && source.s3.is_none() {
        return Err("PolicySource: give `git` or `s3`".into());
    }
    let problems = crate::validate::policy_problems(&source);
    if let Some((field, message)) = problems.first() {
        return Err(format!("PolicySource: {field}: {message}"));
    }
    Ok(Some(source))
}

/// Every file of `sets` parses: the first that does not, with its line.
pub fn parse_all(sets: &[RuleSet]) -> Result<(), PolicyError> {
    for set in sets {
        for file in &set.files {
            evaluate(set, file, "{}")?;
        }
    }
    Ok(())
}

/// Checks `input` (see [`input`]) against every file of `sets`.
pub fn check(sets: &[RuleSet], input: &Value) -> Result<Report, PolicyError> {
    let data = serde_json::to_string(input).map_err(|e| PolicyError::Input(e.to_string()))?;
    let mut report = Report {
        rule_sets: sets.iter().map(|s| s.origin.clone()).collect(),
        ..Report::default()
    };
    for set in sets {
        for file in &set.files {
            let outcome = evaluate(set, file, &data)?;
            let severities = severities(&file.text);
            report.rules = report.rules.saturating_add(outcome.rules);
            for (rule, finding) in outcome.broken {
                let severity = severities.of(&rule);
                let finding = Finding {
                    rule,
                    file: label(set, file),
                    severity,
                    resources: finding.resources,
                    message: finding.message,
                };
                match severity {
                    Severity::Block => report.violations.push(finding),
                    Severity::Warn => report.warnings.push(finding),
                }
            }
        }
    }
    Ok(report)
}

fn label(set: &RuleSet, file: &RuleFile) -> String {
    if set.origin.is_empty() {
        file.path.clone()
    } else {
        format!("{}:{}", set.origin, file.path)
    }
}

/// One rule file against the data (a JSON document): Guard's summary,
/// else, when the summary does not read, its whole record tree.
fn evaluate(set: &RuleSet, file: &RuleFile, data: &str) -> Result<Outcome, PolicyError> {
    let name = label(set, file);
    let summary = run(&name, &file.text, data, false)?;
    if summary.trim().is_empty() {
        // A file with no rules at all (comments only).
        return Ok(Outcome {
            rules: 0,
            broken: Vec::new(),
        });
    }
    // The summary reporter of cfn-guard 3.2.1 returns only the last 8 KB
    // of a longer report (it reads its `BufWriter`'s buffer, not what it
    // flushed): such a report does not read, and the record tree, whole
    // (and much larger), is read instead.
    if let Ok(summary) = serde_json::from_str::<Value>(&summary) {
        return Ok(report::from_summary(&summary));
    }
    let records = run(&name, &file.text, data, true)?;
    let records: Value = serde_json::from_str(&records).map_err(|e| PolicyError::Evaluation {
        file: name.clone(),
        message: format!("Guard's report did not read: {e}"),
    })?;
    Ok(report::from_records(&records))
}

/// Guard on one rule file: its summary (`verbose` false) or its record
/// tree, as JSON text.
fn run(name: &str, rules: &str, data: &str, verbose: bool) -> Result<String, PolicyError> {
    let run = || {
        cfn_guard::run_checks(
            cfn_guard::ValidateInput {
                content: data,
                file_name: "template",
            },
            cfn_guard::ValidateInput {
                content: rules,
                file_name: name,
            },
            verbose,
        )
    };
    // Guard is a large engine fed with files anyone may push: a panic in
    // it fails the check, never the step.
    let output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|_| {
        PolicyError::Evaluation {
            file: name.to_owned(),
            message: "Guard's engine stopped on this file (a panic)".into(),
        }
    })?;
    output.map_err(|e| engine_error(name, &e.to_string()))
}

/// Guard's error, told apart: a parse error names its line and column.
fn engine_error(file: &str, message: &str) -> PolicyError {
    let number_after = |marker: &str| -> Option<u32> {
        let at = message.find(marker)? + marker.len();
        let digits: String = message[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    match (number_after(" at line "), number_after(" at column ")) {
        (Some(line), Some(column)) => {
            let detail = message
                .split_once("when handling ")
                .map(|(_, rest)| rest)
                .unwrap_or(message);
            let detail = detail
                .split(", fragment")
                .next()
                .unwrap_or(detail)
                .trim()
                .trim_end_matches(',');
            PolicyError::Parse {
                file: file.to_owned(),
                line,
                column,
                message: if detail.is_empty() {
                    "unexpected end of the rule or file".into()
                } else {
                    shorten(detail)
                },
            }
        }
        _ => PolicyError::Evaluation {
            file: file.to_owned(),
            message: shorten(message.trim()),
        },
    }
}

/// The severities a rule file gives its rules.
struct Severities {
    file_warns: bool,
    warn: BTreeSet<String>,
}

impl Severities {
    fn of(&self, rule: &str) -> Severity {
        if self.file_warns || self.warn.contains(rule) {
            Severity::Warn
        } else {
            Severity::Block
        }
    }
}

fn says_warn(comment: &str) -> bool {
    let compact: String = comment
        .trim_start_matches('#')
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    compact.starts_with("severity:warn")
}

fn severities(text: &str) -> Severities {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let file_warns = lines
        .first()
        .is_some_and(|l| l.starts_with('#') && says_warn(l));
    let mut warn = BTreeSet::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("rule ") else {
            continue;
        };
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        let above = lines[..i].iter().rev().take_while(|l| l.starts_with('#'));
        if above.into_iter().any(|l| says_warn(l)) {
            warn.insert(name);
        }
    }
    Severities { file_warns, warn }
}

mod input;
mod report;
pub use input::{input, parse_template};
use report::{Outcome, shorten};

#[cfg(test)]
mod tests;
