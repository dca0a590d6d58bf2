//! The registry's contract: one body of operations and expectations, run
//! against the in-memory registry (a unit test) and against the DynamoDB
//! registry on the emulator (`tests/tests/registry.rs`). The fake is only
//! worth its speed while both keep it.

use std::time::Duration;

use super::plan::{Plan, plan_apply};
use super::{Deliveries, DriftRecords, Entries, Leases, RegistryError, Schedule, Specs};
use crate::manifest::parse_manifest;
use crate::seen::Seen;
use crate::source::source_key;
use crate::status::{Phase, Status, Timestamp};

mod bulk;
mod claims;
mod drift;
mod fleets;
mod owned;
mod reviews;
mod slots;
mod sources;

use bulk::{large_apply, prunes_last};
pub use claims::HOME;
use sources::{ended_holds, sources};

const NOW: i64 = 1_800_000_000_000;
const TTL: Duration = Duration::from_secs(60);
const URL: &str = "https://git.example/contract.git";
const SECRET: &str = "arn:aws:secretsmanager:us-east-1:111122223333:secret:git-AbCdEf";

fn plan(current: &[super::StackEntry], names: &[&str], prune: bool) -> Plan {
    let entries: String = names
        .iter()
        .map(|n| format!("  - name: {n}\n    source: {{git: '{URL}', path: {n}.yaml}}\n"))
        .collect();
    let specs = parse_manifest("contract.yaml", &format!("stacks:\n{entries}"))
        .unwrap_or_else(|e| panic!("contract manifest: {e:?}"));
    plan_apply(&specs, current, prune).unwrap_or_else(|e| panic!("contract plan: {e:?}"))
}

/// Runs the whole contract; panics (naming `label` and the step) on the
/// first difference. The registry takes [`HOME`] as the region of specs
/// that name none.
pub async fn check<R>(registry: &R, label: &str)
where
    R: Entries
        + Specs
        + Leases
        + Schedule
        + Deliveries
        + DriftRecords
        + super::RegistrySources
        + super::Reviews
        + super::Fleets
        + super::FleetApprovals
        + super::Slots,
{
    specs(registry, label).await;
    leases(registry, label).await;
    statuses(registry, label).await;
    drift::drift_records(registry, label).await;
    deletion(registry, label).await;
    schedule(registry, label).await;
    sources(registry, label).await;
    deliveries(registry, label).await;
    ended_holds(registry, label).await;
    large_apply(registry, label).await;
    prunes_last(registry, label).await;
    claims::claims(registry, label).await;
    owned::registry_sources(registry, label).await;
    reviews::reviews(registry, label).await;
    fleets::fleets(registry, label).await;
    fleets::approved_rows(registry, label).await;
    slots::slots(registry, label).await;
}

async fn specs<R: Entries + Specs>(r: &R, label: &str) {
    r.apply(&plan(&[], &["alpha", "beta"], false), NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: apply: {e}"));
    let all = r
        .list()
        .await
        .unwrap_or_else(|e| panic!("{label}: list: {e}"));
    let names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["alpha", "beta"], "{label}: list, by name");
    let alpha = &all[0];
    assert_eq!(
        (alpha.spec_version, alpha.status.phase),
        (1, Phase::Pending),
        "{label}"
    );
    assert_eq!(
        alpha.status.times.next_reconcile_at,
        Some(Timestamp(NOW)),
        "{label}: new entries are due"
    );
    assert_eq!(alpha.spec_hash, alpha.spec.content_hash(), "{label}");

    // A plan made before another apply loses, as a whole.
    let stale = plan(&[], &["alpha", "gamma"], false);
    match r.apply(&stale, NOW).await {
        Err(RegistryError::Conflict { name, .. }) => assert_eq!(name, "alpha", "{label}"),
        other => panic!("{label}: a stale create: {other:?}"),
    }
    assert!(
        r.get("gamma").await.unwrap_or_default().is_none(),
        "{label}: all or nothing"
    );

    // An update moves the version by one, once.
    let mut changed = alpha.clone();
    changed.spec.source.path = "moved.yaml".into();
    let update = plan_apply(&[changed.spec.clone()], &all[..1], false)
        .unwrap_or_else(|e| panic!("{label}: {e:?}"));
    r.apply(&update, NOW + 1)
        .await
        .unwrap_or_else(|e| panic!("{label}: update: {e}"));
    let alpha = r
        .get("alpha")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}: alpha"));
    assert_eq!(
        (alpha.spec_version, alpha.spec.source.path.as_str()),
        (2, "moved.yaml"),
        "{label}"
    );
    assert!(
        matches!(
            r.apply(&update, NOW + 2).await,
            Err(RegistryError::Conflict { .. })
        ),
        "{label}: an update from a stale version"
    );
    lookups(r, label).await;
}

/// Entries found by source (as followers), by stack name, and by name.
async fn lookups<R: Entries>(r: &R, label: &str) {
    let key = source_key(URL, Some("main"));
    let followers = r.followers(&key).await.unwrap_or_default();
    assert_eq!(
        followers
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        ["alpha", "beta"],
        "{label}: by source {key}"
    );
    let named = r.by_stack_name("beta").await.unwrap_or_default();
    assert_eq!(
        named.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["beta"],
        "{label}"
    );
    assert!(
        r.get("nobody")
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"))
            .is_none(),
        "{label}"
    );
}

async fn leases<R: Entries + Leases>(r: &R, label: &str) {
    let lease = r
        .acquire_lease("alpha", "run-1", TTL, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(lease.expires_at, Timestamp(NOW + 60_000), "{label}");
    match r.acquire_lease("alpha", "run-2", TTL, NOW + 1).await {
        Err(RegistryError::LeaseHeld { owner, .. }) => assert_eq!(owner, "run-1", "{label}"),
        other => panic!("{label}: a held lease: {other:?}"),
    }
    assert!(
        r.acquire_lease("alpha", "run-1", TTL, NOW + 1)
            .await
            .is_ok(),
        "{label}: the holder again"
    );
    assert!(
        matches!(
            r.acquire_lease("nobody", "run-1", TTL, NOW).await,
            Err(RegistryError::NotFound { .. })
        ),
        "{label}"
    );
    assert!(
        matches!(
            r.renew_lease("alpha", "run-2", TTL, NOW).await,
            Err(RegistryError::LeaseNotHeld { .. })
        ),
        "{label}"
    );
    let renewed = r
        .renew_lease("alpha", "run-1", TTL, NOW + 10)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(renewed.expires_at, Timestamp(NOW + 60_010), "{label}");
    // Its holder parks until the stack's event; nobody else may.
    let parked = super::Parked {
        execution: "run-1".into(),
        since: Timestamp(NOW + 10),
        on: "execution".into(),
        stack_id: Some("arn:aws:cloudformation:us-east-1:1:stack/alpha/1".into()),
    };
    let stranger = super::Parked {
        execution: "run-2".into(),
        ..parked.clone()
    };
    assert!(
        matches!(
            r.park("alpha", &stranger, TTL, NOW + 10).await,
            Err(RegistryError::LeaseNotHeld { .. })
        ),
        "{label}"
    );
    r.park("alpha", &parked, TTL, NOW + 10)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    r.renew_lease("alpha", "run-1", TTL, NOW + 10)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let lease = r.get("alpha").await.ok().flatten().and_then(|e| e.lease);
    assert_eq!(
        lease.as_ref().and_then(|l| l.parked_run()),
        Some(&parked),
        "{label}: parked, and still after a renewal"
    );
    // Once run out, another run may take it.
    let taken = r.acquire_lease("alpha", "run-2", TTL, NOW + 60_010).await;
    assert!(taken.is_ok(), "{label}: an expired lease: {taken:?}");
    let held = r.get("alpha").await.ok().flatten().and_then(|e| e.lease);
    assert_eq!(
        held.as_ref().and_then(|l| l.taken_at),
        Some(Timestamp(NOW + 60_010)),
        "{label}: since when the new owner holds it"
    );
    assert_eq!(
        held.and_then(|l| l.parked),
        None,
        "{label}: the last owner's park went with its lease"
    );
    assert!(
        matches!(
            r.release_lease("alpha", "run-1").await,
            Err(RegistryError::LeaseNotHeld { .. })
        ),
        "{label}"
    );
    r.release_lease("alpha", "run-2")
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    r.release_lease("alpha", "run-2")
        .await
        .unwrap_or_else(|e| panic!("{label}: released twice: {e}"));
    r.release_lease("nobody", "run-2")
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let alpha = r
        .get("alpha")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert!(alpha.lease.is_none(), "{label}");
}

async fn statuses<R: Entries + Leases + Schedule>(r: &R, label: &str) {
    let running = Status {
        phase: Phase::Reconciling,
        message: Some("x".repeat(5000)),
        ..Status::default()
    };
    assert!(
        matches!(
            r.write_status("beta", "run-1", &running).await,
            Err(RegistryError::LeaseNotHeld { .. })
        ),
        "{label}: without the lease"
    );
    r.acquire_lease("beta", "run-1", TTL, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    r.write_status("beta", "run-1", &running)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let beta = r
        .get("beta")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert_eq!(beta.status.phase, Phase::Reconciling, "{label}");
    assert!(
        beta.status
            .message
            .as_ref()
            .is_some_and(|m| m.chars().count() < 5000),
        "{label}: bounded"
    );
    assert_eq!(
        beta.status.times.next_reconcile_at,
        Some(Timestamp(NOW)),
        "{label}: no due time keeps the queue position"
    );
    assert!(beta.lease.is_some(), "{label}");
    let mut done = Status {
        phase: Phase::Ready,
        ..Status::default()
    };
    done.times.next_reconcile_at = Some(Timestamp(NOW + 600_000));
    r.write_status_and_release("beta", "run-1", &done)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let beta = r
        .get("beta")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert_eq!(
        (beta.status.phase, beta.status.times.next_reconcile_at),
        (Phase::Ready, Some(Timestamp(NOW + 600_000))),
        "{label}"
    );
    assert!(beta.lease.is_none(), "{label}: released");
    // The same write again (a retry after its answer was lost): it was made.
    r.write_status_and_release("beta", "run-1", &done)
        .await
        .unwrap_or_else(|e| panic!("{label}: a final status written twice: {e}"));
    let other = Status {
        phase: Phase::Failed,
        ..done.clone()
    };
    assert!(
        matches!(
            r.write_status_and_release("beta", "run-1", &other).await,
            Err(RegistryError::LeaseNotHeld { .. })
        ),
        "{label}: another status, without the lease"
    );
    seen_and_out_of_the_queue(r, label).await;
}

/// A run that ends fine leaves the queue, and what it saw is read back,
/// whole from the entry and narrow from the health check's index.
async fn seen_and_out_of_the_queue<R: Entries + Leases + Schedule>(r: &R, label: &str) {
    let seen = Seen {
        region: Some("eu-west-1".into()),
        assume_role_arn: Some("arn:aws:iam::210987654321:role/deployer".into()),
        stack_id: "arn:aws:cloudformation:eu-west-1:210987654321:stack/beta/1".into(),
        changed_at: Timestamp(NOW - 1_000),
        stack_status: "UPDATE_COMPLETE".into(),
        drift: Some("IN_SYNC".into()),
        deployed_hash: "d".repeat(64),
        interval_seconds: 600,
        drift_seconds: None,
    };
    r.acquire_lease("beta", "run-2", TTL, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let mut fine = Status {
        phase: Phase::Ready,
        ..Status::default()
    };
    fine.applied.seen = Some(seen.clone());
    r.write_status_and_release("beta", "run-2", &fine)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let beta = r
        .get("beta")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert_eq!(
        beta.status.times.next_reconcile_at, None,
        "{label}: out of the queue"
    );
    assert_eq!(beta.status.applied.seen.as_ref(), Some(&seen), "{label}");
    let watched = r.watched().await.unwrap_or_else(|e| panic!("{label}: {e}"));
    let beta = watched
        .iter()
        .find(|w| w.name == "beta")
        .unwrap_or_else(|| panic!("{label}: beta is watched: {watched:?}"));
    assert_eq!(
        (beta.phase, beta.seen.as_ref(), beta.stack_name.as_str()),
        (Some(Phase::Ready), Some(&seen), "beta"),
        "{label}"
    );
    assert!(
        !beta.suspended && !beta.deleting && beta.lease_expires_at.is_none(),
        "{label}"
    );
    assert_eq!(beta.next_reconcile_at, None, "{label}");
    assert!(
        watched.iter().all(|w| !w.name.starts_with("source")),
        "{label}: stacks only"
    );
}

async fn deletion<R: Entries + Specs + Leases>(r: &R, label: &str) {
    assert!(
        r.set_suspended("beta", true, NOW).await.unwrap_or_default(),
        "{label}: suspend"
    );
    assert!(
        !r.set_suspended("beta", true, NOW).await.unwrap_or(true),
        "{label}: suspended twice"
    );
    assert!(
        r.set_suspended("beta", false, NOW + 5)
            .await
            .unwrap_or_default(),
        "{label}: resume"
    );
    let beta = r
        .get("beta")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert_eq!(
        beta.status.times.next_reconcile_at,
        Some(Timestamp(NOW + 5)),
        "{label}: resumed entries are due"
    );
    r.acquire_lease("beta", "run-3", TTL, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert!(
        matches!(
            r.remove("beta", "run-3").await,
            Err(RegistryError::Conflict { .. })
        ),
        "{label}: not being deleted"
    );
    assert!(
        r.request_deletion("beta", NOW + 7)
            .await
            .unwrap_or_default(),
        "{label}"
    );
    assert!(
        !r.request_deletion("beta", NOW + 8).await.unwrap_or(true),
        "{label}: asked twice"
    );
    assert!(
        matches!(
            r.request_deletion("nobody", NOW).await,
            Err(RegistryError::NotFound { .. })
        ),
        "{label}"
    );
    assert!(
        matches!(
            r.set_suspended("beta", true, NOW).await,
            Err(RegistryError::BeingDeleted { .. })
        ),
        "{label}"
    );
    assert!(
        matches!(
            r.remove("beta", "run-4").await,
            Err(RegistryError::LeaseNotHeld { .. })
        ),
        "{label}"
    );
    r.remove("beta", "run-3")
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    r.remove("beta", "run-3")
        .await
        .unwrap_or_else(|e| panic!("{label}: removed twice (a retry after a lost answer): {e}"));
    assert!(
        r.get("beta").await.unwrap_or_default().is_none(),
        "{label}: removed"
    );
}

async fn schedule<R: Entries + Schedule>(r: &R, label: &str) {
    // alpha is due at NOW + 1 (its update).
    let due = r
        .due(NOW + 1, 10)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"))
        .entries;
    assert_eq!(
        due.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["alpha"],
        "{label}"
    );
    assert!(
        r.due(NOW, 10).await.unwrap_or_default().entries.is_empty(),
        "{label}: not due yet"
    );
    assert!(
        !r.move_due("alpha", NOW, Some(NOW + 100))
            .await
            .unwrap_or(true),
        "{label}: moved from where it is not"
    );
    assert!(
        r.move_due("alpha", NOW + 1, Some(NOW + 100))
            .await
            .unwrap_or_default(),
        "{label}"
    );
    assert!(
        r.move_due("alpha", NOW + 100, None)
            .await
            .unwrap_or_default(),
        "{label}: out of the queue"
    );
    assert!(
        r.due(NOW + 10_000_000, 10)
            .await
            .unwrap_or_default()
            .entries
            .iter()
            .all(|e| e.name != "alpha"),
        "{label}: alpha is in no queue"
    );
    assert!(
        r.mark_due("alpha", NOW + 50).await.unwrap_or_default(),
        "{label}: marked earlier"
    );
    assert!(
        !r.mark_due("alpha", NOW + 60).await.unwrap_or(true),
        "{label}: due already"
    );
    assert!(
        !r.mark_due("nobody", NOW).await.unwrap_or(true),
        "{label}: gone"
    );
    let alpha = r
        .get("alpha")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert_eq!(
        alpha.status.times.next_reconcile_at,
        Some(Timestamp(NOW + 50)),
        "{label}"
    );
}

async fn deliveries<R: Deliveries>(r: &R, label: &str) {
    assert!(
        r.record_delivery("d-1", NOW, 3600)
            .await
            .unwrap_or_default(),
        "{label}"
    );
    assert!(
        !r.record_delivery("d-1", NOW + 1, 3600)
            .await
            .unwrap_or(true),
        "{label}: a replay"
    );
    assert!(
        r.record_delivery("d-2", NOW, 3600)
            .await
            .unwrap_or_default(),
        "{label}"
    );
}
