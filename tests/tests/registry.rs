//! The registry against a real DynamoDB API (moto server on 127.0.0.1).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use stacksync::StackSpec;
use stacksync::clock::now_millis;
use stacksync::manifest::parse_manifest;
use stacksync::registry::plan::{Action, plan_apply};
use stacksync::registry::{Entries, Leases, Registry, RegistryError, Specs};
use stacksync::status::{Phase, Status, Timestamp};
use stacksync_testkit::Emulator;

fn specs(yaml: &str) -> Vec<StackSpec> {
    parse_manifest("test.yaml", yaml).expect("valid manifest")
}

fn one(name: &str, path: &str) -> String {
    format!(
        "stacks:\n  - name: {name}\n    source: {{git: 'https://github.com/acme/infra.git', path: {path}}}\n"
    )
}

async fn apply(registry: &Registry, yaml: &str, prune: bool) -> Result<(), RegistryError> {
    let current = registry.list().await?;
    let plan = plan_apply(&specs(yaml), &current, prune).expect("no conflicts");
    registry.apply(&plan, now_millis()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_get_list_suspend_resume_delete_round_trip() {
    let registry = Emulator::shared().new_registry("roundtrip").await;
    let yaml = "\
stacks:
  - name: orders
    source: {git: 'https://github.com/acme/infra.git', path: q.yaml}
    tags: {team: orders}
  - name: billing
    source: {s3: 's3://acme-artifacts/billing.zip', path: t.yaml}
";
    apply(&registry, yaml, false).await.unwrap();

    let orders = registry
        .get("orders")
        .await
        .unwrap()
        .expect("orders is registered");
    assert_eq!(orders.spec_version, 1);
    assert_eq!(orders.spec.tags["team"], "orders");
    assert_eq!(orders.status.phase, Phase::Pending);
    assert!(
        orders.status.times.next_reconcile_at.is_some(),
        "a new entry is due at once"
    );
    assert_eq!(orders.spec, specs(yaml)[0]);

    let names: Vec<String> = registry
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["billing", "orders"]);

    assert!(
        registry
            .set_suspended("orders", true, now_millis())
            .await
            .unwrap()
    );
    assert!(
        !registry
            .set_suspended("orders", true, now_millis())
            .await
            .unwrap(),
        "suspending twice changes nothing"
    );
    let suspended = registry.get("orders").await.unwrap().unwrap();
    assert!(suspended.is_suspended());
    assert_eq!(suspended.display_phase(), Phase::Suspended);
    assert_eq!(suspended.spec_version, 1, "suspending is not a spec change");

    assert!(
        registry
            .set_suspended("orders", false, now_millis())
            .await
            .unwrap()
    );
    assert!(
        !registry
            .get("orders")
            .await
            .unwrap()
            .unwrap()
            .is_suspended()
    );

    assert!(
        registry
            .request_deletion("orders", now_millis())
            .await
            .unwrap()
    );
    assert!(
        !registry
            .request_deletion("orders", now_millis())
            .await
            .unwrap(),
        "idempotent"
    );
    let deleting = registry.get("orders").await.unwrap().unwrap();
    assert!(deleting.deletion_requested_at.is_some());
    assert_eq!(deleting.display_phase(), Phase::Deleting);
    assert!(matches!(
        registry.set_suspended("orders", true, now_millis()).await,
        Err(RegistryError::BeingDeleted { .. })
    ));

    // The engine drops the entry once the stack is dealt with, holding the lease.
    registry
        .acquire_lease("orders", "exec-1", Duration::from_secs(60), now_millis())
        .await
        .unwrap();
    registry.remove("orders", "exec-1").await.unwrap();
    assert!(registry.get("orders").await.unwrap().is_none());
    assert!(matches!(
        registry.set_suspended("orders", true, now_millis()).await,
        Err(RegistryError::NotFound { .. })
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn reapplying_an_unchanged_file_changes_nothing_and_a_change_bumps_the_version_once() {
    let registry = Emulator::shared().new_registry("reapply").await;
    apply(&registry, &one("app", "a.yaml"), false)
        .await
        .unwrap();
    let first = registry.get("app").await.unwrap().unwrap();

    let plan = plan_apply(
        &specs(&one("app", "a.yaml")),
        &registry.list().await.unwrap(),
        false,
    )
    .unwrap();
    assert_eq!(plan.writes().count(), 0);
    registry.apply(&plan, now_millis()).await.unwrap();
    let again = registry.get("app").await.unwrap().unwrap();
    assert_eq!(again, first, "not even updatedAt moves");

    apply(&registry, &one("app", "b.yaml"), false)
        .await
        .unwrap();
    let changed = registry.get("app").await.unwrap().unwrap();
    assert_eq!(changed.spec_version, 2);
    assert_eq!(changed.spec.source.path, "b.yaml");
    assert_eq!(changed.created_at, first.created_at);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_writers_racing_on_one_entry_exactly_one_wins() {
    let registry = Emulator::shared().new_registry("race").await;
    apply(&registry, &one("app", "a.yaml"), false)
        .await
        .unwrap();
    let current = registry.list().await.unwrap();
    // Both writers planned from the same read (specVersion 1).
    let plan_a = plan_apply(&specs(&one("app", "from-a.yaml")), &current, false).unwrap();
    let plan_b = plan_apply(&specs(&one("app", "from-b.yaml")), &current, false).unwrap();
    let (a, b) = tokio::join!(
        registry.apply(&plan_a, now_millis()),
        registry.apply(&plan_b, now_millis())
    );

    let outcomes = [a, b];
    let wins = outcomes.iter().filter(|r| r.is_ok()).count();
    assert_eq!(wins, 1, "exactly one writer wins: {outcomes:?}");
    let loser = outcomes.into_iter().find_map(Result::err).unwrap();
    match &loser {
        RegistryError::Conflict { name, .. } => assert_eq!(name, "app"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(
        loser.to_string().contains("changed by someone else"),
        "{loser}"
    );
    let entry = registry.get("app").await.unwrap().unwrap();
    assert_eq!(entry.spec_version, 2, "the loser wrote nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_creators_of_one_new_entry_exactly_one_wins() {
    let registry = Emulator::shared().new_registry("race-create").await;
    let plan_a = plan_apply(&specs(&one("app", "a.yaml")), &[], false).unwrap();
    let plan_b = plan_apply(&specs(&one("app", "b.yaml")), &[], false).unwrap();
    let (a, b) = tokio::join!(
        registry.apply(&plan_a, now_millis()),
        registry.apply(&plan_b, now_millis())
    );
    assert_eq!(
        [&a, &b].iter().filter(|r| r.is_ok()).count(),
        1,
        "{a:?} {b:?}"
    );
    assert!(matches!(
        a.err().or(b.err()),
        Some(RegistryError::Conflict { .. })
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_concurrent_lease_attempts_yield_exactly_one_owner() {
    let registry = Emulator::shared().new_registry("lease").await;
    apply(&registry, &one("app", "a.yaml"), false)
        .await
        .unwrap();
    let now = now_millis();
    let attempts = (0..20).map(|i| {
        let registry = registry.clone();
        tokio::spawn(async move {
            registry
                .acquire_lease("app", &format!("exec-{i}"), Duration::from_secs(300), now)
                .await
        })
    });
    let mut owners = Vec::new();
    let mut refused = 0;
    for attempt in attempts {
        match attempt.await.unwrap() {
            Ok(lease) => owners.push(lease.owner),
            Err(RegistryError::LeaseHeld { .. }) => refused += 1,
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(owners.len(), 1, "owners: {owners:?}");
    assert_eq!(refused, 19);
    let entry = registry.get("app").await.unwrap().unwrap();
    assert_eq!(entry.lease.unwrap().owner, owners[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_lease_can_be_taken_over_and_a_live_one_cannot() {
    let registry = Emulator::shared().new_registry("expiry").await;
    apply(&registry, &one("app", "a.yaml"), false)
        .await
        .unwrap();
    let t0 = now_millis();
    registry
        .acquire_lease("app", "crashed-run", Duration::from_secs(60), t0)
        .await
        .unwrap();

    let live = registry
        .acquire_lease("app", "next-run", Duration::from_secs(60), t0 + 59_000)
        .await;
    match live {
        Err(RegistryError::LeaseHeld {
            owner, expires_at, ..
        }) => {
            assert_eq!(owner, "crashed-run");
            assert_eq!(expires_at, Timestamp(t0 + 60_000));
        }
        other => panic!("a live lease must not be taken: {other:?}"),
    }

    let taken = registry
        .acquire_lease("app", "next-run", Duration::from_secs(60), t0 + 61_000)
        .await
        .unwrap();
    assert_eq!(taken.owner, "next-run");

    // The crashed run comes back: it can neither renew, write status nor release.
    let stale = Status {
        phase: Phase::Ready,
        ..Status::default()
    };
    assert!(matches!(
        registry
            .renew_lease("app", "crashed-run", Duration::from_secs(60), t0 + 62_000)
            .await,
        Err(RegistryError::LeaseNotHeld { .. })
    ));
    match registry.write_status("app", "crashed-run", &stale).await {
        Err(RegistryError::LeaseNotHeld { holder, .. }) => {
            assert_eq!(holder.as_deref(), Some("next-run"))
        }
        other => panic!("a stale run must not write status: {other:?}"),
    }
    assert!(matches!(
        registry.release_lease("app", "crashed-run").await,
        Err(RegistryError::LeaseNotHeld { .. })
    ));
    assert_eq!(
        registry.get("app").await.unwrap().unwrap().status.phase,
        Phase::Pending
    );

    // The owner renews, writes and releases; a second release is harmless.
    registry
        .renew_lease("app", "next-run", Duration::from_secs(60), t0 + 62_000)
        .await
        .unwrap();
    let next_at = Timestamp(t0 + 600_000);
    let mut ready = Status {
        phase: Phase::Ready,
        message: Some("x".repeat(10_000)),
        ..Status::default()
    };
    ready.run.observed_spec_version = 1;
    ready.applied.last_applied_revision = Some("0123456789abcdef0123456789abcdef01234567".into());
    ready.times.next_reconcile_at = Some(next_at);
    registry
        .write_status("app", "next-run", &ready)
        .await
        .unwrap();
    registry.release_lease("app", "next-run").await.unwrap();
    registry.release_lease("app", "next-run").await.unwrap();

    let entry = registry.get("app").await.unwrap().unwrap();
    assert!(entry.lease.is_none());
    assert_eq!(entry.status.phase, Phase::Ready);
    assert_eq!(entry.status.times.next_reconcile_at, Some(next_at));
    assert_eq!(
        entry.status.message.unwrap().chars().count(),
        stacksync::status::MAX_MESSAGE_CHARS
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn listing_pages_through_every_entry_once_and_large_applies_are_batched() {
    let registry = Emulator::shared().new_registry("pages").await;
    let mut yaml = String::from("stacks:\n");
    for i in 0..130 {
        yaml.push_str(&format!(
            "  - {{name: s{i:03}, source: {{git: 'https://h/r.git', path: t.yaml}}}}\n"
        ));
    }
    let plan = plan_apply(&specs(&yaml), &[], false).unwrap();
    assert_eq!(
        plan.writes().count(),
        130,
        "more than one transaction's worth"
    );
    registry.apply(&plan, now_millis()).await.unwrap();

    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = registry.list_page(cursor.as_deref(), 25).await.unwrap();
        seen.extend(page.entries.into_iter().map(|e| e.name));
        pages += 1;
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 130);
    assert!(pages >= 6, "{pages} pages");

    // Prune everything but one.
    let current = registry.list().await.unwrap();
    let plan = plan_apply(
        &specs(
            &one("s000", "t.yaml").replace("https://github.com/acme/infra.git", "https://h/r.git"),
        ),
        &current,
        true,
    )
    .unwrap();
    assert_eq!(
        plan.changes
            .iter()
            .filter(|c| matches!(c.action, Action::Prune { .. }))
            .count(),
        129
    );
    registry.apply(&plan, now_millis()).await.unwrap();
    let left: Vec<_> = registry
        .list()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.deletion_requested_at.is_none())
        .collect();
    assert_eq!(left.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_table_is_named_and_creating_the_table_twice_is_fine() {
    let emulator = Emulator::shared();
    let missing = Registry::new(emulator.dynamodb(), "no-such-table");
    let err = missing.get("x").await.unwrap_err();
    assert!(matches!(err, RegistryError::TableMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("stacksync init"));

    let registry = emulator.new_registry("twice").await;
    assert!(!registry.create_table().await.unwrap(), "already there");
}

#[tokio::test(flavor = "multi_thread")]
async fn removing_an_entry_needs_a_deletion_request_and_the_lease() {
    let registry = Emulator::shared().new_registry("remove").await;
    apply(&registry, &one("app", "a.yaml"), false)
        .await
        .unwrap();
    registry
        .acquire_lease("app", "run", Duration::from_secs(60), now_millis())
        .await
        .unwrap();
    assert!(matches!(
        registry.remove("app", "run").await,
        Err(RegistryError::Conflict { .. })
    ));
    registry
        .request_deletion("app", now_millis())
        .await
        .unwrap();
    assert!(matches!(
        registry.remove("app", "other").await,
        Err(RegistryError::LeaseNotHeld { .. })
    ));
    registry.remove("app", "run").await.unwrap();
    assert!(registry.get("app").await.unwrap().is_none());
}

/// The contract the in-memory registry is held to (`registry::contract`),
/// here against DynamoDB: the fake the unit tests use behaves as the table.
#[tokio::test(flavor = "multi_thread")]
async fn the_dynamodb_registry_keeps_the_registry_contract() {
    let registry = Emulator::shared().new_registry("contract").await;
    stacksync::registry::contract::check(&registry, "dynamodb").await;
}

/// Entries registered before the source key kept a ref's kind are indexed
/// under `url#main` for `refs/heads/main`: `apply` of the same file
/// re-indexes them under the key of their very ref, and nothing else.
#[tokio::test(flavor = "multi_thread")]
async fn apply_re_indexes_an_entry_under_a_source_key_of_the_older_form_and_nothing_else() {
    let registry = Emulator::shared().new_registry("rekey").await;
    let url = "https://github.com/acme/infra.git";
    let yaml = format!(
        "stacks:\n  - name: app\n    source: {{git: '{url}', path: a.yaml, ref: refs/heads/main}}\n  \
         - name: other\n    source: {{git: '{url}', path: b.yaml, ref: main}}\n"
    );
    apply(&registry, &yaml, false).await.unwrap();
    let new_key = stacksync::source::source_key(url, Some("refs/heads/main"));
    let old_key = stacksync::source::source_key(url, Some("main"));
    assert_ne!(new_key, old_key);
    // What the code before the ref's kind was kept wrote.
    Emulator::shared()
        .dynamodb()
        .update_item()
        .table_name(registry.table())
        .key("pk", AttributeValue::S("stack#app".into()))
        .update_expression("SET sourceKey = :old")
        .expression_attribute_values(":old", AttributeValue::S(old_key.clone()))
        .send()
        .await
        .unwrap();
    let names = |followers: Vec<stacksync::registry::Follower>| {
        followers.into_iter().map(|f| f.name).collect::<Vec<_>>()
    };
    assert_eq!(
        names(registry.followers(&old_key).await.unwrap()),
        ["app", "other"]
    );
    let before = registry.get("app").await.unwrap().unwrap();

    let plan = plan_apply(&specs(&yaml), &registry.list().await.unwrap(), false).unwrap();
    let actions: Vec<&Action> = plan.changes.iter().map(|c| &c.action).collect();
    assert_eq!(
        actions,
        [
            &Action::Rekey {
                version: 1,
                from: old_key.clone(),
                to: new_key.clone()
            },
            &Action::Unchanged { version: 1 }
        ]
    );
    registry.apply(&plan, now_millis()).await.unwrap();

    assert_eq!(names(registry.followers(&new_key).await.unwrap()), ["app"]);
    assert_eq!(
        names(registry.followers(&old_key).await.unwrap()),
        ["other"]
    );
    let after = registry.get("app").await.unwrap().unwrap();
    assert_eq!(after.spec_version, before.spec_version);
    assert_eq!(after.updated_at, before.updated_at);
    assert_eq!(after.status.phase, before.status.phase);
    assert!(
        after.status.times.next_reconcile_at > before.status.times.next_reconcile_at,
        "due, so that the scheduler watches its source under the new key"
    );
    let again = plan_apply(&specs(&yaml), &registry.list().await.unwrap(), false).unwrap();
    assert_eq!(again.writes().count(), 0, "re-indexed once");
}
