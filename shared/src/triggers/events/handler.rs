//! The events function's work: start the stacks that follow a CodeCommit
//! ref or an S3 object; mark a stack that somebody else changed, so the
//! scheduler's next run brings it back to its spec.

use serde::Serialize;
use tracing::info;

use super::{AwsEvent, Detail, ExecutionEnded, StackStatusChange};
use crate::clock::{EpochMillis, parse_rfc3339};
use crate::naming::OWN_TOKEN_PREFIX;
use crate::ports::{Starter, TriggerKind};
use crate::registry::{Entries, Leases, Schedule, StackEntry, end_hold};

use crate::triggers::registry_source::apply_and_start;
use crate::triggers::{Starts, TriggerError, start_followers, start_ref_followers};

/// What the handler did with one event (its JSON is the function's answer,
/// and its log line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum EventAnswer {
    /// A known event with nothing to do.
    #[serde(rename = "ignored")]
    Ignored { reason: String },
    /// Followers of the source, some started.
    #[serde(rename = "started")]
    Started(Starts),
    /// Followers of the source, none new to start.
    #[serde(rename = "nothing new to start")]
    NothingNew(Starts),
    /// No stack follows the source.
    #[serde(rename = "no stack follows this source")]
    NoFollower { sources: Vec<String> },
    /// Stacks changed out of band, marked due.
    #[serde(rename = "marked for reconcile")]
    Marked {
        marked: Vec<Marked>,
        ignored: Vec<Left>,
    },
    /// Managed stacks, nothing to mark.
    #[serde(rename = "nothing to do")]
    NothingToDo {
        marked: Vec<Marked>,
        ignored: Vec<Left>,
    },
    /// No entry manages the stack.
    #[serde(rename = "not managed by stacksync")]
    NotManaged {
        #[serde(rename = "stackName")]
        stack_name: String,
    },
    /// A reconcile execution ended without releasing its stack: released.
    #[serde(rename = "released")]
    Released { stack: String, execution: String },
}

impl EventAnswer {
    /// The answer for the followers of `sources`.
    fn of_starts(starts: Starts, sources: Vec<String>) -> EventAnswer {
        if starts.is_empty() {
            EventAnswer::NoFollower { sources }
        } else if starts.started.is_empty() {
            EventAnswer::NothingNew(starts)
        } else {
            EventAnswer::Started(starts)
        }
    }
}

/// A stack marked due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Marked {
    pub stack: String,
    pub status: String,
    /// False when it was due already.
    #[serde(rename = "markedNow")]
    pub marked_now: bool,
}

/// A managed stack left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Left {
    pub stack: String,
    pub reason: &'static str,
}

/// How a CloudFormation status change of a managed stack is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackEventVerdict {
    /// stacksync made it (or is making it): nothing to do.
    Own(&'static str),
    /// Nothing to do for another reason.
    Ignore(&'static str),
    /// Somebody else changed the stack: reconcile it.
    OutOfBand,
}

/// Tells stacksync's own changes from out-of-band ones, for an event that
/// happened at `event_time` (CloudFormation's clock) seen at `now`.
pub fn judge_stack_event(
    entry: &StackEntry,
    change: &StackStatusChange,
    event_time: Option<EpochMillis>,
    now: EpochMillis,
) -> StackEventVerdict {
    if change
        .client_request_token
        .as_deref()
        .is_some_and(|t| t.starts_with(OWN_TOKEN_PREFIX))
    {
        return StackEventVerdict::Own("stacksync's request token");
    }
    if entry.deletion_requested_at.is_some() {
        return StackEventVerdict::Own("stacksync is deleting the entry");
    }
    if entry.is_suspended() {
        return StackEventVerdict::Ignore("suspended: stacksync leaves the stack alone");
    }
    if entry.lease.as_ref().is_some_and(|l| l.is_live(now)) {
        return StackEventVerdict::Own("a stacksync run drives the stack");
    }
    if change.in_progress() {
        return StackEventVerdict::Ignore("in progress: the final status decides");
    }
    // The last run ended after this happened: it saw the result.
    if let (Some(at), Some(last)) = (event_time, entry.status.times.last_reconcile_at)
        && at <= last.0
    {
        return StackEventVerdict::Own("seen by the last run");
    }
    StackEventVerdict::OutOfBand
}

/// The EventBridge handler's collaborators.
#[derive(Debug)]
pub struct EventHandler<R, X> {
    pub registry: R,
    pub starter: X,
    /// The installation's region: a spec with no `region` is in it.
    pub region: String,
    /// The registry sources a CodeCommit push or an S3 object may move,
    /// applied before the stacks that follow it are started; `None`: none
    /// read here.
    pub registry_sources:
        Option<std::sync::Arc<dyn crate::triggers::registry_source::AppliesPushes>>,
}

impl<R: Entries + Schedule + Leases, X: Starter> EventHandler<R, X> {
    /// Handles one event. An error is worth retrying (EventBridge's
    /// asynchronous invoke tries twice more); a malformed event never gets
    /// here (the function answers it as rejected: a retry would not mend it).
    pub async fn handle(
        &self,
        event: &AwsEvent,
        now: EpochMillis,
    ) -> Result<EventAnswer, TriggerError> {
        let (keys, revision) = match &event.detail {
            Detail::Ignored { reason } => {
                return Ok(EventAnswer::Ignored {
                    reason: reason.clone(),
                });
            }
            Detail::StackStatusChange(change) => {
                return self.stack_changed(event, change, now).await;
            }
            Detail::ExecutionEnded(ended) => return self.execution_ended(ended, now).await,
            Detail::CodeCommitPush(moved) | Detail::RegistrySourcePushed(moved) => {
                let mut starts = Starts::default();
                // A CodeCommit event is AWS's own; a relayed push only
                // announces its commit: the source's ref is read again.
                let exact = matches!(event.detail, Detail::CodeCommitPush(_));
                let applier = self.registry_sources.as_deref();
                let start = (TriggerKind::Event, now);
                apply_and_start(applier, &self.starter, moved, exact, start, &mut starts).await?;
                start_ref_followers(
                    &self.registry,
                    &self.starter,
                    moved,
                    TriggerKind::Event,
                    &mut starts,
                )
                .await?;
                return Ok(EventAnswer::of_starts(starts, moved.source_keys()));
            }
            // A version id names the new object exactly; an unversioned
            // bucket has only the ETag, and then the event id.
            Detail::ObjectCreated(object) => (
                vec![object.source_key()],
                object
                    .version_id
                    .clone()
                    .or_else(|| object.etag.clone())
                    .unwrap_or_else(|| event.id.clone()),
            ),
        };
        let mut starts = Starts::default();
        if let Detail::ObjectCreated(object) = &event.detail {
            // An S3 source's new object: its version id names it exactly.
            let moved = crate::triggers::RefMoved {
                repository_urls: vec![object.url()],
                reference: String::new(),
                commit: revision.clone(),
            };
            let exact = object.version_id.is_some();
            let applier = self.registry_sources.as_deref();
            let start = (TriggerKind::Event, now);
            apply_and_start(applier, &self.starter, &moved, exact, start, &mut starts).await?;
        }
        start_followers(
            &self.registry,
            &self.starter,
            &keys,
            TriggerKind::Event,
            &revision,
            &mut starts,
        )
        .await?;
        Ok(EventAnswer::of_starts(starts, keys))
    }

    /// Releases the stack a reconcile execution still holds after it ended
    /// `ABORTED` or `TIMED_OUT` (or `FAILED` with its own failure unrecorded),
    /// recording it `Failed (Interrupted)`; a run that released its stack, or
    /// whose stack another run holds now, is left alone.
    async fn execution_ended(
        &self,
        ended: &ExecutionEnded,
        now: EpochMillis,
    ) -> Result<EventAnswer, TriggerError> {
        let why = format!(
            "interrupted: execution {} ended {} without giving the stack back; the stack is due again",
            ended.name, ended.status
        );
        if end_hold(&self.registry, &ended.stack, &ended.name, &why, now).await? {
            info!(stack = %ended.stack, execution = %ended.name, status = %ended.status, "stack released");
            return Ok(EventAnswer::Released {
                stack: ended.stack.clone(),
                execution: ended.name.clone(),
            });
        }
        Ok(EventAnswer::Ignored {
            reason: format!("{} does not hold {}", ended.name, ended.stack),
        })
    }

    /// Marks the managed stacks (in the event's region and account) that
    /// somebody else changed.
    async fn stack_changed(
        &self,
        event: &AwsEvent,
        change: &StackStatusChange,
        now: EpochMillis,
    ) -> Result<EventAnswer, TriggerError> {
        let entries = self.registry.by_stack_name(&change.stack_name).await?;
        let event_time = parse_rfc3339(&event.time);
        let (mut marked, mut ignored) = (Vec::new(), Vec::new());
        let here = entries.iter().filter(|e| {
            e.spec.region.as_deref().unwrap_or(&self.region) == event.region
                && e.spec.assume_role_arn.is_none()
        });
        for entry in here {
            match judge_stack_event(entry, change, event_time, now) {
                StackEventVerdict::OutOfBand => {
                    let marked_now = self.registry.mark_due(&entry.name, now).await?;
                    info!(stack = %entry.name, status = %change.status, "changed out of band; marked for reconcile");
                    marked.push(Marked {
                        stack: entry.name.clone(),
                        status: change.status.clone(),
                        marked_now,
                    });
                }
                StackEventVerdict::Own(reason) | StackEventVerdict::Ignore(reason) => {
                    ignored.push(Left {
                        stack: entry.name.clone(),
                        reason,
                    })
                }
            }
        }
        Ok(match (marked.is_empty(), ignored.is_empty()) {
            (true, true) => EventAnswer::NotManaged {
                stack_name: change.stack_name.clone(),
            },
            (true, false) => EventAnswer::NothingToDo { marked, ignored },
            (false, _) => EventAnswer::Marked { marked, ignored },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Lease;
    use crate::status::{Status, Timestamp};

    const NOW: EpochMillis = 1_800_000_000_000;

    fn entry() -> StackEntry {
        let mut status = Status::default();
        status.times.last_reconcile_at = Some(Timestamp(NOW - 60_000));
        crate::registry::sample_entry("orders", status)
    }

    fn change(status: &str, token: Option<&str>) -> StackStatusChange {
        StackStatusChange {
            stack_id: "arn:aws:cloudformation:us-east-1:1:stack/orders/x".into(),
            stack_name: "orders".into(),
            status: status.into(),
            status_reason: None,
            client_request_token: token.map(str::to_owned),
        }
    }

    #[test]
    fn an_update_by_somebody_else_after_the_last_run_is_out_of_band() {
        let verdict = judge_stack_event(
            &entry(),
            &change("UPDATE_COMPLETE", Some("Console-UpdateStack-1")),
            Some(NOW - 1_000),
            NOW,
        );
        assert_eq!(verdict, StackEventVerdict::OutOfBand);
        // A deletion by hand too (the run re-creates the stack).
        let verdict = judge_stack_event(
            &entry(),
            &change("DELETE_COMPLETE", None),
            Some(NOW - 1_000),
            NOW,
        );
        assert_eq!(verdict, StackEventVerdict::OutOfBand);
    }

    #[test]
    fn stacksyncs_own_changes_are_recognised() {
        let own = change("UPDATE_COMPLETE", Some("stacksync-cs-1234"));
        assert!(matches!(
            judge_stack_event(&entry(), &own, Some(NOW), NOW),
            StackEventVerdict::Own(_)
        ));
        // No token, but a run holds the stack.
        let mut held = entry();
        held.lease = Some(Lease {
            owner: "exec".into(),
            expires_at: Timestamp(NOW + 1),
            taken_at: None,
        });
        assert_eq!(
            judge_stack_event(&held, &change("UPDATE_COMPLETE", None), Some(NOW), NOW),
            StackEventVerdict::Own("a stacksync run drives the stack")
        );
        // A late event of the last run.
        assert_eq!(
            judge_stack_event(
                &entry(),
                &change("UPDATE_COMPLETE", None),
                Some(NOW - 90_000),
                NOW
            ),
            StackEventVerdict::Own("seen by the last run")
        );
    }

    #[test]
    fn in_progress_suspended_and_deleting_stacks_are_left_alone() {
        assert!(matches!(
            judge_stack_event(
                &entry(),
                &change("UPDATE_IN_PROGRESS", None),
                Some(NOW),
                NOW
            ),
            StackEventVerdict::Ignore(_)
        ));
        let mut suspended = entry();
        suspended.suspended = true;
        assert!(matches!(
            judge_stack_event(&suspended, &change("UPDATE_COMPLETE", None), Some(NOW), NOW),
            StackEventVerdict::Ignore(_)
        ));
        let mut deleting = entry();
        deleting.deletion_requested_at = Some(Timestamp(NOW));
        assert!(matches!(
            judge_stack_event(&deleting, &change("DELETE_COMPLETE", None), Some(NOW), NOW),
            StackEventVerdict::Own(_)
        ));
    }

    mod handler {
        use super::*;
        use crate::fakes::RecordingStarter;
        use crate::registry::memory::MemoryRegistry;
        use crate::triggers::RefMoved;

        fn handler() -> EventHandler<MemoryRegistry, RecordingStarter> {
            let registry = MemoryRegistry::new();
            registry.insert(entry());
            EventHandler {
                registry,
                starter: RecordingStarter::new(),
                region: "us-east-1".into(),
                registry_sources: None,
            }
        }

        fn event(detail: Detail) -> AwsEvent {
            AwsEvent {
                id: "e-1".into(),
                account: "123456789012".into(),
                region: "us-east-1".into(),
                time: crate::clock::rfc3339(NOW - 1_000),
                detail,
            }
        }

        #[tokio::test]
        async fn a_codecommit_push_starts_the_followers_once() {
            let h = handler();
            let moved = RefMoved {
                repository_urls: vec!["https://git.example/infra.git".into()],
                reference: "refs/heads/main".into(),
                commit: "c".repeat(40),
            };
            let first = h
                .handle(&event(Detail::CodeCommitPush(moved.clone())), NOW)
                .await
                .unwrap();
            assert!(
                matches!(&first, EventAnswer::Started(s) if s.started.len() == 1),
                "{first:?}"
            );
            let again = h
                .handle(&event(Detail::CodeCommitPush(moved)), NOW)
                .await
                .unwrap();
            assert!(matches!(again, EventAnswer::NothingNew(_)), "{again:?}");
            assert_eq!(h.starter.stacks(), ["orders"]);
        }

        #[tokio::test]
        async fn an_out_of_band_change_marks_the_stack_due_and_nothing_else() {
            let h = handler();
            let answer = h
                .handle(
                    &event(Detail::StackStatusChange(change(
                        "UPDATE_COMPLETE",
                        Some("Console-1"),
                    ))),
                    NOW,
                )
                .await
                .unwrap();
            assert!(
                matches!(&answer, EventAnswer::Marked { marked, .. } if marked[0].marked_now),
                "{answer:?}"
            );
            assert_eq!(
                h.registry
                    .entry("orders")
                    .unwrap()
                    .status
                    .times
                    .next_reconcile_at,
                Some(Timestamp(NOW))
            );
            assert!(
                h.starter.started().is_empty(),
                "the scheduler starts it, not the event"
            );
            let own = h
                .handle(
                    &event(Detail::StackStatusChange(change(
                        "UPDATE_COMPLETE",
                        Some("stacksync-x"),
                    ))),
                    NOW,
                )
                .await
                .unwrap();
            assert!(matches!(own, EventAnswer::NothingToDo { .. }), "{own:?}");
            let mut other = change("UPDATE_COMPLETE", None);
            other.stack_name = "someone-else".into();
            let answer = h
                .handle(&event(Detail::StackStatusChange(other)), NOW)
                .await
                .unwrap();
            assert_eq!(
                serde_json::to_value(answer).unwrap()["result"],
                "not managed by stacksync"
            );
        }

        #[tokio::test]
        async fn a_registry_that_cannot_be_read_is_an_error_to_retry() {
            let h = EventHandler {
                registry: crate::fakes::Failing::new(MemoryRegistry::new()),
                starter: RecordingStarter::new(),
                region: "us-east-1".into(),
                registry_sources: None,
            };
            h.registry.fail(
                "Query",
                1,
                crate::ports::PortError::Transient("throttled".into()),
            );
            let err = h
                .handle(
                    &event(Detail::StackStatusChange(change("UPDATE_COMPLETE", None))),
                    NOW,
                )
                .await
                .unwrap_err();
            assert!(
                matches!(err, TriggerError::Registry(ref e) if e.is_transient()),
                "{err}"
            );
        }
    }

    /// An execution aborted or timed out skipped the machine's `Catch`: the
    /// handler gives its stack back; a run that released it is left alone.
    #[tokio::test]
    async fn an_execution_that_ended_holding_its_stack_is_made_to_let_go() {
        use crate::registry::memory::MemoryRegistry;
        let registry = MemoryRegistry::new();
        registry.insert(entry());
        registry
            .acquire_lease(
                "orders",
                "orders_manual_1",
                std::time::Duration::from_secs(600),
                NOW,
            )
            .await
            .unwrap();
        let handler = EventHandler {
            registry,
            starter: crate::fakes::RecordingStarter::new(),
            region: "us-east-1".into(),
            registry_sources: None,
        };
        let aborted = |name: &str| AwsEvent {
            id: "e-1".into(),
            account: "1".into(),
            region: "us-east-1".into(),
            time: "2026-11-23T18:43:48Z".into(),
            detail: Detail::ExecutionEnded(ExecutionEnded {
                name: name.into(),
                stack: "orders".into(),
                status: "ABORTED".into(),
            }),
        };
        let other = handler
            .handle(&aborted("orders_manual_0"), NOW + 1)
            .await
            .unwrap();
        assert!(matches!(other, EventAnswer::Ignored { .. }), "{other:?}");
        assert!(
            handler.registry.entry("orders").unwrap().lease.is_some(),
            "another run's hold stays"
        );
        let answer = handler
            .handle(&aborted("orders_manual_1"), NOW + 1)
            .await
            .unwrap();
        assert!(matches!(answer, EventAnswer::Released { .. }), "{answer:?}");
        let entry = handler.registry.entry("orders").unwrap();
        assert!(entry.lease.is_none());
        assert_eq!(
            entry.status.stall_reason,
            Some(crate::status::StallReason::Interrupted)
        );
        assert!(
            entry
                .status
                .message
                .unwrap_or_default()
                .contains("ended ABORTED")
        );
    }
}
