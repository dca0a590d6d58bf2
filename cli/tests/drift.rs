//! `stacksync drift NAME` and `status` through the binary, on a drift the
//! drift function recorded in the emulator's registry (found by the scripted
//! CloudFormation: the emulator has no drift detection).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

mod common;

use common::{stacksync_on, stderr, stdout};
use serde_json::Value;
use stacksync_testkit::drift::{Drifting, queue_drift};

#[tokio::test(flavor = "multi_thread")]
async fn drift_prints_each_difference_and_status_shows_the_stack_drifted() {
    let mut t = Drifting::new("cli-drift", "    drift: {ignore: [Queue.Tags]}\n").await;
    let table = t.h.steps.registry.table().to_owned();
    let out = stacksync_on(&table, &["drift", &t.name]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("no detection read yet") && text.contains("no drifted resource"),
        "{text}"
    );

    t.later(60_000).await;
    t.finds("DRIFTED", vec![queue_drift()]);
    t.later(300_000).await;
    let out = stacksync_on(&table, &["drift", &t.name]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.starts_with("Queue "))
        .unwrap_or_else(|| panic!("{text}"));
    for cell in [
        "AWS::SQS::Queue",
        "NOT_EQUAL",
        "/VisibilityTimeout",
        "30",
        "60",
    ] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    assert!(!text.contains("/Tags/0/Value"), "ignored: {text}");
    assert!(
        text.contains("Drifted") && text.contains("1 difference(s) ignored by drift.ignore"),
        "{text}"
    );

    let out = stacksync_on(&table, &["-o", "json", "drift", &t.name]).await;
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["phase"], "Drifted");
    assert_eq!(json["stackDrift"], "DRIFTED");
    assert_eq!(json["ignored"], 1);
    assert_eq!(json["settings"]["ignore"][0], "Queue.Tags");
    let difference = &json["resources"][0]["differences"][0];
    assert_eq!(
        (
            &difference["path"],
            &difference["expected"],
            &difference["actual"]
        ),
        (
            &Value::from("/VisibilityTimeout"),
            &Value::from("30"),
            &Value::from("60")
        )
    );

    let status = stdout(&stacksync_on(&table, &["status", &t.name]).await);
    assert!(
        status.contains("Drifted (1)") && status.contains(&format!("stacksync drift {}", t.name)),
        "{status}"
    );
    let rows: Value = serde_json::from_str(&stdout(
        &stacksync_on(&table, &["-o", "json", "status"]).await,
    ))
    .unwrap();
    assert_eq!(rows[0]["phase"], "Drifted");
    assert_eq!(rows[0]["driftedResources"], 1);

    let out = stacksync_on(&table, &["drift", "nobody"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no stack named \"nobody\""),
        "{}",
        stderr(&out)
    );
}
