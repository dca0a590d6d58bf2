//! IAM conformance: every AWS call the integration suite saw a function make
//! is allowed by that function's role, as `template.yaml` and as the CDK app
//! deploy it, in the `aws`, `aws-cn` and `aws-us-gov` partitions; and every
//! action a role grants is one some recorded call needs (least privilege).
//!
//! The emulator enforces no IAM, so nothing else would catch a missing
//! permission. `scripts/test` runs the suite with `STACKSYNC_IAM_CALLS` set
//! (the recorder writes there, `tests/src/iam/record.rs`), then this test
//! alone (`--run-ignored only`); `scripts/check-infra` writes the CDK app's
//! synthesis for the installation in `tests/fixtures/iam/installation.json`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use stacksync::reconcile::steps::StepName;
use stacksync_testkit::iam::call::Call;
use stacksync_testkit::iam::policy::{Resolver, Statement, allowed, load_template, sam_roles};
use stacksync_testkit::iam::record::CALLS_DIR_ENV;
use stacksync_testkit::iam::requests::{Installation, requests};
use stacksync_testkit::repo_root;

/// The trigger functions (not Task states of the state machine).
/// (And the answer function, behind its URL.)
const TRIGGERS: [&str; 6] = [
    "webhook",
    "scheduler",
    "drift",
    "events",
    "answer",
    "preview",
];

/// Actions the Lambda platform uses on the function's behalf (its logs and
/// traces), never the function's own code: no recorded call needs them.
fn platform_action(action: &str) -> bool {
    action.starts_with("logs:") || action.starts_with("xray:")
}

fn fixture() -> Value {
    let text =
        std::fs::read_to_string(repo_root().join("tests/fixtures/iam/installation.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every call recorded by this run of the suite.
fn recorded_calls() -> Vec<Call> {
    let dir = std::env::var_os(CALLS_DIR_ENV).unwrap_or_else(|| {
        panic!(
            "{CALLS_DIR_ENV} is not set: this test reads what the suite recorded; run scripts/test"
        )
    });
    let mut calls = Vec::new();
    for file in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        for line in text.lines().filter(|l| !l.is_empty()) {
            calls
                .push(serde_json::from_str::<Call>(line).unwrap_or_else(|e| panic!("{line}: {e}")));
        }
    }
    assert!(
        !calls.is_empty(),
        "no calls recorded in {}: run scripts/test",
        dir.to_string_lossy()
    );
    calls
}

/// One deployment of the installation, as IAM sees it.
struct Deployment {
    name: &'static str,
    /// Each function's statements, by binary.
    roles: BTreeMap<String, Vec<Statement>>,
    /// What the artifact bucket's policy says to the `assumeRoleArn`
    /// target role (CloudFormation in its account reads the template with
    /// its credentials).
    target_role: Vec<Statement>,
}

/// The two deployments of one installation.
fn deployments(installation: &Installation, fixture: &Value) -> Vec<Deployment> {
    let sam = load_template(&std::fs::read_to_string(repo_root().join("template.yaml")).unwrap())
        .unwrap();
    let overrides = BTreeMap::from([
        (
            "StackNamePrefix".to_owned(),
            fixture["stackNamePrefix"].clone(),
        ),
        (
            "CloudFormationRoleArns".to_owned(),
            fixture["cloudFormationRoleArns"].clone(),
        ),
        (
            "TargetAccountRoleArns".to_owned(),
            fixture["targetAccountRoleArns"].clone(),
        ),
        ("FleetRoleName".to_owned(), fixture["fleetRoleName"].clone()),
        (
            "PublishParameterPath".to_owned(),
            fixture["publishParameterPath"].clone(),
        ),
        (
            "WebhookSecretArn".to_owned(),
            fixture["webhookSecretArn"].clone(),
        ),
        (
            "SourceSecretArns".to_owned(),
            fixture["sourceSecretArns"].clone(),
        ),
        (
            "SourceParameterArns".to_owned(),
            fixture["sourceParameterArns"].clone(),
        ),
        (
            "ValueSecretArns".to_owned(),
            fixture["valueSecretArns"].clone(),
        ),
        (
            "ValueParameterArns".to_owned(),
            fixture["valueParameterArns"].clone(),
        ),
        (
            "SourceBucketNames".to_owned(),
            fixture["sourceBucketNames"].clone(),
        ),
        (
            "CodeCommitRepositoryArns".to_owned(),
            fixture["codeCommitRepositoryArns"].clone(),
        ),
    ]);
    let sam = Resolver::new(&sam, installation, &overrides);
    let synthesized = repo_root().join("infra/dist/conformance.template.json");
    let cdk = std::fs::read_to_string(&synthesized).unwrap_or_else(|e| {
        panic!("{}: {e}; scripts/check-infra writes it (the CDK app synthesized for tests/fixtures/iam/installation.json)", synthesized.display())
    });
    let cdk = load_template(&cdk).unwrap();
    let cdk = Resolver::new(&cdk, installation, &BTreeMap::new());
    let target = &installation.target_role_arn;
    vec![
        Deployment {
            name: "template.yaml",
            roles: sam_roles(&sam).unwrap(),
            target_role: sam.bucket_policy(target).unwrap(),
        },
        Deployment {
            name: "the CDK app",
            roles: sam_roles(&cdk).unwrap(),
            target_role: cdk.bucket_policy(target).unwrap(),
        },
    ]
}

#[test]
#[ignore = "reads the calls the whole suite recorded: scripts/test runs it last"]
fn every_recorded_call_is_allowed_by_its_functions_role_and_every_grant_is_used() {
    let calls = recorded_calls();
    let fixture = fixture();
    let functions: BTreeSet<String> = StepName::ALL
        .iter()
        .map(|s| s.function().to_owned())
        .chain(TRIGGERS.iter().map(|f| (*f).to_owned()))
        .collect();
    let mut problems = BTreeSet::new();
    let mut denied: BTreeMap<String, String> = BTreeMap::new();

    // Every function was exercised (else the recorder is not wired to it).
    let called: BTreeSet<String> = calls.iter().map(|c| c.function.clone()).collect();
    for missing in functions.difference(&called) {
        problems.insert(format!(
            "{missing}: the suite recorded no AWS call of this function"
        ));
    }

    // The cross-account template read is proven only if one was recorded.
    if !calls
        .iter()
        .any(|c| c.assumed && c.operation == "CreateChangeSet")
    {
        problems.insert(
            "no change set made as an assumeRoleArn target role was recorded: the bucket policy's grant to target roles is unproven".to_owned(),
        );
    }

    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for partition in ["aws", "aws-cn", "aws-us-gov"] {
        let installation = Installation::in_partition(partition, &fixture);
        for Deployment {
            name: deployment,
            roles,
            target_role,
        } in deployments(&installation, &fixture)
        {
            let deployed: BTreeSet<String> = roles.keys().cloned().collect();
            assert_eq!(deployed, functions, "{deployment}: one role per function");
            for call in &calls {
                let needed = match requests(call, &installation) {
                    Ok(needed) => needed,
                    Err(e) => {
                        problems.insert(format!("{}: {e} (test {})", call.function, call.test));
                        continue;
                    }
                };
                for request in needed {
                    // A call made as the target role in its account: that
                    // role's own policy (the user's) decides, but for the
                    // template it reads from this installation's bucket,
                    // which the bucket's policy must also allow it.
                    let (statements, who) = match call.assumed {
                        false => (&roles[&call.function], call.function.clone()),
                        true if request.action.starts_with("s3:") => (
                            &target_role,
                            format!("the target role (for {})", call.function),
                        ),
                        true => continue,
                    };
                    if partition == "aws" && !call.assumed {
                        used.entry(call.function.clone())
                            .or_default()
                            .insert(request.action.clone());
                    }
                    if !allowed(statements, &request).unwrap() {
                        // One line per role and action; the first call that needed it as the example.
                        denied
                            .entry(format!(
                                "{deployment} ({partition}): {who} may not {}",
                                request.action
                            ))
                            .or_insert_with(|| {
                                format!(
                                    "{request}, for {}:{} in test {}",
                                    call.service, call.operation, call.test
                                )
                            });
                    }
                }
            }
            if partition == "aws" {
                for (function, statements) in &roles {
                    let granted: BTreeSet<&String> = statements
                        .iter()
                        .filter(|s| s.allow)
                        .flat_map(|s| &s.actions)
                        .filter(|a| !platform_action(a))
                        .collect();
                    let needed = used.get(function).cloned().unwrap_or_default();
                    for action in granted {
                        if !needed.iter().any(|n| n.eq_ignore_ascii_case(action)) {
                            problems.insert(format!(
                                "{deployment}: {function} is granted {action}, which no recorded call needs"
                            ));
                        }
                    }
                }
            }
        }
    }
    for (denial, example) in denied {
        problems.insert(format!("{denial}: {example}"));
    }
    let report = problems.iter().cloned().collect::<Vec<_>>().join("\n  ");
    assert!(
        problems.is_empty(),
        "{} IAM problems:\n  {report}",
        problems.len()
    );
}

/// The resolver reads template.yaml's conditions: with no roles or secret
/// configured, the optional statements are gone.
#[test]
fn without_roles_or_a_secret_the_optional_statements_are_not_granted() {
    let fixture = fixture();
    let installation = Installation::in_partition("aws", &fixture);
    let sam = load_template(&std::fs::read_to_string(repo_root().join("template.yaml")).unwrap())
        .unwrap();
    let resolver = Resolver::new(&sam, &installation, &BTreeMap::new());
    let roles = sam_roles(&resolver).unwrap();
    assert!(
        !resolver
            .bucket_policy(&installation.target_role_arn)
            .unwrap()
            .iter()
            .any(|s| s.allow),
        "no target roles: the bucket grants them nothing"
    );
    let granted = || roles.values().flatten().filter(|s| s.allow);
    let actions: BTreeSet<&String> = granted().flat_map(|s| &s.actions).collect();
    for optional in [
        "iam:PassRole",
        "sts:AssumeRole",
        "secretsmanager:GetSecretValue",
        "ssm:GetParameter",
        "codecommit:GitPull",
    ] {
        assert!(!actions.contains(&optional.to_owned()), "{optional}");
    }
    // Versions are read of the installation's own templates only (the
    // change set's TemplateURL pins one): no source bucket without
    // SourceBucketNames.
    for statement in granted().filter(|s| s.actions.iter().any(|a| a == "s3:GetObjectVersion")) {
        assert_eq!(
            statement.resources,
            [format!("arn:aws:s3:::{}/templates/*", installation.bucket)],
            "{statement:?}"
        );
    }
}

/// A target role (`TargetAccountRoleArns`) reads by version the templates
/// of its own account's stacks only, never another account's: a role in
/// one account learns nothing of what is deployed in another.
#[test]
fn a_target_role_reads_only_its_own_accounts_templates() {
    let fixture = fixture();
    let installation = Installation::in_partition("aws", &fixture);
    let own = installation
        .target_role_arn
        .split(':')
        .nth(4)
        .unwrap()
        .to_owned();
    for deployment in deployments(&installation, &fixture) {
        let reads = |key: &str| {
            let request = stacksync_testkit::iam::requests::Request {
                action: "s3:GetObjectVersion".into(),
                resource: format!("arn:aws:s3:::{}/{key}", installation.bucket),
                context: BTreeMap::new(),
            };
            allowed(&deployment.target_role, &request).unwrap()
        };
        assert!(
            reads(&format!("templates/accounts/{own}/0a1b")),
            "{}: its own account's",
            deployment.name
        );
        assert!(
            !reads("templates/accounts/111122223333/0a1b"),
            "{}: another account's",
            deployment.name
        );
        assert!(
            !reads("templates/0a1b"),
            "{}: the installation's own account's",
            deployment.name
        );
    }
}

/// CloudFormation calls on a stack, each with whether the roles allow it:
/// as the installation "mine", on stacks tagged as its own, as another's
/// ("theirs") or untagged, with and without a tag in the request.
fn ownership_cases() -> Vec<(Call, bool)> {
    // The caller runs as the installation "mine" (each test's table is the
    // fixture's installation); None: untagged, or not in the request.
    let call = |function: &str,
                operation: &str,
                stack_tag: Option<&str>,
                request_tag: Option<&str>| Call {
        function: function.to_owned(),
        service: "cloudformation".to_owned(),
        operation: operation.to_owned(),
        region: "us-east-1".to_owned(),
        stack: Some("stacksync-orders".to_owned()),
        installation: Some("mine".to_owned()),
        stack_installation: stack_tag.map(str::to_owned),
        request_installation: request_tag.map(str::to_owned),
        tagged: request_tag.is_some(),
        ..Call::default()
    };
    vec![
        // (call, allowed)
        (
            call("change-set", "ExecuteChangeSet", Some("mine"), None),
            true,
        ),
        (call("change-set", "ExecuteChangeSet", None, None), true),
        (
            call("change-set", "ExecuteChangeSet", Some("theirs"), None),
            false,
        ),
        (
            call("change-set", "DeleteChangeSet", Some("theirs"), None),
            false,
        ),
        (
            call("change-set", "ContinueUpdateRollback", Some("theirs"), None),
            false,
        ),
        (
            call("change-set", "CreateChangeSet", None, Some("mine")),
            true,
        ),
        (
            call("change-set", "CreateChangeSet", Some("mine"), Some("mine")),
            true,
        ),
        (call("change-set", "CreateChangeSet", None, None), false),
        (
            call("change-set", "CreateChangeSet", None, Some("theirs")),
            false,
        ),
        (
            call(
                "change-set",
                "CreateChangeSet",
                Some("theirs"),
                Some("mine"),
            ),
            false,
        ),
        (
            call("template-upload", "SetStackPolicy", Some("theirs"), None),
            false,
        ),
        (
            call("template-upload", "UpdateTerminationProtection", None, None),
            true,
        ),
        (
            call("poll-status", "DeleteChangeSet", Some("theirs"), None),
            false,
        ),
        (
            call("finalize", "DeleteChangeSet", Some("mine"), None),
            true,
        ),
        (
            call("finalize", "DeleteChangeSet", Some("theirs"), None),
            false,
        ),
        (call("delete", "DeleteStack", Some("mine"), None), true),
        // Untagged: a delete sent again after its stack is gone (the run
        // itself deletes only the entry's own).
        (call("delete", "DeleteStack", None, None), true),
        (call("delete", "DeleteStack", Some("theirs"), None), false),
        (
            call(
                "delete",
                "UpdateTerminationProtection",
                Some("theirs"),
                None,
            ),
            false,
        ),
        // Reading is not limited: a run must see a stack to refuse it.
        (
            call("change-set", "DescribeStacks", Some("theirs"), None),
            true,
        ),
    ]
}

/// IAM holds stacksync to its own stacks too, whatever its code does: a
/// change or delete only of a stack no other installation tagged as its own
/// (`aws:ResourceTag/stacksync:installation`), a change set only if it tags
/// the stack as this installation's (`aws:RequestTag/…`). In both
/// deployments.
#[test]
fn the_roles_change_and_delete_no_stack_another_installation_owns() {
    let fixture = fixture();
    let installation = Installation::in_partition("aws", &fixture);
    let cases = ownership_cases();
    for deployment in deployments(&installation, &fixture) {
        for (call, expected) in &cases {
            let role = &deployment.roles[&call.function];
            let needed = requests(call, &installation).unwrap();
            let allowed = needed
                .iter()
                .filter(|r| r.action.starts_with("cloudformation:"))
                .all(|r| allowed(role, r).unwrap());
            assert_eq!(
                allowed,
                *expected,
                "{}: {} {} (stack tag {:?}, request tag {:?})",
                deployment.name,
                call.function,
                call.operation,
                call.stack_installation,
                call.request_installation
            );
        }
    }
}

/// A DynamoDB call on the registry table, naming `attributes`.
fn registry_call(function: &str, operation: &str, key: Option<&str>, attributes: &[&str]) -> Call {
    Call {
        function: function.to_owned(),
        service: "dynamodb".to_owned(),
        operation: operation.to_owned(),
        region: "us-east-1".to_owned(),
        table: Some("stacksync-registry".to_owned()),
        key: key.map(str::to_owned),
        attributes: attributes.iter().map(|a| (*a).to_owned()).collect(),
        ..Call::default()
    }
}

/// The triggers' queries of a source's followers (`by-source`), each with
/// whether the roles allow it: the attributes they may read, never a spec.
fn trigger_query_cases() -> Vec<(Call, bool)> {
    let call = registry_call;
    let follower: Vec<&str> = vec![
        "pk",
        "name",
        "suspended",
        "specSuspend",
        "deletionRequestedAt",
        "leaseExpiresAt",
        "sourceKey",
        "status",
        "watch",
    ];
    let query = |function: &str, attributes: &[&str], select: Option<&str>| Call {
        index: Some("by-source".to_owned()),
        select: select.map(str::to_owned),
        ..call(function, "Query", None, attributes)
    };
    let with_spec: Vec<&str> = follower.iter().copied().chain(["spec"]).collect();
    vec![
        (
            query("webhook", &follower, Some("SPECIFIC_ATTRIBUTES")),
            true,
        ),
        (
            query("webhook", &with_spec, Some("SPECIFIC_ATTRIBUTES")),
            false,
        ),
        (query("webhook", &["sourceKey"], None), false),
        (
            query("webhook", &["sourceKey"], Some("ALL_ATTRIBUTES")),
            false,
        ),
        (
            query("scheduler", &with_spec, Some("SPECIFIC_ATTRIBUTES")),
            false,
        ),
        (
            query("events", &follower, Some("SPECIFIC_ATTRIBUTES")),
            true,
        ),
    ]
}

/// The triggers' writes, each with whether the roles allow it: delivery
/// ids, due times, sources and ended holds, never a spec.
fn trigger_write_cases() -> Vec<(Call, bool)> {
    let call = registry_call;
    vec![
        (
            call(
                "webhook",
                "PutItem",
                Some("delivery#1"),
                &["pk", "expiresAt"],
            ),
            true,
        ),
        (
            call(
                "webhook",
                "PutItem",
                Some("delivery#1"),
                &["pk", "expiresAt", "spec"],
            ),
            false,
        ),
        (
            Call {
                return_values: Some("ALL_OLD".to_owned()),
                ..call(
                    "webhook",
                    "PutItem",
                    Some("delivery#1"),
                    &["pk", "expiresAt"],
                )
            },
            false,
        ),
        (
            call(
                "scheduler",
                "UpdateItem",
                Some("stack#a"),
                &["pk", "nextReconcileAt"],
            ),
            true,
        ),
        // Registry sources: the scheduler and the events function write
        // the specs a source's commit holds (never the webhook, whose URL
        // is public).
        (
            call(
                "scheduler",
                "UpdateItem",
                Some("stack#a"),
                &["pk", "nextReconcileAt", "spec"],
            ),
            true,
        ),
        (
            call("webhook", "UpdateItem", Some("stack#a"), &["pk", "spec"]),
            false,
        ),
        (
            call("webhook", "PutItem", Some("stack#a"), &["pk", "spec"]),
            false,
        ),
        (
            call(
                "webhook",
                "UpdateItem",
                Some("regsource#a"),
                &["pk", "status"],
            ),
            false,
        ),
        (
            call(
                "scheduler",
                "UpdateItem",
                Some("regsource#a"),
                &["pk", "spec"],
            ),
            false,
        ),
        (
            call("scheduler", "UpdateItem", Some("stack#a"), &["pk", "head"]),
            false,
        ),
        (
            call(
                "scheduler",
                "UpdateItem",
                Some("source#k"),
                &["pk", "head", "followersCheckedAt"],
            ),
            true,
        ),
        (
            call("scheduler", "DeleteItem", Some("source#k"), &["pk", "head"]),
            true,
        ),
        (
            call(
                "events",
                "UpdateItem",
                Some("stack#a"),
                &["pk", "status", "watch", "leaseOwner"],
            ),
            true,
        ),
        (
            call("events", "UpdateItem", Some("stack#a"), &["pk", "spec"]),
            true,
        ),
        (
            call("events", "UpdateItem", Some("delivery#a"), &["pk", "spec"]),
            false,
        ),
    ]
}

/// The trigger functions may name only the attributes they own
/// (`dynamodb:Attributes`): the webhook reads of a source's followers
/// nothing of their specs, and writes only delivery ids (a push that moves
/// a registry source is relayed, never applied there: its URL is public);
/// the scheduler and the events function write due times, sources and
/// ended holds, and the specs a registry source's commit holds, but never
/// a registry source's own spec. In both deployments.
#[test]
fn the_triggers_name_only_the_attributes_they_own() {
    let fixture = fixture();
    let installation = Installation::in_partition("aws", &fixture);
    let cases = [trigger_query_cases(), trigger_write_cases()].concat();
    for deployment in deployments(&installation, &fixture) {
        for (call, expected) in &cases {
            let role = &deployment.roles[&call.function];
            let needed = requests(call, &installation).unwrap();
            let allowed = needed.iter().all(|r| allowed(role, r).unwrap());
            assert_eq!(
                allowed,
                *expected,
                "{}: {} {} {:?} {:?} (select {:?}, returns {:?})",
                deployment.name,
                call.function,
                call.operation,
                call.key,
                call.attributes,
                call.select,
                call.return_values
            );
        }
    }
}

/// The steps' DynamoDB calls, each with whether the roles allow it: what a
/// run writes of an entry and of the stacks it depends on, and the removal
/// of an entry with its claim; never a spec, nor another kind of item.
fn step_cases() -> Vec<(Call, bool)> {
    let call = |function: &str, operation: &str, key: &str, attributes: &[&str]| {
        registry_call(function, operation, Some(key), attributes)
    };
    let run = [
        "pk",
        "status",
        "watch",
        "leaseOwner",
        "leaseExpiresAt",
        "leaseTakenAt",
        "nextReconcileAt",
    ];
    let with =
        |extra: &'static str| -> Vec<&'static str> { run.iter().copied().chain([extra]).collect() };
    let steps = [
        "artifact-fetch",
        "template-upload",
        "change-set",
        "poll-status",
        "delete",
        "approval",
        "finalize",
    ];
    let mut cases = Vec::new();
    for step in steps {
        cases.push((call(step, "UpdateItem", "stack#a", &run), true));
        for field in [
            "spec",
            "specVersion",
            "sourceKey",
            "deletionRequestedAt",
            "suspended",
        ] {
            cases.push((call(step, "UpdateItem", "stack#a", &with(field)), false));
        }
        cases.push((call(step, "UpdateItem", "source#k", &["pk", "head"]), false));
        cases.push((
            call(step, "UpdateItem", "claim#1#r#a", &["pk", "name"]),
            false,
        ));
        cases.push((
            call(step, "UpdateItem", "delivery#1", &["pk", "expiresAt"]),
            false,
        ));
        cases.push((call(step, "GetItem", "stack#a", &["pk"]), true));
        cases.push((
            Call {
                return_values: Some("ALL_OLD".to_owned()),
                ..call(step, "UpdateItem", "stack#a", &run)
            },
            false,
        ));
    }
    // What a run records of the stacks it depends on.
    cases.push((
        call(
            "artifact-fetch",
            "UpdateItem",
            "dependents#a",
            &["pk", "names"],
        ),
        true,
    ));
    cases.push((
        call(
            "artifact-fetch",
            "UpdateItem",
            "dependents#a",
            &["pk", "spec"],
        ),
        false,
    ));
    cases.push((
        call(
            "template-upload",
            "UpdateItem",
            "dependents#a",
            &["pk", "names"],
        ),
        false,
    ));
    // A removed entry goes, with its claim, once its deletion was asked.
    cases.push((
        call(
            "delete",
            "DeleteItem",
            "stack#a",
            &["pk", "deletionRequestedAt", "leaseOwner"],
        ),
        true,
    ));
    cases.push((
        call("delete", "DeleteItem", "claim#1#r#a", &["pk", "name"]),
        true,
    ));
    cases.push((call("delete", "DeleteItem", "source#k", &["pk"]), false));
    cases
}

/// The steps parse what anyone may push to a repository (Git objects,
/// archives, YAML): their roles may write of an entry only what a run
/// writes (its status, its hold, when it is due), never its spec, and no
/// other kind of item but those their code writes. In both deployments.
#[test]
fn the_steps_write_only_what_a_run_writes_never_a_spec() {
    let fixture = fixture();
    let installation = Installation::in_partition("aws", &fixture);
    let cases = step_cases();
    for deployment in deployments(&installation, &fixture) {
        for (call, expected) in &cases {
            let role = &deployment.roles[&call.function];
            let needed = requests(call, &installation).unwrap();
            let allowed = needed.iter().all(|r| allowed(role, r).unwrap());
            assert_eq!(
                allowed,
                *expected,
                "{}: {} {} {:?} {:?} (returns {:?})",
                deployment.name,
                call.function,
                call.operation,
                call.key,
                call.attributes,
                call.return_values
            );
        }
    }
}
