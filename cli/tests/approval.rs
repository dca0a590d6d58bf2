//! Approval gates, end to end: the real state machine run by the local
//! interpreter against the emulator's CloudFormation, waiting on a task
//! token, answered by the `stacksync` binary (`approve`, `reject`) as a
//! person in another terminal would.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{stacksync_on as stacksync, stderr, stdout};
use stacksync::asl::Outcome;
use stacksync::status::{AwaitingApproval, Decision, Phase, StallReason};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const QUEUE: &[u8] = b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n";
const QUEUE_AND_TOPIC: &[u8] =
    b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n  Topic: {Type: AWS::SNS::Topic}\n";

/// A harness, a repository with `template`, and an entry asking for
/// approval of every change set (waiting at most `timeout`).
async fn setup(
    prefix: &str,
    template: &[u8],
    timeout: &str,
) -> (
    Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory>,
    GitRepo,
    String,
) {
    let h = Harness::new(prefix).await;
    let repo = GitRepo::new(prefix);
    repo.commit(&[("t.yaml", template)], "template");
    let name = unique_name("appr").replace('-', "x");
    h.apply(&entry(&name, &repo.file_url(), timeout)).await;
    (h, repo, name)
}

/// The entry `name` following `url`, asking for approval of every change
/// set (waiting at most `timeout`); a `git://` URL is fetched `insecure`.
fn entry(name: &str, url: &str, timeout: &str) -> String {
    let insecure = if url.starts_with("git://") {
        ", insecure: true"
    } else {
        ""
    };
    format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', path: t.yaml{insecure}}}\n    approval: always\n    approvalTimeout: {timeout}\n"
    )
}

/// What waits for approval on `name`, once something does (and is not
/// `other`, a change set answered before).
async fn awaiting<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    name: &str,
    other: Option<&str>,
) -> AwaitingApproval {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = h.entry(name).await.status;
        if let Some(a) = status
            .awaiting
            .as_ref()
            .filter(|a| Some(a.change_set.as_str()) != other)
        {
            assert_eq!(status.phase, Phase::AwaitingApproval);
            return a.clone();
        }
        assert!(
            Instant::now() < deadline,
            "nothing awaits approval: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn change_set_exists(stack: &str, change_set: &str) -> bool {
    Emulator::shared()
        .cloudformation()
        .describe_change_set()
        .stack_name(stack)
        .change_set_name(change_set)
        .send()
        .await
        .is_ok()
}

async fn stack_status(stack: &str) -> Option<String> {
    Emulator::shared().stack_status(stack).await
}

fn ok(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Succeeded(_))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_change_set_runs_exactly_as_previewed_and_who_approved_is_recorded() {
    let (h, _repo, name) = setup("approve", QUEUE, "30d").await;
    let table = h.steps.registry.table().to_owned();
    let (outcome, answered) = tokio::join!(h.reconcile(&name), async {
        let a = awaiting(&h, &name, None).await;
        assert_eq!(a.changes.len(), 1, "{a:?}");
        assert_eq!(
            (
                a.changes[0].action.as_str(),
                a.changes[0].logical_id.as_str()
            ),
            ("Add", "Queue")
        );
        // Shown by get, and only the change set waiting can be approved.
        let got = stacksync(&table, &["get", &name]).await;
        assert!(
            stdout(&got).contains("AwaitingApproval") && stdout(&got).contains(&a.change_set),
            "{}",
            stdout(&got)
        );
        let wrong = stacksync(
            &table,
            &["approve", &name, "--change-set", "stacksync-v1-0000"],
        )
        .await;
        assert_eq!(wrong.status.code(), Some(1));
        assert!(
            stderr(&wrong).contains(&format!(
                "awaits approval of the change set {}",
                a.change_set
            )),
            "{}",
            stderr(&wrong)
        );
        let approved = stacksync(&table, &["approve", &name, "--change-set", &a.change_set]).await;
        assert!(approved.status.success(), "{}", stderr(&approved));
        assert!(
            stdout(&approved).contains("approved the change set"),
            "{}",
            stdout(&approved)
        );
        a.change_set
    });
    assert!(ok(&outcome), "{outcome:?}");
    let status = h.entry(&name).await.status;
    assert_eq!(status.phase, Phase::Ready);
    assert_eq!(
        status.change_set_name.as_deref(),
        Some(answered.as_str()),
        "that change set ran"
    );
    let record = status.approvals.last().unwrap();
    assert_eq!(
        (record.decision, record.change_set.as_str()),
        (Decision::Approved, answered.as_str())
    );
    assert!(
        record
            .by
            .as_deref()
            .is_some_and(|b| b.starts_with("arn:aws:")),
        "{record:?}"
    );
    // Answered already: the stack waits for nothing.
    let again = stacksync(&table, &["approve", &name, "--change-set", &answered]).await;
    assert!(
        stderr(&again).contains("no change set awaits approval"),
        "{}",
        stderr(&again)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_change_set_is_deleted_and_the_run_fails_with_the_reason() {
    let (h, _repo, name) = setup("reject", QUEUE, "30d").await;
    let table = h.steps.registry.table().to_owned();
    let (outcome, rejected) = tokio::join!(h.reconcile(&name), async {
        let a = awaiting(&h, &name, None).await;
        let out = stacksync(
            &table,
            &["reject", &name, "--reason", "not during the freeze"],
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        a.change_set
    });
    assert!(!ok(&outcome), "{outcome:?}");
    let status = h.entry(&name).await.status;
    assert_eq!(
        (status.phase, status.stall_reason),
        (Phase::Failed, Some(StallReason::Rejected))
    );
    let message = status.message.unwrap();
    assert!(
        message.contains("not during the freeze") && message.contains(&rejected),
        "{message}"
    );
    let record = status.approvals.last().unwrap();
    assert_eq!(record.decision, Decision::Rejected);
    assert_eq!(record.reason.as_deref(), Some("not during the freeze"));
    assert!(!change_set_exists(&name, &rejected).await, "deleted");
    assert_ne!(
        stack_status(&name).await.as_deref(),
        Some("CREATE_COMPLETE"),
        "never executed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_during_the_wait_voids_the_approval_and_a_new_change_set_asks_again() {
    let (h, repo, name) = setup("void", QUEUE, "30d").await;
    let table = h.steps.registry.table().to_owned();
    let (outcome, ()) = tokio::join!(h.reconcile(&name), async {
        let first = awaiting(&h, &name, None).await;
        repo.commit(&[("t.yaml", QUEUE_AND_TOPIC)], "a topic too");
        let out = stacksync(
            &table,
            &["approve", &name, "--change-set", &first.change_set],
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        // Void: the change set of the new commit waits now.
        let second = awaiting(&h, &name, Some(&first.change_set)).await;
        assert_ne!(second.change_set, first.change_set);
        let rows: Vec<&str> = second
            .changes
            .iter()
            .map(|c| c.logical_id.as_str())
            .collect();
        assert!(rows.contains(&"Topic"), "{rows:?}");
        let out = stacksync(
            &table,
            &["approve", &name, "--change-set", &second.change_set],
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
    });
    assert!(ok(&outcome), "{outcome:?}");
    let status = h.entry(&name).await.status;
    let decisions: Vec<Decision> = status.approvals.iter().map(|r| r.decision).collect();
    assert_eq!(decisions, [Decision::Void, Decision::Approved]);
    assert!(
        status.approvals[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("source moved")
    );
    assert_eq!(status.phase, Phase::Ready);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_nobody_gives_times_out_and_its_change_set_is_deleted() {
    // 5 minutes, waited 1000 times faster.
    let (h, _repo, name) = setup("timeout", QUEUE, "5m").await;
    let outcome = h.reconcile(&name).await;
    assert!(!ok(&outcome), "{outcome:?}");
    let status = h.entry(&name).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::ApprovalTimedOut));
    let change_set = status.approvals.last().unwrap().change_set.clone();
    assert_eq!(
        status.approvals.last().unwrap().decision,
        Decision::TimedOut
    );
    assert!(status.message.unwrap().contains("approval timed out"));
    assert!(!change_set_exists(&name, &change_set).await, "deleted");
}

/// In the deployed mode: the function binaries under the emulator's Step
/// Functions, which calls the approval function through the Lambda
/// integration with a task token and then waits; `stacksync approve`
/// answers it with `SendTaskSuccess`, and the execution goes on to deploy.
#[tokio::test(flavor = "multi_thread")]
async fn a_deployed_run_waits_on_its_task_token_and_stacksync_approve_answers_it() {
    let emulator = Emulator::shared();
    let (h, repo, name) = setup("appr-deployed", QUEUE, "30d").await;
    // A deployed installation fetches no file:// source: served on loopback.
    let daemon = stacksync_testkit::git::GitDaemon::serve(&repo);
    h.apply(&entry(&name, &daemon.url(&repo), "30d")).await;
    let (table, bucket) = (
        h.steps.registry.table().to_owned(),
        h.steps.blobs.bucket().to_owned(),
    );
    let functions = emulator.deploy_functions(&table, &bucket);
    let deployed = |args: Vec<String>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
        cmd.args(&args)
            .env("STACKSYNC_TABLE", &table)
            .env("STACKSYNC_BUCKET", &bucket)
            .env("STACKSYNC_STATE_MACHINE_ARN", &functions.state_machine_arn)
            .env_remove("AWS_PROFILE");
        for (k, v) in Emulator::shared().env() {
            cmd.env(k, v);
        }
        async move {
            tokio::task::spawn_blocking(move || cmd.output().unwrap())
                .await
                .unwrap()
        }
    };
    let started = deployed(vec!["reconcile".into(), name.clone()]).await;
    assert!(started.status.success(), "{}", stderr(&started));
    let a = awaiting(&h, &name, None).await;
    assert!(
        !a.token.starts_with("local:"),
        "a Step Functions task token"
    );
    let approved = deployed(vec![
        "approve".into(),
        name.clone(),
        "--change-set".into(),
        a.change_set.clone(),
    ])
    .await;
    assert!(approved.status.success(), "{}", stderr(&approved));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        let status = h.entry(&name).await.status;
        if status.phase == Phase::Ready {
            break status;
        }
        assert!(Instant::now() < deadline, "not Ready: {status:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(
        status.change_set_name.as_deref(),
        Some(a.change_set.as_str())
    );
    assert_eq!(
        status.approvals.last().unwrap().decision,
        Decision::Approved
    );
    assert_eq!(
        stack_status(&name).await.as_deref(),
        Some("CREATE_COMPLETE")
    );
    drop(functions);
}
