//! What the scheduler does with each entry it reads: pure functions of the
//! entry, the source's head and the time, unit-tested without I/O.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::clock::EpochMillis;
use crate::registry::StackEntry;
use crate::status::Phase;

/// Why a reconcile is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The entry was removed: the stack is to be deleted (or released).
    Deleting,
    /// Registered and never reconciled.
    New,
    /// The spec changed since the last reconcile (`specVersion` >
    /// `observedSpecVersion`), or the entry was resumed.
    SpecChanged,
    /// The source's head moved past the revision the stack was last tried at.
    Pushed,
    /// The last reconcile failed and its retry interval has passed.
    Retry,
    /// The full-reconcile `interval` has passed (health and drift), or a
    /// CloudFormation event marked the stack changed out of band.
    Recheck,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deleting => "deleting",
            Self::New => "new",
            Self::SpecChanged => "spec-changed",
            Self::Pushed => "pushed",
            Self::Retry => "retry",
            Self::Recheck => "recheck",
        }
    }
}

/// A reconcile to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub stack: String,
    pub reason: Reason,
    /// What makes the execution name (with the stack): the same key twice
    /// starts one execution.
    pub key: String,
    /// The head that moved, for [`Reason::Pushed`].
    pub revision: Option<String>,
    /// The `nextReconcileAt` read, for a due entry: moved past the start
    /// guard once started, conditionally on still being this.
    pub due_at: Option<EpochMillis>,
}

/// What to do with one due entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DueAction {
    Start(Candidate),
    /// Start nothing; move `nextReconcileAt` from `from` to `to`.
    Postpone {
        stack: String,
        from: EpochMillis,
        to: EpochMillis,
        why: &'static str,
    },
}

/// Decides for an entry read from the due index at `now`.
pub fn judge_due(entry: &StackEntry, now: EpochMillis) -> DueAction {
    let from = entry.status.next_reconcile_at.map_or(0, |t| t.0);
    let start = |reason| {
        DueAction::Start(Candidate {
            stack: entry.name.clone(),
            reason,
            key: format!("due-{from}"),
            revision: None,
            due_at: Some(from),
        })
    };
    if let Some(lease) = entry.lease.as_ref().filter(|l| l.expires_at.0 > now) {
        // A run drives the stack: it writes the next due time when it ends
        // (at once if the spec changed meanwhile). Looked at again only if it
        // never does (a crashed run's lease runs out).
        return DueAction::Postpone {
            stack: entry.name.clone(),
            from,
            to: lease.expires_at.0,
            why: "a run holds the stack",
        };
    }
    if entry.deletion_requested_at.is_some() {
        return start(Reason::Deleting);
    }
    if entry.is_suspended() {
        return DueAction::Postpone {
            stack: entry.name.clone(),
            from,
            to: after(now, entry.spec.interval.as_secs()),
            why: "suspended",
        };
    }
    let status = &entry.status;
    if status.observed_spec_version == 0 && status.phase == Phase::Pending {
        start(Reason::New)
    } else if status.observed_spec_version < entry.spec_version {
        start(Reason::SpecChanged)
    } else if status.phase == Phase::Failed {
        start(Reason::Retry)
    } else {
        start(Reason::Recheck)
    }
}

/// What to do with one follower of a source whose head is `head`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowerAction {
    Start(Candidate),
    /// Nothing to do for this head (already tried at it, suspended, being
    /// deleted, or started this run for another reason).
    Settled,
    /// A run holds the stack: it may have fetched before the push, so the
    /// head is not recorded until the stack is free and looked at again.
    Busy,
}

/// Decides for a follower of a source that moved to `head`.
pub fn judge_follower(
    entry: &StackEntry,
    head: &str,
    now: EpochMillis,
    started: &BTreeSet<String>,
) -> FollowerAction {
    if entry.deletion_requested_at.is_some()
        || entry.is_suspended()
        || started.contains(&entry.name)
    {
        return FollowerAction::Settled;
    }
    if entry.lease.as_ref().is_some_and(|l| l.expires_at.0 > now) {
        return FollowerAction::Busy;
    }
    let tried = entry.status.last_attempted_revision.as_deref();
    if tried.is_some_and(|t| t.eq_ignore_ascii_case(head)) {
        return FollowerAction::Settled;
    }
    FollowerAction::Start(Candidate {
        stack: entry.name.clone(),
        reason: Reason::Pushed,
        key: head.to_owned(),
        revision: Some(head.to_owned()),
        due_at: None,
    })
}

/// The candidates to start now (at most `cap`, most urgent first: deletions,
/// new entries and spec changes, then pushes, retries, and re-checks last;
/// the longest waiting first within each) and the ones deferred to the next run.
pub fn choose(mut candidates: Vec<Candidate>, cap: usize) -> (Vec<Candidate>, Vec<Candidate>) {
    candidates.sort_by(|a, b| {
        (a.reason, a.due_at.unwrap_or(i64::MAX), &a.stack).cmp(&(
            b.reason,
            b.due_at.unwrap_or(i64::MAX),
            &b.stack,
        ))
    });
    let deferred = candidates.split_off(cap.min(candidates.len()));
    (candidates, deferred)
}

/// `now` plus `secs` seconds, in milliseconds.
pub fn after(now: EpochMillis, secs: u64) -> EpochMillis {
    now.saturating_add(i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Lease;
    use crate::status::{Status, Timestamp};

    const NOW: EpochMillis = 1_800_000_000_000;

    fn entry(name: &str) -> StackEntry {
        let mut e = crate::registry::sample_entry(
            name,
            Status {
                observed_spec_version: 3,
                last_attempted_revision: Some("a".repeat(40)),
                next_reconcile_at: Some(Timestamp(NOW - 5)),
                ..Status::default()
            },
        );
        e.spec_version = 3;
        e
    }

    fn reason(action: DueAction) -> Reason {
        match action {
            DueAction::Start(c) => c.reason,
            other => panic!("expected a start, got {other:?}"),
        }
    }

    #[test]
    fn a_due_entry_starts_for_the_reason_it_is_due() {
        let e = entry("a");
        assert_eq!(reason(judge_due(&e, NOW)), Reason::Recheck);

        let mut failed = entry("a");
        failed.status.phase = Phase::Failed;
        assert_eq!(reason(judge_due(&failed, NOW)), Reason::Retry);

        let mut changed = failed.clone();
        changed.spec_version = 4;
        assert_eq!(reason(judge_due(&changed, NOW)), Reason::SpecChanged);

        let mut new = entry("a");
        new.status = Status {
            next_reconcile_at: Some(Timestamp(NOW)),
            ..Status::default()
        };
        assert_eq!(reason(judge_due(&new, NOW)), Reason::New);

        let mut deleting = entry("a");
        deleting.deletion_requested_at = Some(Timestamp(NOW));
        deleting.suspended = true; // deletion wins over suspension
        assert_eq!(reason(judge_due(&deleting, NOW)), Reason::Deleting);
    }

    #[test]
    fn the_start_key_is_the_due_time_read() {
        let DueAction::Start(c) = judge_due(&entry("a"), NOW) else {
            panic!()
        };
        assert_eq!(c.key, format!("due-{}", NOW - 5));
        assert_eq!(c.due_at, Some(NOW - 5));
    }

    #[test]
    fn a_held_or_suspended_entry_is_postponed_not_started() {
        let mut held = entry("a");
        held.lease = Some(Lease {
            owner: "run-1".into(),
            expires_at: Timestamp(NOW + 60_000),
        });
        assert_eq!(
            judge_due(&held, NOW),
            DueAction::Postpone {
                stack: "a".into(),
                from: NOW - 5,
                to: NOW + 60_000,
                why: "a run holds the stack"
            }
        );
        // An expired lease is a crashed run: start.
        held.lease.as_mut().unwrap().expires_at = Timestamp(NOW - 1);
        assert_eq!(reason(judge_due(&held, NOW)), Reason::Recheck);

        let mut suspended = entry("a");
        suspended.spec.suspend = true;
        let DueAction::Postpone { to, why, .. } = judge_due(&suspended, NOW) else {
            panic!()
        };
        assert_eq!((to, why), (NOW + 600_000, "suspended"));
    }

    #[test]
    fn a_follower_starts_only_when_behind_the_head_and_free() {
        let head = "b".repeat(40);
        let none = BTreeSet::new();
        let at_head = {
            let mut e = entry("a");
            e.status.last_attempted_revision = Some(head.to_uppercase());
            e
        };
        assert_eq!(
            judge_follower(&at_head, &head, NOW, &none),
            FollowerAction::Settled
        );
        let behind = entry("a");
        let FollowerAction::Start(c) = judge_follower(&behind, &head, NOW, &none) else {
            panic!()
        };
        assert_eq!((c.reason, c.key.as_str()), (Reason::Pushed, head.as_str()));
        assert_eq!(c.revision.as_deref(), Some(head.as_str()));

        let mut busy = entry("a");
        busy.lease = Some(Lease {
            owner: "run".into(),
            expires_at: Timestamp(NOW + 1),
        });
        assert_eq!(
            judge_follower(&busy, &head, NOW, &none),
            FollowerAction::Busy
        );
        let mut suspended = entry("a");
        suspended.suspended = true;
        assert_eq!(
            judge_follower(&suspended, &head, NOW, &none),
            FollowerAction::Settled
        );
        let started = BTreeSet::from(["a".to_owned()]);
        assert_eq!(
            judge_follower(&behind, &head, NOW, &started),
            FollowerAction::Settled
        );
        let never = {
            let mut e = entry("a");
            e.status.last_attempted_revision = None;
            e
        };
        assert!(matches!(
            judge_follower(&never, &head, NOW, &none),
            FollowerAction::Start(_)
        ));
    }

    #[test]
    fn the_most_urgent_are_started_and_the_rest_deferred() {
        let c = |stack: &str, reason, due_at| Candidate {
            stack: stack.into(),
            reason,
            key: String::new(),
            revision: None,
            due_at,
        };
        let (now, later) = choose(
            vec![
                c("i", Reason::Recheck, Some(1)),
                c("p", Reason::Pushed, None),
                c("r2", Reason::Retry, Some(9)),
                c("r1", Reason::Retry, Some(2)),
                c("n", Reason::New, Some(5)),
            ],
            3,
        );
        let names = |v: &[Candidate]| v.iter().map(|c| c.stack.clone()).collect::<Vec<_>>();
        assert_eq!(names(&now), ["n", "p", "r1"]);
        assert_eq!(names(&later), ["r2", "i"]);
        let (all, none) = choose(vec![c("x", Reason::Recheck, None)], 10);
        assert_eq!((all.len(), none.len()), (1, 0));
    }
}
