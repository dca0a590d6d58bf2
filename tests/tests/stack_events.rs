//! Runs that wait on their stack end on CloudFormation's event, not on a
//! poll's backoff: the real reconcile state machine (the local interpreter),
//! the real registry and bucket (the emulator's), a scripted CloudFormation
//! (the emulator sends no events and makes no operation last), and the
//! events function handed the events as EventBridge delivers them (the
//! documented `CloudFormation Stack Status Change` shape).
#![allow(clippy::unwrap_used)]
// tests: a failed unwrap is a failed test
// The run's future nests the interpreter, the steps and their ports deeply.
#![recursion_limit = "256"]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use stacksync::asl::Outcome;
use stacksync::clock::{EpochMillis, now_millis, rfc3339};
use stacksync::registry::{Entries, Parked};
use stacksync::stack_status::StackStatus as S;
use stacksync::status::Phase;
use stacksync::triggers::events::from_value;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::iam::as_function;
use stacksync_testkit::scripted::ScriptedCloudFormation;
use stacksync_testkit::unique_name;

const TEMPLATE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

/// A new stack whose creation stays in progress until the test says
/// otherwise (`after`: the statuses after the change set is executed, the
/// last repeating), with events on.
async fn setup(
    after: &[Option<S>],
) -> (
    Arc<Harness<ScriptedCloudFormation>>,
    ScriptedCloudFormation,
    String,
) {
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().after_execute = after.to_vec();
    // The change set is ready at once: no wait before the stack's.
    fake.script().change_set = [stacksync::fakes::ready()].into_iter().collect();
    let h = Harness::with_port("events", fake.clone())
        .await
        .with_stack_events();
    let repo = GitRepo::new("events");
    repo.commit(&[("t.yaml", TEMPLATE)], "template");
    let name = unique_name("ev").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    pollInterval: 5s\n",
        repo.file_url()
    ))
    .await;
    (Arc::new(h), fake, name)
}

/// The run's park, once it has parked (the lease records it).
async fn parked(h: &Harness<ScriptedCloudFormation>, name: &str) -> Parked {
    for _ in 0..400 {
        let entry = h.steps.registry.get(name).await.unwrap().unwrap();
        if let Some(parked) = entry.lease.and_then(|l| l.parked) {
            return parked;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name}'s run never parked");
}

/// A `CloudFormation Stack Status Change` event, as EventBridge delivers it.
fn stack_event(stack_id: &str, status: &str, at: EpochMillis) -> Value {
    json!({
        "version": "0",
        "id": unique_name("event"),
        "detail-type": "CloudFormation Stack Status Change",
        "source": "aws.cloudformation",
        "account": "123456789012",
        "time": rfc3339(at),
        "region": "us-east-1",
        "resources": [stack_id],
        "detail": {
            "stack-id": stack_id,
            "status-details": {"status": status, "status-reason": ""},
            "client-request-token": ""
        }
    })
}

/// Hands `event` to the events function; its answer.
async fn deliver(h: &Harness<ScriptedCloudFormation>, event: Value) -> Value {
    let handler = h.events_handler();
    let event = from_value(event).unwrap();
    let answer = as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    serde_json::to_value(answer).unwrap()
}

fn woken(answer: &Value) -> Vec<String> {
    answer["woken"]
        .as_array()
        .map(|w| w.iter().map(|n| n.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stacks_event_ends_the_wait_and_stale_or_early_events_end_nothing() {
    let (h, fake, name) = setup(&[Some(S::CreateInProgress)]).await;
    // In real time: the fallback poll would come 30 s after the park, long
    // after the events below (however slow the machine).
    let run = tokio::spawn({
        let (h, name) = (h.clone(), name.clone());
        async move { h.reconcile_at(&name, 1.0).await }
    });
    let park = parked(&h, &name).await;
    assert_eq!(park.on, "execution");
    let stack_id = park.stack_id.clone().expect("the change set's stack");

    // Still in progress, an older operation's end, another stack's: none wakes it.
    let progress = deliver(
        &h,
        stack_event(&stack_id, "CREATE_IN_PROGRESS", now_millis()),
    )
    .await;
    assert!(woken(&progress).is_empty(), "{progress}");
    let old = deliver(
        &h,
        stack_event(&stack_id, "UPDATE_COMPLETE", park.since.0 - 60_000),
    )
    .await;
    assert!(woken(&old).is_empty(), "{old}");
    let other = stack_id.replace(&format!("/{name}/"), &format!("/{name}/x"));
    let replaced = deliver(&h, stack_event(&other, "DELETE_COMPLETE", now_millis())).await;
    assert!(woken(&replaced).is_empty(), "{replaced}");

    // A settled status delivered early (duplicated, reordered): the run
    // wakes, sees the stack still in progress, and parks again.
    let early = deliver(&h, stack_event(&stack_id, "CREATE_COMPLETE", now_millis())).await;
    assert_eq!(woken(&early), [name.as_str()], "{early}");
    let again = loop {
        let p = parked(&h, &name).await;
        if p.since != park.since {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!run.is_finished(), "nothing ended early");

    // The stack is made: its event ends the run.
    fake.script().stack = [Some(S::CreateComplete)].into_iter().collect();
    let done = deliver(&h, stack_event(&stack_id, "CREATE_COMPLETE", now_millis())).await;
    assert_eq!(woken(&done), [name.as_str()], "{done}");
    let (_, outcome) = run.await.unwrap();
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let states = h.take_states();
    assert!(
        !states.iter().any(|s| s == "LongerWait"),
        "no fallback poll was needed: {states:?}"
    );
    assert_eq!(
        states.iter().filter(|s| *s == "WaitForEvent").count(),
        3,
        "parked, woken early and parked again, woken and done: {states:?}"
    );
    assert!(again.since.0 > park.since.0);
    assert_eq!(
        fake.operations()
            .iter()
            .filter(|o| *o == "ExecuteChangeSet")
            .count(),
        1
    );
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Ready);
    assert!(entry.lease.is_none(), "released, the park with it");

    // The same event again, once the run has moved on: nothing to wake.
    let late = deliver(&h, stack_event(&stack_id, "CREATE_COMPLETE", now_millis())).await;
    assert!(woken(&late).is_empty(), "{late}");
    assert_eq!(h.entry(&name).await.status, entry.status);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_event_is_made_up_for_by_the_fallback_poll_whose_wait_doubles_to_five_minutes() {
    // Two describes per park (the poll, and the look once parked): six
    // parks in progress, then made; no event is ever delivered.
    let mut after = vec![Some(S::CreateInProgress); 12];
    after.push(Some(S::CreateComplete));
    let (h, _fake, name) = setup(&after).await;
    let (_, outcome) = h.reconcile_at(&name, 1000.0).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    assert_eq!(h.entry(&name).await.status.phase, Phase::Ready);
    // The wait each park was given, as the state said when it parked.
    let events = h.events.lock().unwrap().clone();
    let data = h.data.lock().unwrap().clone();
    let waits: Vec<u64> = events
        .iter()
        .zip(&data)
        .filter(|(e, _)| {
            matches!(e, stacksync::asl::Progress::StateEntered { name, .. } if name == "WaitForEvent")
        })
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).unwrap()["waitSeconds"].as_u64())
        .collect();
    assert_eq!(waits[..6], [30, 60, 120, 240, 300, 300], "{waits:?}");
}
