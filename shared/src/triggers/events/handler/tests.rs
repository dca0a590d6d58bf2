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
        parked: None,
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
            waker: None,
            drift: None,
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
            waker: None,
            drift: None,
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
        waker: None,
        drift: None,
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
