//! `template.yaml` against the code and the README: the registry's schema is
//! the one `shared/src/registry/schema.rs` defines, and every function's IAM
//! actions are the ones the README's table lists.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::Value;
use stacksync::reconcile::steps::StepName;
use stacksync::registry::schema::{INDEXES, TABLE_KEY, TTL_ATTRIBUTE};
use stacksync_testkit::repo_root;

fn template() -> Value {
    let text = std::fs::read_to_string(repo_root().join("template.yaml")).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

fn resources_of_type<'a>(t: &'a Value, kind: &str) -> Vec<(&'a str, &'a Value)> {
    t["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .map(|(k, r)| (k.as_str().unwrap(), r))
        .collect()
}

/// `!If [cond, then, else]` → `then` (the statement when the condition holds).
fn unwrap_if(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) if t.tag == "If" => &t.value.as_sequence().unwrap()[1],
        other => other,
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Sequence(items) => items.iter().flat_map(strings).collect(),
        _ => vec![],
    }
}

#[test]
fn the_registry_table_has_the_schema_the_code_uses() {
    let t = template();
    let (_, table) = resources_of_type(&t, "AWS::DynamoDB::Table")[0];
    let props = &table["Properties"];
    let key = &props["KeySchema"][0];
    assert_eq!(
        (key["AttributeName"].as_str(), key["KeyType"].as_str()),
        (Some(TABLE_KEY.name), Some("HASH"))
    );
    let defined: BTreeMap<&str, &str> = props["AttributeDefinitions"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["AttributeName"].as_str().unwrap(),
                a["AttributeType"].as_str().unwrap(),
            )
        })
        .collect();
    let mut expected = BTreeMap::from([(TABLE_KEY.name, TABLE_KEY.kind)]);
    for index in INDEXES {
        expected.insert(index.partition.name, index.partition.kind);
        expected.insert(index.sort.name, index.sort.kind);
    }
    assert_eq!(defined, expected);
    let indexes: BTreeMap<&str, (&str, &str)> = props["GlobalSecondaryIndexes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|i| {
            let keys = i["KeySchema"].as_sequence().unwrap();
            assert_eq!(keys[0]["KeyType"].as_str(), Some("HASH"));
            assert_eq!(keys[1]["KeyType"].as_str(), Some("RANGE"));
            let name = i["IndexName"].as_str().unwrap();
            let schema = INDEXES.iter().find(|x| x.name == name).unwrap();
            match schema.include {
                None => assert_eq!(i["Projection"]["ProjectionType"].as_str(), Some("ALL")),
                Some(attributes) => {
                    assert_eq!(i["Projection"]["ProjectionType"].as_str(), Some("INCLUDE"));
                    let listed: Vec<&str> = i["Projection"]["NonKeyAttributes"]
                        .as_sequence()
                        .unwrap()
                        .iter()
                        .map(|a| a.as_str().unwrap())
                        .collect();
                    assert_eq!(
                        listed, attributes,
                        "{name}: the attributes schema.rs projects"
                    );
                }
            }
            (
                i["IndexName"].as_str().unwrap(),
                (
                    keys[0]["AttributeName"].as_str().unwrap(),
                    keys[1]["AttributeName"].as_str().unwrap(),
                ),
            )
        })
        .collect();
    let expected: BTreeMap<&str, (&str, &str)> = INDEXES
        .iter()
        .map(|i| (i.name, (i.partition.name, i.sort.name)))
        .collect();
    assert_eq!(indexes, expected);
    assert_eq!(
        props["TimeToLiveSpecification"]["AttributeName"].as_str(),
        Some(TTL_ATTRIBUTE)
    );
    assert_eq!(props["BillingMode"].as_str(), Some("PAY_PER_REQUEST"));
    assert_eq!(
        props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"].as_bool(),
        Some(true)
    );
}

/// Actions with no resource-level permission (the Service Authorization
/// Reference lists no resource type for them): their statement names `*`.
const ACTIONS_WITHOUT_RESOURCES: [&str; 7] = [
    "cloudformation:ListStacks",
    // A fleet's units: the statement names `*` (the parent is the
    // request's, a unit of whatever organization the role is in).
    "organizations:ListAccountsForParent",
    "organizations:ListOrganizationalUnitsForParent",
    // A change set's hook results: the action has no resource type.
    "cloudformation:ListHookResults",
    // It names a detection by its id, not a stack.
    "cloudformation:DescribeStackDriftDetectionStatus",
    // They name a task token, not a state machine.
    "states:SendTaskSuccess",
    "states:SendTaskFailure",
];

/// function name → its IAM actions, from the template.
fn template_actions() -> BTreeMap<String, BTreeSet<String>> {
    let t = template();
    resources_of_type(&t, "AWS::Serverless::Function")
        .into_iter()
        .map(|(_, f)| {
            let name = f["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .unwrap()
                .to_owned();
            let mut actions = BTreeSet::new();
            for policy in f["Properties"]["Policies"].as_sequence().unwrap() {
                let Some(statements) = policy["Statement"].as_sequence() else {
                    // The only managed policies: the drift function's, for
                    // drift detection's reads (`DriftReadPolicy` and what
                    // SecurityAudit lacks), none allowed else.
                    let shown = format!("{policy:?}");
                    assert!(
                        name == "drift"
                            && (shown.contains("ReadsForDrift")
                                || shown.contains("FillsSecurityAuditGaps")),
                        "{name}: a policy that is not an inline document: {policy:?}"
                    );
                    continue;
                };
                for statement in statements {
                    let statement = unwrap_if(statement);
                    assert_eq!(
                        statement["Effect"].as_str(),
                        Some("Allow"),
                        "{name}: only Allow statements"
                    );
                    actions.extend(strings(&statement["Action"]));
                    let resources = strings(&statement["Resource"]);
                    // Only an action that takes no resource may name `*`.
                    let unscoped = strings(&statement["Action"])
                        .iter()
                        .all(|a| ACTIONS_WITHOUT_RESOURCES.contains(&a.as_str()));
                    assert!(
                        unscoped || !resources.iter().any(|r| r == "*"),
                        "{name}: no action on every resource"
                    );
                }
            }
            (name, actions)
        })
        .collect()
}

/// function name → its IAM actions, from the README's "IAM by function" table.
fn readme_actions() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let section = text
        .split("### IAM by function")
        .nth(1)
        .expect("the README has an IAM table");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| function"))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its rule
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let actions = cells[2]
                .split(',')
                .map(|a| a.trim().trim_matches('`').to_owned())
                .collect();
            (cells[1].to_owned(), actions)
        })
        .collect()
}

#[test]
fn every_function_is_in_the_template_with_exactly_the_actions_the_readme_lists() {
    let in_template = template_actions();
    let names: BTreeSet<String> = in_template.keys().cloned().collect();
    // Every binary in functions/ (the seven steps and the triggers) is deployed.
    let crates: BTreeSet<String> = std::fs::read_dir(repo_root().join("functions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, crates, "one function per crate in functions/");
    for step in StepName::ALL {
        assert!(names.contains(step.function()), "{step}");
    }
    assert_eq!(
        readme_actions(),
        in_template,
        "README's IAM table and template.yaml differ"
    );
}

#[test]
fn the_state_machine_is_wired_to_every_function() {
    let t = template();
    let (_, machine) = resources_of_type(&t, "AWS::Serverless::StateMachine")[0];
    let subs: BTreeSet<String> = machine["Properties"]["DefinitionSubstitutions"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    let expected: BTreeSet<String> = StepName::ALL
        .iter()
        .map(|s| s.placeholder().to_owned())
        .collect();
    assert_eq!(subs, expected);
    assert_eq!(
        machine["Properties"]["DefinitionUri"].as_str(),
        Some("statemachine/reconcile.asl.json")
    );
    // The steps start dependents on the machine with the installation's tag
    // (the IAM conformance test gives its requests that tag).
    let tag = &machine["Properties"]["Tags"]["stacksync:installation"];
    assert_eq!(
        serde_yaml_ng::to_string(tag).unwrap().trim(),
        "!Ref RegistryTable",
        "{tag:?}"
    );
}

/// The managed policies a function's role carries (`Policies` entries that
/// are policy ARNs, `!If` taken as holding).
fn managed_policies(function: &Value) -> Vec<String> {
    function["Properties"]["Policies"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(unwrap_if)
        .filter(|p| p.get("Statement").is_none())
        .flat_map(|p| match p {
            Value::Tagged(t) => strings(&t.value),
            other => strings(other),
        })
        .collect()
}

/// Drift detection reads every resource of a stack with the caller's
/// permissions, so the function that detects it carries a read policy: not
/// the scheduler, which reaches every Git server and holds the source
/// secrets. The drift function has its own role, which reaches no source,
/// and its read policy defaults to `SecurityAudit` (metadata, no data).
#[test]
fn drift_detection_reads_with_a_role_of_its_own_that_reaches_no_git_server() {
    let t = template();
    let functions: BTreeMap<&str, &Value> = resources_of_type(&t, "AWS::Serverless::Function")
        .into_iter()
        .collect();
    let scheduler = functions["SchedulerFunction"];
    assert_eq!(
        managed_policies(scheduler),
        Vec::<String>::new(),
        "the scheduler carries no managed policy"
    );
    let drift = functions
        .get("DriftFunction")
        .expect("a DriftFunction of its own");
    assert!(
        managed_policies(drift)
            .iter()
            .any(|p| p.contains("${DriftReadPolicy}")),
        "{:?}",
        managed_policies(drift)
    );
    let policy = serde_yaml_ng::to_string(&drift["Properties"]["Policies"]).unwrap();
    for reaches_sources in [
        "secretsmanager:GetSecretValue",
        "codecommit:GitPull",
        "ssm:GetParameter",
        "s3:GetObject",
        "states:StartExecution",
    ] {
        assert!(
            !policy.contains(reaches_sources),
            "drift may {reaches_sources}"
        );
    }
    assert_eq!(
        t["Parameters"]["DriftReadPolicy"]["Default"].as_str(),
        Some("SecurityAudit")
    );
}
