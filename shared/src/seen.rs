//! The stack as stacksync left it, and what changed since: the rule "decide
//! from what AWS reports now, not from what stacksync wrote" in one place.
//!
//! Every successful run records a [`Seen`]: the stack's id, its
//! `LastUpdatedTime`, its status and drift status as CloudFormation reported
//! them when the run ended, and a hash of the template and parameters
//! CloudFormation holds. Later, a run at the same desired state ends "in
//! sync" without a change set only while the stack still matches it, and the
//! scheduler's health check compares it with one listing per account and
//! region. A stack that no longer matches was changed outside stacksync
//! ([`Change`]): it is put back (Git wins).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::clock::rfc3339_millis;
use crate::hash::sha256_hex;
use crate::status::Timestamp;

/// What the last successful run saw of its stack, and where it looked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    /// The stack's region (`None`: the installation's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The role assumed to reach the stack's account (`None`: the installation's account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assume_role_arn: Option<String>,
    pub stack_id: String,
    /// `LastUpdatedTime`, or `CreationTime` for a stack never updated.
    pub changed_at: Timestamp,
    pub stack_status: String,
    /// `DriftInformation.StackDriftStatus`, where CloudFormation reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    /// [`deployed_hash`] of what CloudFormation held.
    pub deployed_hash: String,
    /// The spec's `interval` (seconds): the scheduler warns when its own
    /// period is longer, as it then cannot keep that promise.
    #[serde(default)]
    pub interval_seconds: u64,
    /// The spec's `drift.interval` (seconds; 0: detection off; `None`:
    /// recorded before drift detection, the default applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_seconds: Option<u64>,
}

/// The stack as CloudFormation reports it now (from `DescribeStacks` or a
/// `ListStacks` summary), in the terms [`Seen`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed<'a> {
    pub stack_id: &'a str,
    pub changed_at: i64,
    pub status: &'a str,
    pub drift: Option<&'a str>,
}

/// A change made to a stack outside stacksync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// No stack of that name any more.
    Deleted,
    /// A stack of that name, but another one (another StackId).
    Replaced,
    /// Updated: a newer `LastUpdatedTime`, or another template or parameters.
    Updated,
    /// In another status than the run left it (an operation under way, a rollback).
    StatusChanged,
    /// CloudFormation's drift detection reports another drift status.
    /// Found by runs only: the scheduler's drift detection ([`crate::drift`])
    /// reads and records drift itself, without a run.
    DriftChanged,
}

impl Change {
    /// Whether a change set may undo it (everything but drift).
    pub fn is_put_back(self) -> bool {
        self != Self::DriftChanged
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deleted => "deleted",
            Self::Replaced => "replaced",
            Self::Updated => "updated",
            Self::StatusChanged => "status-changed",
            Self::DriftChanged => "drift-changed",
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A change found outside stacksync, as the run that found it records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutOfBand {
    pub change: Change,
    /// What was found, in words.
    pub detail: String,
    /// When the run found it.
    pub found_at: Timestamp,
    /// Whether the run put the desired state back (a change set ran).
    #[serde(default)]
    pub undone: bool,
}

impl Seen {
    /// What changed since this was recorded, if anything; `None` (no stack)
    /// is [`Change::Deleted`].
    pub fn change(&self, now: Option<Observed<'_>>) -> Option<Change> {
        let Some(now) = now else {
            return Some(Change::Deleted);
        };
        if now.stack_id != self.stack_id {
            Some(Change::Replaced)
        } else if now.changed_at != self.changed_at.0 {
            Some(Change::Updated)
        } else if now.status != self.stack_status {
            Some(Change::StatusChanged)
        } else {
            None
        }
    }

    /// The change in words, for the status and the logs.
    pub fn describe(&self, change: Change, now: Option<Observed<'_>>) -> String {
        let at = rfc3339_millis;
        match (change, now) {
            (Change::Deleted, _) | (_, None) => {
                "the stack was deleted outside stacksync".to_owned()
            }
            (Change::Replaced, Some(now)) => format!(
                "the stack was replaced outside stacksync (StackId {} instead of {})",
                now.stack_id, self.stack_id
            ),
            (Change::Updated, Some(now)) if now.changed_at != self.changed_at.0 => format!(
                "the stack was updated outside stacksync at {} (stacksync left it at {})",
                at(now.changed_at),
                at(self.changed_at.0)
            ),
            (Change::Updated, Some(_)) => {
                "the stack's template or parameters differ from what stacksync deployed".to_owned()
            }
            (Change::StatusChanged, Some(now)) => format!(
                "the stack is {} (stacksync left it {})",
                now.status, self.stack_status
            ),
            (Change::DriftChanged, Some(now)) => format!(
                "CloudFormation's drift detection reports {} (it was {})",
                now.drift.unwrap_or("?"),
                self.drift.as_deref().unwrap_or("not checked")
            ),
        }
    }
}

/// The hash of a stack's deployed state as CloudFormation reports it: the
/// template body (`GetTemplate`, stage `Original`), the parameters and the
/// tags (`DescribeStacks`).
pub fn deployed_hash(
    template_body: &str,
    parameters: &BTreeMap<String, String>,
    tags: &BTreeMap<String, String>,
) -> String {
    let inputs = serde_json::json!({
        "template": sha256_hex(template_body.as_bytes()),
        "parameters": parameters,
        "tags": tags,
    });
    sha256_hex(crate::hash::canonical(inputs).to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen() -> Seen {
        Seen {
            region: None,
            assume_role_arn: None,
            stack_id: "arn:aws:cloudformation:us-east-1:1:stack/s/1".into(),
            changed_at: Timestamp(1_000),
            stack_status: "UPDATE_COMPLETE".into(),
            drift: None,
            deployed_hash: "h".into(),
            interval_seconds: 600,
            drift_seconds: None,
        }
    }

    fn now<'a>(id: &'a str, at: i64, status: &'a str, drift: Option<&'a str>) -> Observed<'a> {
        Observed {
            stack_id: id,
            changed_at: at,
            status,
            drift,
        }
    }

    #[test]
    fn each_kind_of_change_is_found_and_said() {
        let s = seen();
        let id = s.stack_id.clone();
        let cases = [
            (None, Some(Change::Deleted), "deleted outside stacksync"),
            (
                Some(now("other", 1_000, "UPDATE_COMPLETE", None)),
                Some(Change::Replaced),
                "StackId other instead of",
            ),
            (
                Some(now(&id, 2_000, "UPDATE_COMPLETE", None)),
                Some(Change::Updated),
                "updated outside stacksync at 1970-01-01T00:00:02.000Z",
            ),
            (
                Some(now(&id, 1_000, "UPDATE_ROLLBACK_FAILED", None)),
                Some(Change::StatusChanged),
                "is UPDATE_ROLLBACK_FAILED (stacksync left it UPDATE_COMPLETE)",
            ),
        ];
        for (observed, change, words) in cases {
            assert_eq!(s.change(observed), change, "{observed:?}");
            let text = s.describe(change.unwrap_or(Change::Updated), observed);
            assert!(text.contains(words), "{text}");
        }
        assert_eq!(
            s.change(Some(now(&id, 1_000, "UPDATE_COMPLETE", None))),
            None,
            "the same stack, unchanged"
        );
        assert_eq!(
            s.change(Some(now(&id, 1_000, "UPDATE_COMPLETE", Some("DRIFTED")))),
            None,
            "drift is the drift detection's to read, not a run's"
        );
        assert!(
            s.describe(
                Change::DriftChanged,
                Some(now(&id, 1_000, "UPDATE_COMPLETE", Some("DRIFTED")))
            )
            .contains("reports DRIFTED")
        );
        assert!(!Change::DriftChanged.is_put_back() && Change::Updated.is_put_back());
    }

    #[test]
    fn the_deployed_hash_covers_template_parameters_and_tags() {
        let p = BTreeMap::from([("A".to_owned(), "1".to_owned())]);
        let t = BTreeMap::new();
        let base = deployed_hash("Resources: {}", &p, &t);
        assert_eq!(base, deployed_hash("Resources: {}", &p, &t));
        assert_ne!(base, deployed_hash("Resources: {x: 1}", &p, &t));
        assert_ne!(base, deployed_hash("Resources: {}", &BTreeMap::new(), &t));
        assert_ne!(base, deployed_hash("Resources: {}", &p, &p));
    }
}
