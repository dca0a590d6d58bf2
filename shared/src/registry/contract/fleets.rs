//! The registry contract's fleets: their items, and their targets' entries.

use super::{NOW, URL};
use crate::manifest::parse_manifest;
use crate::registry::plan::Writer;
use crate::registry::targets::{Units, plan_with_fleets};
use crate::registry::{Entries, Fleet, Fleets, Specs, UnitsRead, apply_plan};
use crate::status::Timestamp;

const OU: &str = "ou-ab12-cd34ef56";
const HOUR: i64 = 3_600_000;

fn fleet_file(accounts: usize) -> Vec<crate::StackSpec> {
    let list: Vec<String> = (0..accounts)
        .map(|i| format!("'{:012}'", 100_000_000_000u64 + i as u64))
        .collect();
    let text = format!(
        "stacks:\n  - name: contract-fleet\n    source: {{git: '{URL}', path: f.yaml}}\n    \
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/deploy'\n    targets: {{accounts: [{}], \
         organizationalUnits: [{OU}], regions: [us-east-1, eu-west-1]}}\n",
        list.join(", ")
    );
    parse_manifest("fleet.yaml", &text).unwrap_or_else(|e| panic!("fleet manifest: {e:?}"))
}

pub(super) async fn fleets<R: Entries + Specs + Fleets>(r: &R, label: &str) {
    let spec = fleet_file(1).remove(0);
    let fleet = Fleet {
        spec: spec.clone(),
        owner: None,
        read: UnitsRead {
            at: Some(Timestamp(NOW)),
            units: Units::from([(OU.to_owned(), vec!["999988887777".to_owned()])]),
            error: None,
        },
        // What `rollout resume` let go on is read back as written.
        resumed: Some("abc123".to_owned()),
        version: 0,
    };
    let put = |f: Fleet, expected| async move {
        r.put_fleet(&f, expected).await.expect("a registry call")
    };
    assert!(put(fleet.clone(), None).await, "{label}: a new fleet");
    assert!(!put(fleet.clone(), None).await, "{label}: added twice");
    let read = r.fleet("contract-fleet").await.expect("a registry call");
    assert_eq!(
        read,
        Some(Fleet {
            version: 1,
            ..fleet.clone()
        }),
        "{label}"
    );
    assert!(
        !put(fleet.clone(), Some(7)).await,
        "{label}: a stale version"
    );
    assert!(
        r.due_fleets(NOW + HOUR - 1)
            .await
            .expect("a registry call")
            .is_empty(),
        "{label}: not due before its interval"
    );
    let due = r.due_fleets(NOW + HOUR).await.expect("a registry call");
    assert_eq!(due.len(), 1, "{label}: due after it");
    let mut listed = fleet.clone();
    listed
        .spec
        .targets
        .as_mut()
        .expect("present")
        .organizational_units
        .clear();
    listed.read = UnitsRead::default();
    assert!(put(listed, Some(1)).await, "{label}");
    assert!(
        r.due_fleets(i64::MAX - 1)
            .await
            .expect("a registry call")
            .is_empty(),
        "{label}: a fleet of listed accounts is never due"
    );
    assert_eq!(
        r.fleets().await.expect("a registry call").len(),
        1,
        "{label}"
    );
    assert!(
        !r.remove_fleet("contract-fleet", 1)
            .await
            .expect("a registry call"),
        "{label}"
    );
    assert!(
        r.remove_fleet("contract-fleet", 2)
            .await
            .expect("a registry call"),
        "{label}"
    );
    assert!(
        r.fleets().await.expect("a registry call").is_empty(),
        "{label}"
    );
    targets(r, label).await;
}

/// A fleet's targets are entries like any: written in batches, read back
/// with their target, pruned when their account leaves.
async fn targets<R: Entries + Specs>(r: &R, label: &str) {
    let units = Units::from([(OU.to_owned(), vec!["999988887777".to_owned()])]);
    let current = r.list().await.expect("a registry call");
    let plan = plan_with_fleets(&fleet_file(60), &units, &current, false, None, Writer::Cli)
        .unwrap_or_else(|e| panic!("{label}: {e:?}"));
    assert_eq!(plan.writes().count(), 122, "{label}");
    apply_plan(r, &plan, NOW, |_| {})
        .await
        .unwrap_or_else(|e| panic!("{label}: {e:?}"));
    let one = r
        .get("contract-fleet-999988887777-eu-west-1")
        .await
        .expect("present")
        .unwrap_or_else(|| panic!("{label}: a target's entry"));
    let target = one.spec.target_of.as_ref().expect("present");
    assert_eq!(
        (
            target.fleet.as_str(),
            target.account.as_str(),
            target.region.as_str()
        ),
        ("contract-fleet", "999988887777", "eu-west-1"),
        "{label}"
    );
    let current = r.list().await.expect("a registry call");
    let plan = plan_with_fleets(
        &fleet_file(60),
        &Units::new(),
        &current,
        false,
        None,
        Writer::Cli,
    )
    .expect("present");
    apply_plan(r, &plan, NOW + 1, |_| {})
        .await
        .expect("a registry call");
    let gone = r
        .get("contract-fleet-999988887777-eu-west-1")
        .await
        .expect("present")
        .expect("present");
    assert!(gone.deletion_requested_at.is_some(), "{label}: pruned");
    let all = r.list().await.expect("a registry call");
    let kept = all
        .iter()
        .filter(|e| e.spec.target_of.is_some() && e.deletion_requested_at.is_none())
        .count();
    assert_eq!(kept, 120, "{label}");
}

/// Changes approved for a fleet: by fleet, revision (in any case) and rows.
pub(super) async fn approved_rows<R: super::super::FleetApprovals>(r: &R, label: &str) {
    let rows = "ab".repeat(32);
    let read = |fleet: &'static str, revision: &'static str, rows: String| async move {
        r.rows_approved(fleet, revision, &rows)
            .await
            .expect("a registry call")
    };
    assert_eq!(
        read("contract-fleet", "ABC123", rows.clone()).await,
        None,
        "{label}"
    );
    r.approve_rows(
        "contract-fleet",
        "ABC123",
        &rows,
        "arn:aws:iam::1:user/ana",
        NOW,
    )
    .await
    .expect("a registry call");
    // A second approval of the same rows keeps the first approver.
    r.approve_rows(
        "contract-fleet",
        "abc123",
        &rows,
        "arn:aws:iam::1:user/bo",
        NOW + 1,
    )
    .await
    .expect("a registry call");
    assert_eq!(
        read("contract-fleet", "abc123", rows.clone())
            .await
            .as_deref(),
        Some("arn:aws:iam::1:user/ana"),
        "{label}"
    );
    assert_eq!(
        read("contract-fleet", "abc124", rows.clone()).await,
        None,
        "{label}"
    );
    assert_eq!(
        read("other-fleet", "abc123", rows.clone()).await,
        None,
        "{label}"
    );
    assert_eq!(
        read("contract-fleet", "abc123", "cd".repeat(32)).await,
        None,
        "{label}"
    );
}
