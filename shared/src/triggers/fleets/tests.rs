use super::*;
use crate::fakes::MemoryOrganizations;
use crate::manifest::parse_manifest;
use crate::registry::memory::MemoryRegistry;
use crate::registry::{Entries, FleetRecords as _, Schedule};

const NOW: EpochMillis = 1_800_000_000_000;
const HOUR: EpochMillis = 3_600_000;
const OU: &str = "ou-ab12-cd34ef56";
const A: &str = "111122223333";
const B: &str = "444455556666";

fn file() -> Vec<StackSpec> {
    let text = format!(
        r#"stacks:
  - name: baseline
    source: {{ git: "https://example.org/infra.git", path: baseline.yaml }}
    assumeRoleArn: "arn:aws:iam::{{account}}:role/stacksync-deploy"
    destroyOnDelete: true
    targets:
      organizationalUnits: ["{OU}"]
      regions: [us-east-1, eu-west-1]
"#
    );
    parse_manifest("stacks.yaml", &text).unwrap_or_else(|e| panic!("{e:?}"))
}

/// The file applied as `stacksync apply` does, with `A` in the unit.
async fn applied() -> (MemoryRegistry, MemoryOrganizations) {
    let registry = MemoryRegistry::new();
    let org = MemoryOrganizations::default();
    org.put_unit("r-ab12", OU);
    org.put_account(OU, A);
    let desired = file();
    let fleets: Vec<&StackSpec> = desired.iter().collect();
    let units = read_units(Some(&org), &fleets).await.unwrap();
    let plan = plan_with_fleets(&desired, &units, &[], false, None, Writer::Cli).unwrap();
    apply_plan(&registry, &plan, NOW, |_| {}).await.unwrap();
    record_fleets(&registry, &desired, &units, false, NOW)
        .await
        .unwrap();
    (registry, org)
}

async fn names(registry: &MemoryRegistry) -> Vec<String> {
    let mut names: Vec<String> = registry
        .list()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.deletion_requested_at.is_none())
        .map(|e| e.name)
        .collect();
    names.sort();
    names
}

async fn fleet(registry: &MemoryRegistry) -> Fleet {
    registry.fleet("baseline").await.unwrap().unwrap()
}

#[tokio::test]
async fn a_fleet_is_recorded_and_due_again_after_its_interval() {
    let (registry, _) = applied().await;
    assert_eq!(
        names(&registry).await,
        [
            "baseline-111122223333-eu-west-1",
            "baseline-111122223333-us-east-1"
        ]
    );
    let recorded = fleet(&registry).await;
    assert_eq!(recorded.read.units[OU], [A]);
    assert_eq!(recorded.version, 1);
    assert!(
        registry
            .due_fleets(NOW + HOUR - 1)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(registry.due_fleets(NOW + HOUR).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_new_account_gets_its_targets_at_the_next_read_due_at_once() {
    let (registry, org) = applied().await;
    org.put_account(OU, B);
    let at = NOW + HOUR;
    let outcome = reread(&registry, Some(&org), &fleet(&registry).await, None, at)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Reread::Applied {
            created: vec![
                "baseline-444455556666-eu-west-1".into(),
                "baseline-444455556666-us-east-1".into()
            ],
            pruned: vec![],
        }
    );
    let due = registry.due(at, 100).await.unwrap().entries;
    assert!(
        due.iter()
            .any(|e| e.name == "baseline-444455556666-us-east-1")
    );
    let recorded = fleet(&registry).await;
    assert_eq!(
        (recorded.version, recorded.read.at),
        (2, Some(Timestamp(at)))
    );
    assert_eq!(recorded.read.units[OU], [A, B]);
}

#[tokio::test]
async fn an_account_that_left_has_its_targets_pruned_by_destroy_on_delete() {
    let (registry, org) = applied().await;
    org.put_account(OU, B);
    reread(
        &registry,
        Some(&org),
        &fleet(&registry).await,
        None,
        NOW + HOUR,
    )
    .await
    .unwrap();
    org.put_unit("r-ab12", "ou-ab12-elsewhere");
    org.put_account("ou-ab12-elsewhere", A);
    let outcome = reread(
        &registry,
        Some(&org),
        &fleet(&registry).await,
        None,
        NOW + 2 * HOUR,
    )
    .await
    .unwrap();
    let Reread::Applied { created, pruned } = outcome else {
        panic!("{outcome:?}")
    };
    // Two of four: within the guard (every one of them would be held).
    assert_eq!((created.len(), pruned.len()), (0, 2));
    let gone = registry
        .get("baseline-111122223333-us-east-1")
        .await
        .unwrap()
        .unwrap();
    assert!(gone.deletion_requested_at.is_some() && gone.spec.destroy_on_delete);
}

#[tokio::test]
async fn a_read_that_fails_or_would_take_every_target_changes_nothing() {
    let (registry, org) = applied().await;
    let before = names(&registry).await;
    // The unit is gone from the organization: not found.
    let other = MemoryOrganizations::default();
    let outcome = reread(
        &registry,
        Some(&other),
        &fleet(&registry).await,
        None,
        NOW + HOUR,
    )
    .await
    .unwrap();
    let Reread::Kept { why } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        why.contains("targets.organizationalUnits[0]: ou-ab12-cd34ef56 cannot be read"),
        "{why}"
    );
    assert_eq!(names(&registry).await, before);
    let recorded = fleet(&registry).await;
    assert_eq!(recorded.read.error.as_deref(), Some(why.as_str()));
    assert_eq!(recorded.read.units[OU], [A], "the last good read is kept");
    // The unit emptied: every target would go, and the guard holds it.
    org.put_unit("r-ab12", "ou-ab12-elsewhere");
    org.put_account("ou-ab12-elsewhere", A);
    let outcome = reread(
        &registry,
        Some(&org),
        &fleet(&registry).await,
        None,
        NOW + 2 * HOUR,
    )
    .await
    .unwrap();
    let Reread::Kept { why } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        why.starts_with(
            "held: fleet baseline: its organizational units no longer hold the accounts of 2 of its 2 targets"
        ),
        "{why}"
    );
    assert_eq!(names(&registry).await, before);
    // No reader at all: said, nothing changed.
    let outcome = reread(
        &registry,
        None,
        &fleet(&registry).await,
        None,
        NOW + 3 * HOUR,
    )
    .await
    .unwrap();
    assert!(matches!(outcome, Reread::Kept { why } if why.contains("no AWS Organizations reader")));
}

#[tokio::test]
async fn a_fleet_written_meanwhile_is_not_overwritten() {
    let (registry, org) = applied().await;
    let stale = fleet(&registry).await;
    // Another apply wrote the fleet after this read.
    record_fleets(&registry, &file(), &Units::new(), false, NOW + 1)
        .await
        .unwrap();
    org.put_account(OU, B);
    let error = reread(&registry, Some(&org), &stale, None, NOW + HOUR)
        .await
        .unwrap_err();
    assert!(error.contains("written meanwhile"), "{error}");
}

#[tokio::test]
async fn a_pruning_apply_forgets_the_fleets_no_longer_in_the_file() {
    let (registry, _) = applied().await;
    record_fleets(&registry, &[], &Units::new(), false, NOW)
        .await
        .unwrap();
    assert!(registry.fleet("baseline").await.unwrap().is_some());
    record_fleets(&registry, &[], &Units::new(), true, NOW)
        .await
        .unwrap();
    assert!(registry.fleet("baseline").await.unwrap().is_none());
}
