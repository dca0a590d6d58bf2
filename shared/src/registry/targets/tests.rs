use super::*;
use crate::manifest::parse_manifest;
use crate::registry::plan::{Action, Writer};

const OU: &str = "ou-ab12-cd34ef56";

fn file(extra: &str) -> Vec<StackSpec> {
    let text = format!(
        r#"stacks:
  - name: baseline
    source: {{ git: "https://example.org/infra.git", path: baseline.yaml }}
    assumeRoleArn: "arn:aws:iam::{{account}}:role/stacksync-deploy"
    destroyOnDelete: true
    targets:
      accounts: ["111122223333"]
      organizationalUnits: ["{OU}"]
      regions: [us-east-1, eu-west-1]
  - name: plain
    source: {{ git: "https://example.org/infra.git", path: plain.yaml }}
{extra}"#
    );
    parse_manifest("stacks.yaml", &text).unwrap_or_else(|e| panic!("{e:?}"))
}

fn units(accounts: &[&str]) -> Units {
    Units::from([(
        OU.to_owned(),
        accounts.iter().map(|a| (*a).to_owned()).collect(),
    )])
}

fn registered(plan: &Plan) -> Vec<StackEntry> {
    plan.changes
        .iter()
        .filter_map(|c| {
            let spec = c.spec.as_ref()?;
            Some(StackEntry::registered(&c.name, spec, 0))
        })
        .collect()
}

fn actions(plan: &Plan) -> Vec<(String, String)> {
    plan.changes
        .iter()
        .map(|c| {
            let action = match &c.action {
                Action::Create => "create".to_owned(),
                Action::Unchanged { .. } => "unchanged".to_owned(),
                Action::Prune { destroys_stack, .. } => format!("prune destroys={destroys_stack}"),
                other => format!("{other:?}"),
            };
            (c.name.clone(), action)
        })
        .collect()
}

#[test]
fn a_fleet_plans_one_entry_per_target_beside_the_plain_entries() {
    let plan = plan_with_fleets(
        &file(""),
        &units(&["444455556666"]),
        &[],
        false,
        None,
        Writer::Cli,
    )
    .unwrap();
    assert_eq!(
        actions(&plan),
        [
            ("baseline-111122223333-eu-west-1", "create"),
            ("baseline-111122223333-us-east-1", "create"),
            ("baseline-444455556666-eu-west-1", "create"),
            ("baseline-444455556666-us-east-1", "create"),
            ("plain", "create"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
}

#[test]
fn an_account_that_left_its_unit_has_its_targets_pruned_without_prune_and_only_those() {
    let first = plan_with_fleets(
        &file(""),
        &units(&["444455556666", "777788889999"]),
        &[],
        false,
        None,
        Writer::Cli,
    )
    .unwrap();
    let mut current = registered(&first);
    // Another fleet's target and another owner's entry are not this plan's.
    let mut other = file("")[0].clone();
    other.name = "other".into();
    other.stack_name = Some("other".into());
    let others = expand(&other, &units(&["777788889999"])).unwrap();
    current.extend(others.iter().map(|s| StackEntry::registered(&s.name, s, 0)));
    let plan = plan_with_fleets(
        &file(""),
        &units(&["444455556666"]),
        &current,
        false,
        None,
        Writer::Cli,
    )
    .unwrap();
    let pruned: Vec<_> = actions(&plan)
        .into_iter()
        .filter(|(_, a)| a.starts_with("prune"))
        .collect();
    assert_eq!(
        pruned,
        [
            ("baseline-777788889999-eu-west-1", "prune destroys=true"),
            ("baseline-777788889999-us-east-1", "prune destroys=true"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    // With --prune, the same, and the entries not in the file too (the
    // other fleet's four).
    let with_prune = plan_with_fleets(
        &file(""),
        &units(&["444455556666"]),
        &current,
        true,
        None,
        Writer::Cli,
    )
    .unwrap();
    assert_eq!(
        actions(&with_prune)
            .iter()
            .filter(|(_, a)| a.starts_with("prune"))
            .count(),
        6
    );
}

#[test]
fn a_target_may_not_drive_a_stack_another_entry_drives() {
    let clash = r#"  - name: clash
    stackName: baseline
    region: eu-west-1
    assumeRoleArn: "arn:aws:iam::111122223333:role/stacksync-deploy"
    source: { git: "https://example.org/infra.git", path: plain.yaml }
"#;
    let conflicts =
        plan_with_fleets(&file(clash), &units(&[]), &[], false, None, Writer::Cli).unwrap_err();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(conflicts[0].name, "clash");
    assert!(
        conflicts[0]
            .message
            .contains("\"baseline-111122223333-eu-west-1\""),
        "{}",
        conflicts[0].message
    );
}

#[test]
fn a_planned_name_leads_back_to_the_entry_written() {
    let desired = file("");
    assert_eq!(written_as("plain", &desired), Some(1));
    assert_eq!(
        written_as("baseline-111122223333-us-east-1", &desired),
        Some(0)
    );
    assert_eq!(written_as("nothing", &desired), None);
}

#[test]
fn a_fleet_losing_every_target_or_many_needs_a_confirmation() {
    let first = plan_with_fleets(
        &file(""),
        &units(&["444455556666"]),
        &[],
        false,
        None,
        Writer::Cli,
    )
    .unwrap();
    let current = registered(&first);
    // The unit emptied and the listed account excluded: every target goes.
    let mut gone = file("");
    gone[0].targets.as_mut().unwrap().exclude = vec!["111122223333".into()];
    let plan = plan_with_fleets(&gone, &units(&[]), &current, false, None, Writer::Cli).unwrap();
    let why = departed_needs_confirmation(&plan, &current).unwrap();
    assert!(
        why.starts_with("fleet baseline: its organizational units no longer hold the accounts of 4 of its 4 targets")
            && why.contains("4 of them with destroyOnDelete"),
        "{why}"
    );
    // One account of two: within the guard.
    let plan =
        plan_with_fleets(&file(""), &units(&[]), &current, false, None, Writer::Cli).unwrap();
    assert_eq!(departed_needs_confirmation(&plan, &current), None);
}
