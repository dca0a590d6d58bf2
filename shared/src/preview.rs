//! What a change set would do, as people review it: one row per resource
//! change, in CloudFormation's own terms (`Add`, `Modify`, `Remove`,
//! `Import`, `Dynamic`; replacement `True`, `Conditional`, `False`), with the
//! properties it changes. Recorded before an adoption runs, and shown by the
//! CLI.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The most rows a status keeps of one preview (a registry item holds
/// 400 KB; a stack has at most 500 resources, nested stacks more).
pub const MAX_RECORDED_CHANGES: usize = 100;

/// One resource change of a change set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceChange {
    /// `Add`, `Modify`, `Remove`, `Import` or `Dynamic`.
    pub action: String,
    pub logical_id: String,
    pub resource_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_id: Option<String>,
    /// For a `Modify`: `True`, `Conditional` or `False`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    /// What it changes: `Properties.VisibilityTimeout`, `Tags`, … (each
    /// once, in CloudFormation's order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

impl ResourceChange {
    /// Whether the change replaces (or may replace) the resource.
    pub fn replaces(&self) -> bool {
        matches!(self.replacement.as_deref(), Some("True" | "Conditional"))
    }
}

impl fmt::Display for ResourceChange {
    /// `Modify Queue (AWS::SQS::Queue), replacement False: Properties.VisibilityTimeout`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({})",
            self.action, self.logical_id, self.resource_type
        )?;
        if let Some(replacement) = &self.replacement {
            write!(f, ", replacement {replacement}")?;
        }
        if !self.changed.is_empty() {
            write!(f, ": {}", self.changed.join(", "))?;
        }
        Ok(())
    }
}

/// A change set's rows as a status keeps them: at most
/// [`MAX_RECORDED_CHANGES`], and how many more there were.
pub fn bounded(mut changes: Vec<ResourceChange>) -> (Vec<ResourceChange>, usize) {
    let more = changes.len().saturating_sub(MAX_RECORDED_CHANGES);
    changes.truncate(MAX_RECORDED_CHANGES);
    (changes, more)
}

/// One check CloudFormation made of a change set, besides its rows: a
/// pre-deployment validation (`DescribeEvents` of the change set), a hook's
/// result (`ListHookResults`), or a hook that will run when it is executed
/// (`DescribeChangeSetHooks`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeSetCheck {
    /// `validation`, `hook`, or `hook to run`.
    pub kind: String,
    /// The validation's name or the hook's type.
    pub name: String,
    /// What it found: `FAILED`, `SKIPPED`, `HOOK_COMPLETE_FAILED`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `FAIL` (the operation stops) or `WARN` (it goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Where: a template path, a logical id, a resource type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ChangeSetCheck {
    /// One line: `validation NAME (WARN) at PATH: FAILED: reason`.
    pub fn line(&self) -> String {
        let mut line = format!("{} {}", self.kind, self.name);
        if let Some(mode) = &self.mode {
            line.push_str(&format!(" ({mode})"));
        }
        if let Some(target) = &self.target {
            line.push_str(&format!(" on {target}"));
        }
        match (&self.status, &self.reason) {
            (Some(status), Some(reason)) => line.push_str(&format!(": {status}: {reason}")),
            (Some(status), None) => line.push_str(&format!(": {status}")),
            (None, Some(reason)) => line.push_str(&format!(": {reason}")),
            (None, None) => {}
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fakes::queue_change as change;

    #[test]
    fn a_row_reads_as_cloudformation_says_it() {
        assert_eq!(
            change("Modify", Some("True")).to_string(),
            "Modify Queue (AWS::SQS::Queue), replacement True: Properties.QueueName"
        );
        assert!(change("Modify", Some("Conditional")).replaces());
        assert!(!change("Modify", Some("False")).replaces());
        assert!(!change("Add", None).replaces());
    }

    #[test]
    fn a_status_keeps_a_bounded_number_of_rows_and_counts_the_rest() {
        let (kept, more) = bounded(vec![change("Add", None); MAX_RECORDED_CHANGES + 7]);
        assert_eq!((kept.len(), more), (MAX_RECORDED_CHANGES, 7));
        let (kept, more) = bounded(vec![change("Add", None); 3]);
        assert_eq!((kept.len(), more), (3, 0));
    }
}
