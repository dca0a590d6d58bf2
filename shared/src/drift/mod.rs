//! Drift: what CloudFormation's drift detection found of a stack, as
//! stacksync records it (`status.findings.drift`), and the pure decisions around it:
//! when the next detection is due, what a detection's findings mean for the
//! record, whether they are put back (`action: revert`).
//!
//! The record is written by the scheduler and the events function (no run
//! holding the stack), conditionally on its `rev`, and carried as it is by
//! every run, which changes only its `revert`.

use serde::{Deserialize, Serialize};

pub mod found;
pub mod ignore;

use crate::clock::EpochMillis;
use crate::hash::sha256_hex;
use crate::status::Timestamp;
use found::ResourceDrift;

/// Most drifted resources kept in a record (the rest are counted).
pub const MAX_RESOURCES: usize = 50;
/// Most differences kept per resource (the rest are counted).
pub const MAX_DIFFERENCES: usize = 20;
/// Longest expected or actual value kept; longer ones are cut.
pub const MAX_VALUE_CHARS: usize = 256;
/// Most bytes of resources a record keeps (a registry item holds 400 KB).
pub const MAX_RECORD_BYTES: usize = 64 * 1024;
/// How long a detection stacksync started is waited for; past it, one
/// that still cannot be read is given up and started again when due.
pub const DETECTION_PATIENCE_MS: EpochMillis = 60 * 60 * 1000;
/// What a secret-reading stack's values are recorded as.
pub const MASKED: &str = "****";

/// What the last drift detection found, and what stacksync did about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftRecord {
    /// CloudFormation's `LastCheckTimestamp` of the detection these
    /// findings come from (`None`: none read yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Timestamp>,
    /// `StackDriftStatus` then: `DRIFTED`, `IN_SYNC`, `UNKNOWN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_drift: Option<String>,
    /// The drifted resources, less the ignored differences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<DriftedResource>,
    /// Differences left out by `drift.ignore`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ignored: u32,
    /// Resources or differences not kept (the record is bounded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u32,
    /// A detection stacksync started and has not read yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<Detection>,
    /// Why the last detection failed, or which resources it could not check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert: Option<Revert>,
    /// A run changed the stack while it was drifted (a change set
    /// executed): the findings may be stale, detect again at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_at: Option<Timestamp>,
    /// Bumped on every write outside a run: each is conditional on the one read.
    #[serde(default)]
    pub rev: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A detection started by stacksync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Detection {
    pub id: String,
    pub started_at: Timestamp,
}

/// One drifted resource, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedResource {
    pub logical_id: String,
    pub resource_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_id: Option<String>,
    /// `MODIFIED` or `DELETED`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<Difference>,
}

/// One property that is not as the template says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// CloudFormation's path: `/VisibilityTimeout`, `/Tags/0/Value`.
    pub path: String,
    pub expected: String,
    pub actual: String,
    /// `ADD`, `REMOVE` or `NOT_EQUAL`.
    pub kind: String,
}

/// A revert of one drift (its [`fingerprint`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revert {
    pub fingerprint: String,
    pub state: RevertState,
    /// When the state was reached.
    pub at: Timestamp,
    /// CloudFormation refused a drift-aware change set: the template was
    /// applied as it is, which puts back only what it changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reapplied: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RevertState {
    /// Found; the stack is due for a run that reverts it.
    Requested,
    /// A run put it back; the next detection (due at once) says whether
    /// it is gone.
    Applied,
    /// The detection after the revert found the same drift: reported once,
    /// not reverted again (a new drift is).
    NotCleared,
}

/// What the scheduler's index holds of the record (`watch.drift`): enough to
/// know, against `ListStacks`, whether a detection is due, running, or has
/// findings not read yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftWatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<EpochMillis>,
    /// The detection stacksync started and has not read yet, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<EpochMillis>,
    /// The `StackDriftStatus` recorded: another in `ListStacks` means a
    /// detection someone else started has findings to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_drift: Option<String>,
    /// A revert was applied after the last findings: detect again at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
    #[serde(default)]
    pub rev: u64,
}

impl DriftRecord {
    /// Whether the stack is shown `Drifted`.
    pub fn drifted(&self) -> bool {
        !self.resources.is_empty()
    }

    /// The index's part of the record.
    pub fn watch(&self) -> DriftWatch {
        DriftWatch {
            checked_at: self.checked_at.map(|t| t.0),
            detection: self.detection.as_ref().map(|d| d.id.clone()),
            started_at: self.detection.as_ref().map(|d| d.started_at.0),
            stack_drift: self.stack_drift.clone(),
            verify: self.revert.as_ref().is_some_and(|r| {
                r.state == RevertState::Applied && self.checked_at.is_none_or(|c| c < r.at)
            }) || self
                .changed_at
                .is_some_and(|at| self.checked_at.is_none_or(|c| c < at)),
            rev: self.rev,
        }
    }

    /// A revert asked for and not yet applied: what a run puts back.
    pub fn revert_requested(&self) -> Option<&str> {
        self.revert
            .as_ref()
            .filter(|r| r.state == RevertState::Requested)
            .map(|r| r.fingerprint.as_str())
    }
}

/// The record after a run ended `Ready`: a revert of the drift `print`
/// applied; a drifted stack that a change set changed (`executed`) marked
/// for a detection at once, as its findings may be stale. A record whose
/// drift changed meanwhile is left as it is.
pub fn after_run(
    record: Option<DriftRecord>,
    print: Option<&str>,
    reapplied: bool,
    executed: bool,
    now: EpochMillis,
) -> Option<DriftRecord> {
    let mut record = record?;
    if executed && record.drifted() {
        record.changed_at = Some(Timestamp(now));
    }
    if let Some(revert) =
        print.and_then(|print| record.revert.as_mut().filter(|r| r.fingerprint == print))
    {
        revert.state = RevertState::Applied;
        revert.at = Timestamp(now);
        revert.reapplied = reapplied;
    }
    Some(record)
}

/// What identifies a drift: the resources and property paths drifted,
/// whatever their values. The same drift found again after a revert was
/// not cleared by it.
pub fn fingerprint(resources: &[DriftedResource]) -> String {
    let mut keys: Vec<String> = resources
        .iter()
        .flat_map(|r| {
            let mut keys = vec![format!("{}:{}", r.logical_id, r.status)];
            keys.extend(
                r.differences
                    .iter()
                    .map(|d| format!("{}{}", r.logical_id, d.path)),
            );
            keys
        })
        .collect();
    keys.sort();
    sha256_hex(keys.join("\n").as_bytes())[..16].to_owned()
}

/// The resources as recorded: bounded, values cut, or masked (`mask`: the
/// stack reads secrets, and a property may hold one). Returns them and how
/// many resources and differences were left out.
pub fn recorded(found: Vec<ResourceDrift>, mask: bool) -> (Vec<DriftedResource>, u32) {
    let cut = |v: String| {
        if mask {
            MASKED.to_owned()
        } else if v.chars().count() > MAX_VALUE_CHARS {
            let kept: String = v.chars().take(MAX_VALUE_CHARS - 1).collect();
            format!("{kept}…")
        } else {
            v
        }
    };
    let mut omitted = 0usize;
    let total = found.len();
    let resources: Vec<DriftedResource> = found
        .into_iter()
        .take(MAX_RESOURCES)
        .map(|r| {
            omitted += r.differences.len().saturating_sub(MAX_DIFFERENCES);
            DriftedResource {
                logical_id: r.logical_id,
                resource_type: r.resource_type,
                physical_id: r.physical_id,
                status: r.status,
                differences: r
                    .differences
                    .into_iter()
                    .take(MAX_DIFFERENCES)
                    .map(|d| Difference {
                        path: d.path,
                        expected: cut(d.expected),
                        actual: cut(d.actual),
                        kind: d.kind,
                    })
                    .collect(),
            }
        })
        .collect();
    omitted += total.saturating_sub(MAX_RESOURCES);
    // The item's size: resources past the budget are counted, not kept.
    let mut kept: Vec<DriftedResource> = Vec::new();
    let mut bytes = 0;
    for resource in resources {
        let size = serde_json::to_vec(&resource).map_or(usize::MAX, |b| b.len());
        if bytes + size > MAX_RECORD_BYTES {
            omitted += 1 + resource.differences.len();
            continue;
        }
        bytes += size;
        kept.push(resource);
    }
    (kept, u32::try_from(omitted).unwrap_or(u32::MAX))
}

/// A detection's reason as kept: at most [`crate::status::MAX_MESSAGE_CHARS`]
/// (CloudFormation lists every resource it could not check).
pub fn reason_kept(reason: Option<String>) -> Option<String> {
    let max = crate::status::MAX_MESSAGE_CHARS;
    reason.map(|r| {
        if r.chars().count() > max {
            let kept: String = r.chars().take(max - 1).collect();
            format!("{kept}…")
        } else {
            r
        }
    })
}

/// A detection's findings, and what they change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Findings {
    pub checked_at: EpochMillis,
    pub stack_drift: Option<String>,
    pub resources: Vec<DriftedResource>,
    pub ignored: u32,
    pub omitted: u32,
    pub reason: Option<String>,
}

/// What recording findings leads to, besides the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing new to say: in sync as before, or the same drift as before.
    Quiet,
    /// A drift not reported before (or changed): say so.
    Detected,
    /// The stack was drifted and is no longer.
    Cleared,
    /// A revert did not clear the drift: say so, once.
    NotCleared,
}

/// The record after `findings`, what to say, and whether the stack is due
/// for a run that reverts (`revert`: the entry's `action` is `revert`).
pub fn apply_findings(
    previous: &DriftRecord,
    findings: Findings,
    revert: bool,
    now: EpochMillis,
) -> (DriftRecord, Outcome, bool) {
    let print = fingerprint(&findings.resources);
    let before = (previous.drifted()).then(|| fingerprint(&previous.resources));
    let drifted = !findings.resources.is_empty();
    let last = previous.revert.clone();
    let (revert_state, due) = match (&last, drifted && revert) {
        (_, false) => (None, false),
        (Some(r), true) if r.fingerprint == print && r.state == RevertState::Applied => (
            Some(Revert {
                state: RevertState::NotCleared,
                at: crate::status::Timestamp(now),
                ..r.clone()
            }),
            false,
        ),
        (Some(r), true) if r.fingerprint == print && r.state != RevertState::Applied => {
            (Some(r.clone()), r.state == RevertState::Requested)
        }
        _ => (
            Some(Revert {
                fingerprint: print.clone(),
                state: RevertState::Requested,
                at: crate::status::Timestamp(now),
                reapplied: false,
            }),
            true,
        ),
    };
    let outcome = match (&revert_state, drifted, before.as_deref()) {
        (Some(r), _, _)
            if r.state == RevertState::NotCleared
                && last
                    .as_ref()
                    .is_some_and(|l| l.state == RevertState::Applied) =>
        {
            Outcome::NotCleared
        }
        (_, true, Some(b)) if b == print => Outcome::Quiet,
        (_, true, _) => Outcome::Detected,
        (_, false, Some(_)) => Outcome::Cleared,
        (_, false, None) => Outcome::Quiet,
    };
    let record = DriftRecord {
        checked_at: Some(Timestamp(findings.checked_at)),
        stack_drift: findings.stack_drift,
        resources: findings.resources,
        ignored: findings.ignored,
        omitted: findings.omitted,
        detection: None,
        reason: reason_kept(findings.reason),
        revert: revert_state,
        changed_at: None,
        rev: previous.rev + 1,
    };
    (record, outcome, due)
}

/// When the next detection of a stack is due: never checked, at once;
/// else at its slot — the stack's own offset within the interval (from its
/// name), at least half an interval after the last check. So a fleet's
/// detections spread evenly over the interval, each stack about once per
/// interval, however they were registered.
pub fn next_detection(
    name: &str,
    last_check: Option<EpochMillis>,
    interval_ms: EpochMillis,
) -> EpochMillis {
    let Some(last) = last_check else {
        return 0;
    };
    let interval = interval_ms.max(1);
    let offset = slot_offset(name, interval);
    let earliest = last + interval / 2;
    let base = earliest - earliest.rem_euclid(interval) + offset;
    if base >= earliest {
        base
    } else {
        base + interval
    }
}

fn slot_offset(name: &str, interval: EpochMillis) -> EpochMillis {
    let digest = sha256_hex(name.as_bytes());
    let n = u64::from_str_radix(&digest[..12], 16).unwrap_or(0);
    i64::try_from(n % u64::try_from(interval).unwrap_or(1)).unwrap_or(0)
}

#[cfg(test)]
mod tests;
