//! The `stacksync` binary against a deployed installation (the function
//! binaries under the emulator's Step Functions), named by its stack alone:
//! `reconcile` starts and follows the deployed state machine, `history`
//! lists its executions, and what the installation allows is checked by
//! `apply` and by the deployed run.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::process::{Command, Output};

use common::{stderr, stdout};
use stacksync::registry::Specs;
use stacksync_testkit::{Emulator, unique_name};

/// `stacksync ARGS` given only the installation's name: table, bucket and
/// machine come from its outputs.
fn by_installation(installation: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
    cmd.args(args)
        .env("STACKSYNC_INSTALLATION", installation)
        .env_remove("STACKSYNC_TABLE")
        .env_remove("STACKSYNC_BUCKET")
        .env_remove("STACKSYNC_STATE_MACHINE_ARN");
    for (k, v) in Emulator::shared().env() {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Lets the stack's running execution end (it holds the stack's lease
/// while it runs) before the next one starts.
fn wait_until_idle(installation: &str, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while stdout(&by_installation(installation, &["history", name])).contains("RUNNING") {
        assert!(std::time::Instant::now() < deadline, "still running");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// A stacksync "installation": a CloudFormation stack with the outputs that
/// template.yaml and infra/ give, naming the given table, bucket and machine.
async fn installation(table: &str, bucket: &str, machine: &str) -> String {
    installation_with(table, bucket, machine, &[]).await
}

/// The same, with more outputs (`(key, value)`).
async fn installation_with(
    table: &str,
    bucket: &str,
    machine: &str,
    more: &[(&str, &str)],
) -> String {
    let name = unique_name("stacksync-installation");
    let mut template = serde_json::json!({
        "Resources": {"Marker": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {
            "RegistryTableName": {"Value": table},
            "ArtifactBucketName": {"Value": bucket},
            "StateMachineArn": {"Value": machine},
        }
    });
    for (key, value) in more {
        template["Outputs"][*key] = serde_json::json!({ "Value": value });
    }
    Emulator::shared()
        .cloudformation()
        .create_stack()
        .stack_name(&name)
        .template_body(template.to_string())
        .send()
        .await
        .unwrap();
    name
}

#[tokio::test(flavor = "multi_thread")]
async fn reconcile_starts_the_deployed_state_machine_follows_it_and_history_lists_it() {
    let emulator = Emulator::shared();
    let h = stacksync_testkit::harness::Harness::new("cli-deployed").await;
    let (table, bucket) = (
        h.steps.registry.table().to_owned(),
        h.steps.blobs.bucket().to_owned(),
    );
    let functions = emulator.deploy_functions(&table, &bucket);
    let installation = installation(&table, &bucket, &functions.state_machine_arn).await;
    let repo = stacksync_testkit::git::GitRepo::new("cli-deployed");
    repo.commit(
        &[(
            "q.yaml",
            b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n",
        )],
        "queue",
    );
    // A deployed installation fetches no file:// source: served on loopback.
    let daemon = stacksync_testkit::git::GitDaemon::serve(&repo);
    let name = unique_name("clidep").replace('-', "x");
    let dir = std::env::temp_dir().join(unique_name("cli-deployed"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("stacks.yaml");
    std::fs::write(
        &file,
        format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: q.yaml, insecure: true}}\n    pollInterval: 1s\n",
            daemon.url(&repo)
        ),
    )
    .unwrap();
    // Only the installation's name: table, bucket and machine come from its outputs.
    let run = |args: &[&str]| by_installation(&installation, args);
    let applied = run(&["apply", "-f", file.to_str().unwrap()]);
    assert!(applied.status.success(), "{}", stderr(&applied));

    let out = run(&["reconcile", &name, "--wait"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(
        text.contains(&format!("── reconcile {name} ({name}_manual_")),
        "the execution is named after the stack: {text}"
    );
    assert!(
        text.contains("▸ FetchArtifact") && text.contains("▸ PollStatus"),
        "the states are followed: {text}"
    );
    assert!(text.contains(&format!("✓ {name}: SUCCEEDED")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with(&name) && l.contains("Ready") && l.contains("CREATE_COMPLETE")),
        "the status table ends it: {text}"
    );

    // Without --wait: started, and the ARN printed.
    let started = run(&["reconcile", &name]);
    assert!(started.status.success(), "{}", stderr(&started));
    assert!(
        stdout(&started).contains(":execution:"),
        "{}",
        stdout(&started)
    );

    // Let it end before the next one (it holds the stack's lease while it runs).
    wait_until_idle(&installation, &name);

    // --wait with a timeout: stops following (the execution goes on), exit 1.
    let timed_out = run(&["reconcile", &name, "--wait", "--timeout", "0s"]);
    assert_eq!(timed_out.status.code(), Some(1), "{}", stdout(&timed_out));
    assert!(
        stderr(&timed_out).contains(&format!("{name}: still running after 0s")),
        "{}",
        stderr(&timed_out)
    );
    wait_until_idle(&installation, &name);

    // A broken template: the execution fails, the reason is shown, exit 1.
    repo.commit(&[("q.yaml", b"not: [a template")], "broken");
    let failed = run(&["reconcile", &name, "--wait"]);
    assert_eq!(failed.status.code(), Some(1), "{}", stdout(&failed));
    assert!(
        stdout(&failed).contains("is not valid YAML"),
        "{}",
        stdout(&failed)
    );
    assert!(
        stderr(&failed).contains(&format!("the reconcile of {name:?} failed")),
        "{}",
        stderr(&failed)
    );

    // history: newest first, all four, with their outcome.
    let history = run(&["history", &name, "-o", "json"]);
    assert!(history.status.success(), "{}", stderr(&history));
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&history.stdout).unwrap();
    assert_eq!(listed.len(), 4, "{listed:?}");
    assert_eq!(listed[0]["status"], "FAILED", "{listed:?}");
    assert_eq!(listed[3]["status"], "SUCCEEDED", "{listed:?}");
    let table_out = stdout(&run(&["history", &name]));
    assert!(
        table_out.starts_with("STARTED") && table_out.contains("SUCCEEDED"),
        "{table_out}"
    );

    // A stack that is not a stacksync installation is named as such.
    let other = Command::new(env!("CARGO_BIN_EXE_stacksync"))
        .args(["--installation", "no-such-installation", "history", &name])
        .envs(Emulator::shared().env())
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(1));
    assert!(
        stderr(&other).contains("cannot read the installation stack \"no-such-installation\""),
        "{}",
        stderr(&other)
    );
    drop(functions);
}

/// What the installation allows (its `StackNamePrefix`, `CloudFormationRoleArns`
/// and `RequireRoleArn`) is checked by `apply` against its outputs, and by
/// the deployed functions against their environment: an entry written past
/// the CLI (an older one, a hand edit) is refused at its run, before its
/// source is read or CloudFormation is asked anything.
#[tokio::test(flavor = "multi_thread")]
async fn entries_the_installation_does_not_allow_are_refused_by_apply_and_by_the_deployed_run() {
    let emulator = Emulator::shared();
    let h = stacksync_testkit::harness::Harness::new("cli-policy").await;
    let (table, bucket) = (
        h.steps.registry.table().to_owned(),
        h.steps.blobs.bucket().to_owned(),
    );
    let role = "arn:aws:iam::123456789012:role/cfn-exec";
    let functions = emulator.deploy_functions_with(
        &table,
        &bucket,
        &[
            ("STACKSYNC_STACK_NAME_PREFIX", "team-"),
            ("STACKSYNC_SERVICE_ROLE_ARNS", role),
            ("STACKSYNC_REQUIRE_ROLE_ARN", "true"),
        ],
    );
    let installation = installation_with(
        &table,
        &bucket,
        &functions.state_machine_arn,
        &[
            ("StackNamePrefix", "team-"),
            ("ServiceRoleArns", role),
            ("RequireRoleArn", "true"),
        ],
    )
    .await;
    let run = |args: &[&str]| by_installation(&installation, args);
    let dir = std::env::temp_dir().join(unique_name("cli-policy"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let source = "source: {git: 'https://git.example/infra.git', path: q.yaml}";
    let bad = file(
        "bad.yaml",
        format!(
            "stacks:\n  - name: orders\n    stackName: team-orders\n    {source}\n\
             \x20 - name: other\n    roleArn: {role}\n    {source}\n\
             \x20 - name: admin\n    stackName: team-admin\n    roleArn: arn:aws:iam::123456789012:role/admin\n    {source}\n"
        ),
    );
    let refused = run(&["apply", "-f", &bad]);
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    let text = stderr(&refused);
    for expected in [
        "stacks[0] (orders): this installation requires a service role on every entry (RequireRoleArn)",
        "stacks[1] (other): this installation manages only stacks whose names start with \"team-\"",
        "stacks[2] (admin): roleArn arn:aws:iam::123456789012:role/admin is not among",
        "nothing was applied",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    assert!(
        h.steps.registry.list().await.unwrap().is_empty(),
        "nothing written"
    );

    // Written past the CLI's check: the deployed run refuses it.
    let repo = stacksync_testkit::git::GitRepo::new("cli-policy");
    repo.commit(
        &[("q.yaml", b"Resources:\n  Q: {Type: AWS::SQS::Queue}\n")],
        "q",
    );
    h.apply(&format!(
        "stacks:\n  - name: teamxorders\n    stackName: team-orders\n    source: {{git: '{}', path: q.yaml, insecure: true}}\n",
        repo.file_url()
    ))
    .await;
    let failed = run(&["reconcile", "teamxorders", "--wait"]);
    assert_eq!(failed.status.code(), Some(1), "{}", stdout(&failed));
    let entry = h.entry("teamxorders").await;
    assert_eq!(
        entry.status.stall_reason,
        Some(stacksync::status::StallReason::NotAllowed),
        "{:?}",
        entry.status
    );
    assert!(
        entry
            .status
            .message
            .as_deref()
            .is_some_and(|m| m.contains("RequireRoleArn")),
        "{:?}",
        entry.status.message
    );
    assert_eq!(
        entry.status.run.last_attempted_revision, None,
        "the source was not read"
    );
    drop(functions);
}
