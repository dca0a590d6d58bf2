use std::collections::BTreeMap;

use super::*;
use crate::spec::fixtures::spec;
use crate::spec::{Override, ParameterValue};
use crate::validate::validate_spec;

const A: &str = "111122223333";
const B: &str = "444455556666";
const C: &str = "777788889999";
const OU: &str = "ou-ab12-cd34ef56";

fn fleet() -> StackSpec {
    let mut fleet = spec("baseline");
    fleet.assume_role_arn = Some("arn:aws:iam::{account}:role/stacksync-deploy".into());
    fleet.role_arn = Some("arn:aws:iam::{account}:role/cfn-service".into());
    fleet
        .parameters
        .insert("Size".into(), ParameterValue::Text("large".into()));
    fleet.targets = Some(Targets {
        accounts: vec![A.into()],
        organizational_units: vec![OU.into()],
        regions: vec!["us-east-1".into(), "eu-west-1".into()],
        ..Targets::default()
    });
    fleet
}

fn units() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([(
        OU.to_owned(),
        vec![C.to_owned(), B.to_owned(), A.to_owned()],
    )])
}

fn names(specs: &[StackSpec]) -> Vec<&str> {
    specs.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn a_fleet_is_its_accounts_times_its_regions_each_account_once() {
    let specs = expand(&fleet(), &units()).unwrap();
    assert_eq!(
        names(&specs),
        [
            "baseline-111122223333-us-east-1",
            "baseline-111122223333-eu-west-1",
            "baseline-444455556666-us-east-1",
            "baseline-444455556666-eu-west-1",
            "baseline-777788889999-us-east-1",
            "baseline-777788889999-eu-west-1",
        ]
    );
    // A unit not read yet adds no account.
    assert_eq!(expand(&fleet(), &BTreeMap::new()).unwrap().len(), 2);
}

#[test]
fn each_target_drives_the_fleets_stack_in_its_account_and_region() {
    let specs = expand(&fleet(), &units()).unwrap();
    let one = &specs[3];
    assert_eq!(one.effective_stack_name(), "baseline");
    assert_eq!(one.region.as_deref(), Some("eu-west-1"));
    assert_eq!(
        one.assume_role_arn.as_deref(),
        Some("arn:aws:iam::444455556666:role/stacksync-deploy")
    );
    assert_eq!(
        one.role_arn.as_deref(),
        Some("arn:aws:iam::444455556666:role/cfn-service")
    );
    assert_eq!(
        one.stack_key(None),
        (Some(B), Some("eu-west-1"), "baseline")
    );
    assert_eq!(
        one.target_of,
        Some(TargetOf {
            fleet: "baseline".into(),
            account: B.into(),
            region: "eu-west-1".into()
        })
    );
    assert!(one.targets.is_none());
    // A stack name given to the fleet is every target's.
    let mut named = fleet();
    named.stack_name = Some("org-baseline".into());
    assert_eq!(
        expand(&named, &units()).unwrap()[0].effective_stack_name(),
        "org-baseline"
    );
}

#[test]
fn exclusions_take_an_account_or_one_target_and_overrides_go_target_over_account() {
    let mut fleet = fleet();
    let targets = fleet.targets.as_mut().unwrap();
    targets.exclude = vec![C.into(), format!("{B}/us-east-1")];
    let size = |v: &str| Override {
        parameters: BTreeMap::from([("Size".into(), ParameterValue::Text(v.into()))]),
    };
    targets.overrides = BTreeMap::from([
        (A.to_owned(), size("medium")),
        (format!("{A}/eu-west-1"), size("small")),
    ]);
    let specs = expand(&fleet, &units()).unwrap();
    assert_eq!(
        names(&specs),
        [
            "baseline-111122223333-us-east-1",
            "baseline-111122223333-eu-west-1",
            "baseline-444455556666-eu-west-1",
        ]
    );
    let size_of = |s: &StackSpec| s.parameters["Size"].clone();
    assert_eq!(size_of(&specs[0]), ParameterValue::Text("medium".into()));
    assert_eq!(size_of(&specs[1]), ParameterValue::Text("small".into()));
    assert_eq!(size_of(&specs[2]), ParameterValue::Text("large".into()));
}

#[test]
fn too_many_targets_and_an_entry_without_targets_are_refused() {
    let many: Vec<String> = (0..1001).map(|i| format!("{:012}", i)).collect();
    let mut big = fleet();
    big.targets.as_mut().unwrap().accounts = many;
    assert_eq!(
        expand(&big, &BTreeMap::new()).unwrap_err(),
        ExpandError::TooMany {
            fleet: "baseline".into(),
            count: 2002
        }
    );
    assert_eq!(
        expand(&spec("plain"), &BTreeMap::new()).unwrap_err(),
        ExpandError::NotAFleet("plain".into())
    );
}

#[test]
fn only_a_fleet_with_units_is_read_again() {
    assert_eq!(reread_every(&fleet()), Some(DEFAULT_TARGETS_INTERVAL));
    let mut listed = fleet();
    listed
        .targets
        .as_mut()
        .unwrap()
        .organizational_units
        .clear();
    assert_eq!(reread_every(&listed), None);
    assert_eq!(reread_every(&spec("plain")), None);
}

#[test]
fn ids_and_targets_are_read_by_their_shapes() {
    assert!(is_unit(OU) && is_unit("r-ab12") && is_unit("ou-ab12-12345678"));
    assert!(!is_unit("ou-ab12") && !is_unit("ou-AB12-cd34ef56") && !is_unit("r-a"));
    assert_eq!(
        parse_target("111122223333/eu-west-1"),
        Ok((A.to_owned(), "eu-west-1".to_owned()))
    );
    assert!(parse_target("1111/eu-west-1").is_err());
    assert!(parse_target("111122223333").is_err());
    assert_eq!(target_name("b", A, "us-east-1"), "b-111122223333-us-east-1");
}

fn fields(spec: &StackSpec) -> Vec<String> {
    validate_spec(spec).into_iter().map(|e| e.field).collect()
}

#[test]
fn a_fleet_is_checked_as_a_whole() {
    assert_eq!(fields(&fleet()), Vec::<String>::new());
    // Every target's spec passes the same rules but the marker, its
    // fleet's rollout carried.
    let mut rolled = fleet();
    rolled.rollout = Some(serde_yaml_ng::from_str("{maxConcurrent: 1}").unwrap());
    for target in expand(&rolled, &units()).unwrap() {
        assert_eq!(fields(&target), ["targetOf"]);
        assert_eq!(target.rollout, rolled.rollout);
    }
    let mut bad = fleet();
    bad.region = Some("us-east-1".into());
    bad.assume_role_arn = Some("arn:aws:iam::111122223333:role/one".into());
    bad.targets_interval = Some(Duration::from_secs(60));
    let targets = bad.targets.as_mut().unwrap();
    targets.accounts = vec!["12".into()];
    targets.organizational_units = vec!["ou-x".into()];
    targets.regions = vec!["us-east-1".into(), "mars-1".into(), "us-east-1".into()];
    targets.exclude = vec!["nope".into()];
    targets.overrides = BTreeMap::from([("1111/x".to_owned(), Override::default())]);
    assert_eq!(
        fields(&bad),
        [
            "region",
            "assumeRoleArn",
            "targets.accounts[0]",
            "targets.organizationalUnits[0]",
            "targets.regions[1]",
            "targets.regions[2]",
            "targets.exclude[0]",
            "targets.overrides.1111/x",
            "targetsInterval",
        ]
    );
    let mut empty = fleet();
    let targets = empty.targets.as_mut().unwrap();
    targets.accounts.clear();
    targets.organizational_units.clear();
    targets.regions.clear();
    assert_eq!(fields(&empty), ["targets", "targets.regions"]);
    let mut plain = spec("plain");
    plain.targets_interval = Some(DEFAULT_TARGETS_INTERVAL);
    assert_eq!(fields(&plain), ["targetsInterval"]);
    let mut long = fleet();
    long.name = format!("a{}", "b".repeat(MAX_FLEET_NAME_LEN));
    assert_eq!(fields(&long), ["name"]);
}

#[test]
fn a_fleet_reads_from_yaml_as_the_issue_writes_it() {
    let yaml = r#"
name: baseline
source: { git: "https://example.org/infra.git", ref: main, path: baseline.yaml }
assumeRoleArn: "arn:aws:iam::{account}:role/stacksync-deploy"
targets:
  accounts: ["111122223333", "444455556666"]
  organizationalUnits: ["ou-abcd-12345678"]
  regions: [us-east-1, eu-west-1]
  overrides: { "111122223333/eu-west-1": { parameters: { Size: small } } }
targetsInterval: 30m
"#;
    let spec: StackSpec = serde_yaml_ng::from_str(yaml).unwrap();
    assert_eq!(fields(&spec), Vec::<String>::new());
    assert_eq!(spec.targets_interval, Some(Duration::from_mins(30)));
    assert_eq!(expand(&spec, &BTreeMap::new()).unwrap().len(), 4);
    // Round trip through the stored form.
    let json = serde_json::to_string(&spec).unwrap();
    assert_eq!(serde_json::from_str::<StackSpec>(&json).unwrap(), spec);
}

#[test]
fn a_rollout_is_checked_against_its_fleet() {
    let with = |rollout: &str| {
        let yaml = format!(
            "name: baseline\nsource: {{ git: 'https://example.org/i.git', path: b.yaml }}\n\
             assumeRoleArn: 'arn:aws:iam::{{account}}:role/deploy'\n\
             targets: {{ accounts: ['111122223333'], organizationalUnits: [ou-abcd-12345678], regions: [us-east-1] }}\n{rollout}"
        );
        let spec: StackSpec = serde_yaml_ng::from_str(&yaml).unwrap_or_else(|e| panic!("{e}"));
        fields(&spec)
    };
    assert_eq!(
        with(
            "rollout: { maxConcurrent: 2, order: [us-east-1, ou-abcd-12345678], pauseBetweenWaves: 10m }\n"
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        with(
            "rollout: { maxConcurrent: 0, order: [eu-west-1, us-east-1, us-east-1], pauseBetweenWaves: 8d }\n"
        ),
        [
            "rollout.maxConcurrent",
            "rollout.order[0]",
            "rollout.order[2]",
            "rollout.pauseBetweenWaves"
        ]
    );
    assert_eq!(
        with("rollout: { maxConcurrent: '10%' }\napproval: always\n"),
        Vec::<String>::new(),
        "approved once for the fleet"
    );
    let single: StackSpec = serde_yaml_ng::from_str(
        "name: one\nsource: { git: 'https://example.org/i.git', path: b.yaml }\n\
         rollout: { maxConcurrent: 2 }\n",
    )
    .expect("read");
    assert_eq!(fields(&single), ["rollout"]);
}
