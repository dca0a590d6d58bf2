//! What the scheduler does with each entry it reads: pure functions of the
//! entry, the source's head and the time, unit-tested without I/O.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::clock::EpochMillis;
use crate::registry::{Follower, StackEntry, Watched};
use crate::seen::{Change, Observed, Seen};
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
    /// The health check found the stack changed outside stacksync (or
    /// nothing recorded of it yet).
    Changed,
    /// Due for none of the above: a CloudFormation event marked the stack,
    /// or a run stopped before its end (its lease ran out).
    Marked,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deleting => "deleting",
            Self::New => "new",
            Self::SpecChanged => "spec-changed",
            Self::Pushed => "pushed",
            Self::Retry => "retry",
            Self::Changed => "changed",
            Self::Marked => "marked",
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
    /// What the health check found, for [`Reason::Changed`] (`None`: nothing
    /// recorded of the stack yet).
    pub change: Option<Change>,
}

/// What to do with one due entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DueAction {
    Start(Candidate),
    /// Start nothing; move `nextReconcileAt` from `from` to `to` (`None`:
    /// out of the queue).
    Postpone {
        stack: String,
        from: EpochMillis,
        to: Option<EpochMillis>,
        why: &'static str,
    },
}

/// Decides for an entry read from the due index at `now`.
pub fn judge_due(entry: &StackEntry, now: EpochMillis) -> DueAction {
    let from = entry.status.times.next_reconcile_at.map_or(0, |t| t.0);
    let start = |reason| {
        DueAction::Start(Candidate {
            stack: entry.name.clone(),
            reason,
            key: format!("due-{from}"),
            revision: None,
            due_at: Some(from),
            change: None,
        })
    };
    if let Some(lease) = entry.lease.as_ref().filter(|l| l.expires_at.0 > now) {
        // A run drives the stack: it writes the next due time when it ends
        // (at once if the spec changed meanwhile). Looked at again only if it
        // never does (a crashed run's lease runs out).
        return DueAction::Postpone {
            stack: entry.name.clone(),
            from,
            to: Some(lease.expires_at.0),
            why: "a run holds the stack",
        };
    }
    if entry.deletion_requested_at.is_some() {
        return start(Reason::Deleting);
    }
    if entry.is_suspended() {
        // Resuming makes it due again.
        return DueAction::Postpone {
            stack: entry.name.clone(),
            from,
            to: None,
            why: "suspended",
        };
    }
    let status = &entry.status;
    if status.run.observed_spec_version == 0 && status.phase == Phase::Pending {
        start(Reason::New)
    } else if status.run.observed_spec_version < entry.spec_version {
        start(Reason::SpecChanged)
    } else if status.gave_up_at(
        entry.spec_version,
        status.run.last_attempted_revision.as_deref(),
    ) {
        // A push (the follower check), a spec change or a forced reconcile
        // starts it; a mark (a change seen by the events rule) does not.
        DueAction::Postpone {
            stack: entry.name.clone(),
            from,
            to: None,
            why: "gave up at this revision and spec",
        }
    } else if status.phase == Phase::Failed {
        start(Reason::Retry)
    } else {
        start(Reason::Marked)
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
    entry: &Follower,
    head: &str,
    now: EpochMillis,
    started: &BTreeSet<String>,
) -> FollowerAction {
    // Held by a sync window (the queue starts it when the window opens),
    // or by its fleet's rollout (the wave before starts it; the queue, if
    // that start is lost).
    if entry.deleting || entry.suspended || entry.held() || started.contains(&entry.name) {
        return FollowerAction::Settled;
    }
    if entry.lease_expires_at.is_some_and(|t| t > now) {
        return FollowerAction::Busy;
    }
    let tried = entry.last_attempted_revision.as_deref();
    if tried.is_some_and(|t| t.eq_ignore_ascii_case(head)) {
        return FollowerAction::Settled;
    }
    FollowerAction::Start(Candidate {
        stack: entry.name.clone(),
        reason: Reason::Pushed,
        key: head.to_owned(),
        revision: Some(head.to_owned()),
        due_at: None,
        change: None,
    })
}

/// What the health check makes of one stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Not the health check's to judge: due (the queue starts it), held by
    /// a run, suspended, being deleted, or not `Ready` (a failure is retried
    /// by the queue).
    Skipped,
    /// As the last run left it: nothing to start, nothing to write.
    Fine,
    /// Changed outside stacksync, or nothing recorded yet: start its reconcile.
    Start(Candidate),
}

/// Whether the health check leaves the stack alone whatever it lists: in
/// the queue (due now or later: a retry, a mark, a run started and not yet
/// ended), held by a run, suspended, or being deleted.
fn skipped(w: &Watched, now: EpochMillis) -> bool {
    let held = w.lease_expires_at.is_some_and(|t| t > now);
    w.deleting || w.suspended || held || w.next_reconcile_at.is_some()
}

/// The account and region the stack must be listed in to be judged (its
/// region, `None` for the installation's; the role that reaches its
/// account), or `None` when [`judge_watched`] needs no listing for it.
pub fn listed_in(w: &Watched, now: EpochMillis) -> Option<(Option<&str>, Option<&str>)> {
    match (&w.seen, w.phase) {
        (Some(seen), Some(Phase::Ready)) if !skipped(w, now) => {
            Some((seen.region.as_deref(), seen.assume_role_arn.as_deref()))
        }
        _ => None,
    }
}

/// Judges one stack against the listing of its account and region
/// (`listed`: its summary there, `None` when it is not listed).
pub fn judge_watched(w: &Watched, listed: Option<Observed<'_>>, now: EpochMillis) -> Health {
    if skipped(w, now) {
        return Health::Skipped;
    }
    let start = |change: Option<Change>, key: String| {
        Health::Start(Candidate {
            stack: w.name.clone(),
            reason: Reason::Changed,
            key,
            revision: None,
            due_at: None,
            change,
        })
    };
    match (w.phase, &w.seen) {
        // Written before stacks were watched: one run records what it sees.
        (None, _) | (Some(Phase::Ready), None) => start(None, "unrecorded".into()),
        (Some(Phase::Ready), Some(seen)) => match seen.change(listed) {
            None => Health::Fine,
            Some(change) => start(Some(change), change_key(change, seen, listed)),
        },
        _ => Health::Skipped,
    }
}

/// The start key of a change: the same change seen twice (two schedulers,
/// or the next run before the reconcile took the stack) starts one run.
fn change_key(change: Change, seen: &Seen, listed: Option<Observed<'_>>) -> String {
    match listed {
        None => format!("{change}-{}", seen.changed_at.0),
        Some(now) => format!(
            "{change}-{}-{}-{}-{}",
            now.stack_id,
            now.changed_at,
            now.status,
            now.drift.unwrap_or("")
        ),
    }
}

/// The candidates to start now (at most `cap`, most urgent first: deletions,
/// new entries and spec changes, then pushes, retries, changes found by the
/// health check, and marks last;
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
        let mut status = Status::default();
        status.run.observed_spec_version = 3;
        status.run.last_attempted_revision = Some("a".repeat(40));
        status.times.next_reconcile_at = Some(Timestamp(NOW - 5));
        let mut e = crate::registry::sample_entry(name, status);
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
        assert_eq!(reason(judge_due(&e, NOW)), Reason::Marked);

        let mut failed = entry("a");
        failed.status.phase = Phase::Failed;
        assert_eq!(reason(judge_due(&failed, NOW)), Reason::Retry);

        let mut changed = failed.clone();
        changed.spec_version = 4;
        assert_eq!(reason(judge_due(&changed, NOW)), Reason::SpecChanged);

        // Given up at this revision and spec (a mark brought it back into
        // the queue): out again, started by nothing but a push, a spec
        // change or --force.
        let mut gave_up = failed.clone();
        gave_up.status.run.failures = Some(crate::status::Failures {
            count: 5,
            spec_version: 3,
            revision: Some("a".repeat(40)),
            recreated: false,
            gave_up: true,
        });
        assert!(matches!(
            judge_due(&gave_up, NOW),
            DueAction::Postpone { to: None, .. }
        ));
        gave_up.spec_version = 4;
        assert_eq!(reason(judge_due(&gave_up, NOW)), Reason::SpecChanged);

        let mut new = entry("a");
        new.status = Status::default();
        new.status.times.next_reconcile_at = Some(Timestamp(NOW));
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
            taken_at: None,
            parked: None,
        });
        assert_eq!(
            judge_due(&held, NOW),
            DueAction::Postpone {
                stack: "a".into(),
                from: NOW - 5,
                to: Some(NOW + 60_000),
                why: "a run holds the stack"
            }
        );
        // An expired lease is a crashed run: start.
        held.lease.as_mut().unwrap().expires_at = Timestamp(NOW - 1);
        assert_eq!(reason(judge_due(&held, NOW)), Reason::Marked);

        let mut suspended = entry("a");
        suspended.spec.suspend = true;
        let DueAction::Postpone { to, why, .. } = judge_due(&suspended, NOW) else {
            panic!()
        };
        assert_eq!((to, why), (None, "suspended"), "out of the queue");
    }

    #[test]
    fn a_follower_starts_only_when_behind_the_head_and_free() {
        let head = "b".repeat(40);
        let none = BTreeSet::new();
        let entry = |name: &str| crate::registry::followers::follower_of(&entry(name));
        let at_head = {
            let mut e = entry("a");
            e.last_attempted_revision = Some(head.to_uppercase());
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
        busy.lease_expires_at = Some(NOW + 1);
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
        // Held by a sync window: the queue starts it when the window opens.
        let mut held = entry("a");
        held.held_by_window = true;
        assert_eq!(
            judge_follower(&held, &head, NOW, &none),
            FollowerAction::Settled
        );
        // Held by its fleet's rollout: the wave before starts it.
        let mut waiting = entry("a");
        waiting.held_by_rollout = true;
        assert_eq!(
            judge_follower(&waiting, &head, NOW, &none),
            FollowerAction::Settled
        );
        let started = BTreeSet::from(["a".to_owned()]);
        assert_eq!(
            judge_follower(&behind, &head, NOW, &started),
            FollowerAction::Settled
        );
        let never = {
            let mut e = entry("a");
            e.last_attempted_revision = None;
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
            change: None,
        };
        let (now, later) = choose(
            vec![
                c("i", Reason::Marked, Some(1)),
                c("h", Reason::Changed, None),
                c("p", Reason::Pushed, None),
                c("r2", Reason::Retry, Some(9)),
                c("r1", Reason::Retry, Some(2)),
                c("n", Reason::New, Some(5)),
            ],
            3,
        );
        let names = |v: &[Candidate]| v.iter().map(|c| c.stack.clone()).collect::<Vec<_>>();
        assert_eq!(names(&now), ["n", "p", "r1"]);
        assert_eq!(names(&later), ["r2", "h", "i"]);
        let (all, none) = choose(vec![c("x", Reason::Marked, None)], 10);
        assert_eq!((all.len(), none.len()), (1, 0));
    }

    fn watched(name: &str) -> Watched {
        Watched {
            name: name.into(),
            stack_name: name.into(),
            phase: Some(Phase::Ready),
            seen: Some(Seen {
                region: None,
                assume_role_arn: None,
                stack_id: "id-1".into(),
                changed_at: Timestamp(1_000),
                stack_status: "CREATE_COMPLETE".into(),
                drift: None,
                deployed_hash: "h".into(),
                interval_seconds: 600,
                drift_seconds: None,
            }),
            suspended: false,
            deleting: false,
            lease_expires_at: None,
            next_reconcile_at: None,
            drift: None,
        }
    }

    fn listed(id: &str, at: i64) -> Observed<'_> {
        Observed {
            stack_id: id,
            changed_at: at,
            status: "CREATE_COMPLETE",
            drift: None,
        }
    }

    #[test]
    fn the_health_check_starts_a_changed_stack_and_leaves_a_fine_one() {
        let w = watched("a");
        assert_eq!(
            judge_watched(&w, Some(listed("id-1", 1_000)), NOW),
            Health::Fine
        );
        for (now, change) in [
            (None, Change::Deleted),
            (Some(listed("id-2", 1_000)), Change::Replaced),
            (Some(listed("id-1", 2_000)), Change::Updated),
        ] {
            let Health::Start(c) = judge_watched(&w, now, NOW) else {
                panic!("{change}")
            };
            assert_eq!(
                (c.reason, c.change, c.due_at),
                (Reason::Changed, Some(change), None)
            );
            let Health::Start(again) = judge_watched(&w, now, NOW + 300_000) else {
                panic!()
            };
            assert_eq!(c.key, again.key, "the same change starts one run");
        }
        let Health::Start(a) = judge_watched(&w, Some(listed("id-1", 2_000)), NOW) else {
            panic!()
        };
        let Health::Start(b) = judge_watched(&w, Some(listed("id-1", 3_000)), NOW) else {
            panic!()
        };
        assert_ne!(a.key, b.key, "a later change starts another");
    }

    #[test]
    fn the_health_check_leaves_what_the_queue_or_a_run_deals_with() {
        let gone = None;
        let mut cases = Vec::new();
        for change in 0..6 {
            let mut w = watched("a");
            match change {
                0 => w.deleting = true,
                1 => w.suspended = true,
                2 => w.lease_expires_at = Some(NOW + 1),
                3 => w.next_reconcile_at = Some(NOW),
                4 => w.phase = Some(Phase::Failed),
                _ => w.phase = Some(Phase::Reconciling),
            }
            cases.push(judge_watched(&w, gone, NOW));
        }
        assert!(cases.iter().all(|h| *h == Health::Skipped), "{cases:?}");
        let mut w = watched("a");
        w.next_reconcile_at = Some(NOW + 1);
        assert_eq!(
            judge_watched(&w, gone, NOW),
            Health::Skipped,
            "in the queue for later: started there"
        );
        w.next_reconcile_at = None;
        w.lease_expires_at = Some(NOW - 1);
        assert!(
            matches!(judge_watched(&w, gone, NOW), Health::Start(_)),
            "an expired lease, in no queue: judged"
        );
        for unrecorded in [
            Watched {
                phase: None,
                ..watched("a")
            },
            Watched {
                seen: None,
                ..watched("a")
            },
        ] {
            let Health::Start(c) = judge_watched(&unrecorded, gone, NOW) else {
                panic!()
            };
            assert_eq!((c.key.as_str(), c.change), ("unrecorded", None));
        }
    }
}
