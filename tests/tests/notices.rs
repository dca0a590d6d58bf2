//! The events a run puts on an EventBridge bus (source `stacksync`), as a
//! user's rule sees them: the emulator's default bus, a rule matching this
//! installation's events, and an SQS queue as its target, read back here.
#![allow(clippy::unwrap_used)]
// tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use stacksync::asl::Outcome;
use stacksync::registry::Entries;
use stacksync_testkit::bus::{queue_for_installation, received};
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const QUEUE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_succeeds_and_one_that_fails_reach_a_queue_through_a_rule_on_the_bus() {
    let emulator = Emulator::shared();
    emulator.start_recording();
    // The harness's runs put their events on the default bus.
    let h = Harness::new("told").await;
    let url = queue_for_installation(h.steps.registry.table()).await;
    let repo = GitRepo::new("told");
    let daemon = GitDaemon::serve(&repo);
    let revision = repo.commit(&[("stacks/queue.yaml", QUEUE)], "queue");
    let good = unique_name("good").replace('-', "x");
    let bad = unique_name("bad").replace('-', "x");
    let source = daemon.url(&repo);
    h.apply(&format!(
        "stacks:\n  - name: {good}\n    source: {{git: '{source}', path: stacks/queue.yaml}}\n  \
         - name: {bad}\n    source: {{git: '{source}', path: stacks/missing.yaml}}\n"
    ))
    .await;

    assert!(matches!(h.reconcile(&good).await, Outcome::Succeeded(_)));
    assert!(matches!(h.reconcile(&bad).await, Outcome::Failed { .. }));

    let events = received(&url, 4, Duration::from_secs(20)).await;
    let mut told: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in &events {
        assert_eq!(event["source"], "stacksync", "{event}");
        let stack = event["detail"]["stack"].as_str().unwrap().to_owned();
        let kind = event["detail-type"].as_str().unwrap().to_owned();
        told.entry(stack).or_default().push(kind);
    }
    assert_eq!(
        told,
        BTreeMap::from([
            (
                good.clone(),
                vec![
                    "Reconcile Started".to_owned(),
                    "Reconcile Succeeded".to_owned()
                ]
            ),
            (
                bad.clone(),
                vec![
                    "Reconcile Started".to_owned(),
                    "Reconcile Failed".to_owned()
                ]
            ),
        ]),
        "{events:#?}"
    );
    let detail = |stack: &str, kind: &str| {
        events
            .iter()
            .find(|e| e["detail"]["stack"] == stack && e["detail-type"] == kind)
            .map(|e| e["detail"].clone())
            .unwrap()
    };
    let succeeded = detail(&good, "Reconcile Succeeded");
    assert_eq!(succeeded["phase"], "Ready");
    assert_eq!(succeeded["revision"], revision.as_str());
    assert_eq!(succeeded["stackName"], good.as_str());
    assert!(succeeded["stackId"].as_str().unwrap().contains(&good));
    assert!(
        succeeded["changeSet"]
            .as_str()
            .unwrap()
            .starts_with("stacksync-")
    );
    assert!(succeeded["executionArn"].is_string());
    let failed = detail(&bad, "Reconcile Failed");
    assert_eq!(failed["phase"], "Failed");
    assert_eq!(failed["stallReason"], "InvalidTemplate");
    let cause = failed["rootCause"].as_str().unwrap();
    assert!(cause.contains("stacks/missing.yaml"), "{cause}");
    // Nothing else came (moto delivers during PutEvents: a short look will do).
    assert!(received(&url, 1, Duration::from_secs(2)).await.is_empty());
    let entry = h.steps.registry.get(&good).await.unwrap().unwrap();
    assert_eq!(entry.status.applied.last_applied_revision, Some(revision));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_drift_functions_notices_reach_a_queue_through_a_rule_on_the_bus() {
    use stacksync_testkit::drift::{Drifting, queue_drift};
    let mut t = Drifting::new("told-drift", "").await;
    // The drift function puts its notices on the emulator's default bus, as deployed.
    t.drift.config.notices =
        stacksync::wiring::event_bus(&Emulator::shared().sdk_config(), "default");
    let url = queue_for_installation(&t.drift.config.installation).await;
    t.later(60_000).await;
    t.finds("DRIFTED", vec![queue_drift()]);
    t.later(300_000).await;
    let events = received(&url, 1, Duration::from_secs(20)).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(
        (&event["source"], &event["detail-type"]),
        (&json!("stacksync"), &json!("Drift Detected"))
    );
    let detail = &event["detail"];
    assert_eq!(detail["stack"], t.name.as_str());
    assert_eq!(detail["phase"], "Drifted");
    assert_eq!(detail["drift"]["count"], 1);
    assert_eq!(detail["drift"]["resources"], json!(["Queue"]));
    assert_eq!(detail["drift"]["action"], "report");
    assert_eq!(detail["trigger"], "drift");
    // The same drift found again is not news.
    t.later(2 * 86_400_000).await;
    t.later(300_000).await;
    assert!(received(&url, 1, Duration::from_secs(2)).await.is_empty());
}
