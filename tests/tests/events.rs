//! The EventBridge handler against the emulator, with the real-shaped events
//! of tests/fixtures/events: CodeCommit and S3 events start the stacks that
//! follow the source (executions listed in moto's Step Functions); a
//! CloudFormation change made out of band marks the stack, and the next
//! scheduler run starts it; stacksync's own changes are ignored.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use serde_json::Value;
use stacksync::adapters::stepfunctions::Executions;
use stacksync::clock::{now_millis, rfc3339};
use stacksync::registry::{Entries, Registry, StackEntry};
use stacksync::triggers::events::from_value;
use stacksync::triggers::events::handler::EventHandler;
use stacksync::triggers::scheduler::judge::Reason;
use stacksync_testkit::fleet::{Fleet, steady_entry};
use stacksync_testkit::iam::as_function;

fn fixture(name: &str) -> Value {
    let path = format!("{}/fixtures/events/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stack"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

struct Setup {
    fleet: Fleet,
    handler: EventHandler<Registry, Executions>,
    p: String,
}

impl Setup {
    async fn new() -> Setup {
        let fleet = Fleet::new("events", &[0]).await;
        let p = fleet.prefix.clone();
        let now = now_millis();
        let entry = |name: &str, edit: &dyn Fn(&mut StackEntry)| {
            let mut e = steady_entry(&format!("{p}-{name}"), &fleet.urls[0], "0", now);
            edit(&mut e);
            e
        };
        let codecommit = "https://git-codecommit.eu-west-1.amazonaws.com/v1/repos/platform-infra";
        let entries = vec![
            entry("cc", &|e| e.spec.source.git = Some(codecommit.into())),
            entry("cc-ssh", &|e| {
                e.spec.source.git = Some(
                    "ssh://git-codecommit.eu-west-1.amazonaws.com/v1/repos/platform-infra".into(),
                );
            }),
            entry("cc-dev", &|e| {
                e.spec.source.git = Some(codecommit.into());
                e.spec.source.reference = Some("develop".into());
            }),
            entry("s3", &|e| {
                e.spec.source.git = None;
                e.spec.source.reference = None;
                e.spec.source.s3 =
                    Some("s3://acme-stacksync-sources/platform/network stack/release+1.zip".into());
            }),
            entry("net", &|e| {
                e.spec.stack_name = Some("acme-network".into());
                e.spec.region = Some("eu-west-1".into());
            }),
            entry("net-us", &|e| {
                e.spec.stack_name = Some("acme-network".into());
                e.spec.region = Some("us-east-2".into());
            }),
        ];
        fleet.write(&entries).await;
        let handler = EventHandler {
            registry: fleet.registry.clone(),
            starter: Executions::new(fleet.sfn.clone(), &fleet.machine),
            region: "us-east-1".into(),
            registry_sources: None,
            waker: None,
            drift: None,
        };
        Setup { fleet, handler, p }
    }

    async fn handle(&self, event: Value) -> Value {
        let event = from_value(event).unwrap();
        let answer = as_function("events", self.handler.handle(&event, now_millis()))
            .await
            .unwrap();
        serde_json::to_value(answer).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn codecommit_and_s3_events_start_the_stacks_that_follow_them_once() {
    let s = Setup::new().await;
    let p = &s.p;
    let event = fixture("codecommit-reference-updated");
    let commit = event["detail"]["commitId"].as_str().unwrap().to_owned();

    let answer = s.handle(event.clone()).await;
    assert_eq!(answer["result"], "started", "{answer}");
    // The https and ssh URLs of the repository follow main; develop does not.
    assert_eq!(
        names(&answer["started"]),
        [format!("{p}-cc"), format!("{p}-cc-ssh")]
    );
    let executions = s.fleet.execution_names().await;
    assert_eq!(executions.len(), 2);
    assert!(
        executions.iter().all(|n| n.contains("_event_")),
        "{executions:?}"
    );
    // They follow `main`, a short ref (a branch or a tag of that name: git
    // says a tag first): each run resolves it, so no commit is pinned.
    let inputs =
        stacksync_testkit::Emulator::shared().recorded_bodies("StartExecution", &s.fleet.machine);
    assert!(
        inputs
            .iter()
            .all(|b| !b.contains(&commit) && !b.contains("revision")),
        "{inputs:?}"
    );

    // EventBridge delivers again (a second later): nothing new, whether the
    // execution still runs (Step Functions answers with it) or has ended
    // (ExecutionAlreadyExists).
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    let again = s.handle(event).await;
    assert_eq!(again["result"], "nothing new to start", "{again}");
    assert_eq!(s.fleet.execution_names().await.len(), 2);

    // A deleted branch is not a push.
    let deleted = s.handle(fixture("codecommit-reference-deleted")).await;
    assert_eq!(deleted["result"], "ignored", "{deleted}");

    // A new version of an S3 source (its key URL-encoded in the event).
    let answer = s.handle(fixture("s3-object-created")).await;
    assert_eq!(names(&answer["started"]), [format!("{p}-s3")], "{answer}");
    assert_eq!(
        answer["started"][0]["revision"],
        "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e"
    );
    assert_eq!(s.fleet.execution_names().await.len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_out_of_band_stack_change_is_reconciled_and_stacksyncs_own_are_not() {
    let s = Setup::new().await;
    let p = &s.p;
    let recent = |token: &str| {
        let mut event = fixture("cloudformation-stack-status-change");
        event["time"] = rfc3339(now_millis() - 5_000).into();
        event["detail"]["client-request-token"] = token.into();
        event
    };

    // stacksync's own operation (its request token): nothing to do.
    let own = s.handle(recent("stacksync-cs-0123abcd")).await;
    assert_eq!(own["result"], "nothing to do", "{own}");
    assert_eq!(own["ignored"][0]["reason"], "stacksync's request token");
    // Still in progress: the final status decides.
    let mut in_progress = recent("Console-UpdateStack-1");
    in_progress["detail"]["status-details"]["status"] = "UPDATE_IN_PROGRESS".into();
    let answer = s.handle(in_progress).await;
    assert_eq!(answer["result"], "nothing to do", "{answer}");
    // A stack of the same name nobody registered in that region, or another name.
    let mut unmanaged = recent("Console-UpdateStack-1");
    unmanaged["detail"]["stack-id"] =
        "arn:aws:cloudformation:eu-west-1:123456789012:stack/somebody-elses/5e3f7c20".into();
    let answer = s.handle(unmanaged).await;
    assert_eq!(answer["result"], "not managed by stacksync", "{answer}");
    let before = s
        .fleet
        .registry
        .get(&format!("{p}-net"))
        .await
        .unwrap()
        .unwrap();
    assert!(before.status.times.next_reconcile_at.unwrap().0 > now_millis());

    // Somebody updated the stack in the console: due now (eu-west-1 only).
    let now = now_millis();
    let event = from_value(recent("Console-UpdateStack-1")).unwrap();
    let answer = as_function("events", s.handler.handle(&event, now))
        .await
        .unwrap();
    let answer = serde_json::to_value(answer).unwrap();
    assert_eq!(answer["result"], "marked for reconcile", "{answer}");
    assert_eq!(names(&answer["marked"]), [format!("{p}-net")]);
    let marked = s
        .fleet
        .registry
        .get(&format!("{p}-net"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        marked.status.times.next_reconcile_at.map(|t| t.0),
        Some(now)
    );
    let other = s
        .fleet
        .registry
        .get(&format!("{p}-net-us"))
        .await
        .unwrap()
        .unwrap();
    assert!(other.status.times.next_reconcile_at.unwrap().0 > now);

    // The scheduler's next run starts it, and only it.
    let report = as_function("scheduler", s.fleet.scheduler(10).run(now_millis()))
        .await
        .unwrap();
    let started: Vec<(String, Reason)> = report
        .started
        .iter()
        .map(|r| (r.stack.clone(), r.reason))
        .collect();
    assert_eq!(
        started,
        [(format!("{p}-net"), Reason::Marked)],
        "{report:?}"
    );
    assert_eq!(s.fleet.execution_names().await.len(), 1);
}

/// An execution aborted (or timed out) skips the machine's `Catch`: the
/// events function gives its stack back, recorded `Failed (Interrupted)`.
#[tokio::test(flavor = "multi_thread")]
async fn an_aborted_execution_that_still_holds_its_stack_is_made_to_let_go() {
    use stacksync::registry::Leases;
    let s = Setup::new().await;
    let stack = format!("{}-net", s.p);
    let execution = format!("{stack}_manual_1a2b3c");
    s.fleet
        .registry
        .acquire_lease(
            &stack,
            &execution,
            std::time::Duration::from_secs(600),
            now_millis(),
        )
        .await
        .unwrap();
    let mut event = fixture("stepfunctions-execution-aborted");
    event["detail"]["name"] = execution.clone().into();
    event["detail"]["input"] = serde_json::json!({"stackId": stack, "trigger": {"kind": "manual"}})
        .to_string()
        .into();
    let answer = s.handle(event.clone()).await;
    assert_eq!(answer["result"], "released", "{answer}");
    let entry = s.fleet.registry.get(&stack).await.unwrap().unwrap();
    assert!(entry.lease.is_none());
    assert_eq!(
        entry.status.stall_reason.map(|r| r.to_string()).as_deref(),
        Some("Interrupted")
    );
    // Delivered again: nothing more to do.
    let again = s.handle(event).await;
    assert_eq!(again["result"], "ignored", "{again}");
}
