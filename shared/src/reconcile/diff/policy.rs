//! The policy a preview shows: the Guard rule sets a run of the entry would
//! check (the installation's `PolicySource`, the entry's `policy:`),
//! fetched as artifact-fetch fetches them, checked as template-upload
//! checks them ([`Desired::policy_report`]).

use serde::Serialize;

use super::Desired;
use crate::guard::{self, Report, RuleSet};
use crate::ports::{SourceFetcher, SourceLocation};
use crate::spec::{Source, StackSpec};

/// What the policy found, or why it could not be checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyChecked {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
    /// A rule set that could not be read or does not parse: a run fails
    /// with this (`InvalidPolicy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PolicyChecked {
    /// Whether a run would go on past the check.
    pub fn passes(&self) -> bool {
        self.error.is_none() && self.report.as_ref().is_none_or(Report::passes)
    }

    /// One line, then one per finding.
    pub fn lines(&self) -> Vec<String> {
        match (&self.error, &self.report) {
            (Some(e), _) => vec![e.clone()],
            (None, Some(report)) => {
                let mut lines = vec![report.summary()];
                lines.extend(report.lines());
                lines
            }
            (None, None) => Vec::new(),
        }
    }
}

/// The rule set of `source`'s folder at `at` (else the head of its ref).
pub async fn rule_set<S: SourceFetcher>(
    sources: &S,
    source: &Source,
    at: Option<&str>,
) -> Result<RuleSet, String> {
    let location = SourceLocation::of(source);
    let revision = match at {
        Some(revision) => revision.to_owned(),
        None => {
            let reference = source.effective_ref().unwrap_or_default();
            sources
                .resolve(&location, reference)
                .await
                .map_err(|e| format!("policy: {e}"))?
        }
    };
    let files = sources
        .fetch(&location, &revision, &guard::rules_wanted(source))
        .await
        .map_err(|e| format!("policy: {e}"))?;
    let origin = format!(
        "{}@{}",
        crate::validate::redacted(&location.url),
        &revision[..revision.len().min(12)]
    );
    let files = guard::rule_files(&origin, files)?;
    Ok(RuleSet { origin, files })
}

/// The rule sets a run of `spec` at `desired`'s revision checks:
/// `installation` first (given, or fetched from its source), then the
/// entry's own.
pub async fn rule_sets<S: SourceFetcher>(
    sources: &S,
    installation: Option<&Source>,
    spec: &StackSpec,
    revision: &str,
) -> Result<Vec<RuleSet>, String> {
    let mut sets = Vec::new();
    if let Some(source) = installation {
        sets.push(rule_set(sources, source, None).await?);
    }
    if let Some((source, same)) = guard::entry_policy(spec) {
        sets.push(rule_set(sources, &source, same.then_some(revision)).await?);
    }
    Ok(sets)
}

/// What the policy of `spec` finds in `desired`; `None`: no rules apply.
pub async fn check<S: SourceFetcher>(
    sources: &S,
    installation: Option<&Source>,
    spec: &StackSpec,
    desired: &Desired,
) -> Option<PolicyChecked> {
    if installation.is_none() && spec.policy.is_none() {
        return None;
    }
    Some(
        match rule_sets(sources, installation, spec, &desired.revision).await {
            Err(error) => PolicyChecked {
                report: None,
                error: Some(error),
            },
            Ok(sets) => match desired.policy_report(spec, &sets) {
                Ok(report) => PolicyChecked {
                    report: Some(report),
                    error: None,
                },
                Err(e) => PolicyChecked {
                    report: None,
                    error: Some(e.to_string()),
                },
            },
        },
    )
}
