//! Approval gates, end to end: the real state machine run by the local
//! interpreter against the emulator's CloudFormation, waiting on a task
//! token, answered by the `stacksync` binary (`approve`, `reject`) as a
//! person in another terminal would.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{stderr, stdout};
use stacksync::adapters::s3::S3Store;
use stacksync::adapters::stepfunctions::StepFunctionsTokens;
use stacksync::asl::Outcome;
use stacksync::naming::approval_token_key;
use stacksync::status::{AwaitingApproval, Decision, Phase, StallReason, Status};
use stacksync::triggers::answer::AnswerHandler;
use stacksync_testkit::function_url::{FunctionUrl, Principal, TestTokens};
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

/// `stacksync ARGS` on the harness's registry and bucket (a local run keeps
/// its wait's token in the bucket), as a person in another terminal runs it.
async fn cli<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    args: &[&str],
) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
    cmd.args(args)
        .env("STACKSYNC_TABLE", h.steps.registry.table())
        .env("STACKSYNC_BUCKET", h.steps.blobs.bucket())
        .env_remove("AWS_PROFILE");
    for (k, v) in Emulator::shared().env() {
        cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// What waits for approval on `name`, once something does (and asked
/// after `earlier`, a wait answered before).
async fn awaiting<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    name: &str,
    earlier: Option<&AwaitingApproval>,
) -> AwaitingApproval {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = h.entry(name).await.status;
        if let Some(a) = status
            .approval
            .awaiting
            .as_ref()
            .filter(|a| earlier.is_none_or(|e| a.requested_at > e.requested_at))
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
        let got = cli(&h, &["get", &name]).await;
        assert!(
            stdout(&got).contains("AwaitingApproval") && stdout(&got).contains(&a.change_set),
            "{}",
            stdout(&got)
        );
        let wrong = cli(&h, &["approve", &name, "--change-set", "stacksync-v1-0000"]).await;
        assert_eq!(wrong.status.code(), Some(1));
        assert!(
            stderr(&wrong).contains(&format!(
                "awaits approval of the change set {}",
                a.change_set
            )),
            "{}",
            stderr(&wrong)
        );
        let approved = cli(&h, &["approve", &name, "--change-set", &a.change_set]).await;
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
        status.run.change_set_name.as_deref(),
        Some(answered.as_str()),
        "that change set ran"
    );
    let record = status.approval.records.last().unwrap();
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
    let again = cli(&h, &["approve", &name, "--change-set", &answered]).await;
    assert!(
        stderr(&again).contains("no change set awaits approval"),
        "{}",
        stderr(&again)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_change_set_is_deleted_and_the_run_fails_with_the_reason() {
    let (h, _repo, name) = setup("reject", QUEUE, "30d").await;
    let (outcome, rejected) = tokio::join!(h.reconcile(&name), async {
        let a = awaiting(&h, &name, None).await;
        let out = cli(&h, &["reject", &name, "--reason", "not during the freeze"]).await;
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
    let record = status.approval.records.last().unwrap();
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
    let (outcome, ()) = tokio::join!(h.reconcile(&name), async {
        let first = awaiting(&h, &name, None).await;
        repo.commit(&[("t.yaml", QUEUE_AND_TOPIC)], "a topic too");
        let out = cli(&h, &["approve", &name, "--change-set", &first.change_set]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        // Void: the change set of the new commit waits now.
        let second = awaiting(&h, &name, Some(&first)).await;
        assert_ne!(second.change_set, first.change_set);
        let rows: Vec<&str> = second
            .changes
            .iter()
            .map(|c| c.logical_id.as_str())
            .collect();
        assert!(rows.contains(&"Topic"), "{rows:?}");
        let out = cli(&h, &["approve", &name, "--change-set", &second.change_set]).await;
        assert!(out.status.success(), "{}", stderr(&out));
    });
    assert!(ok(&outcome), "{outcome:?}");
    let status = h.entry(&name).await.status;
    let decisions: Vec<Decision> = status.approval.records.iter().map(|r| r.decision).collect();
    assert_eq!(decisions, [Decision::Void, Decision::Approved]);
    assert!(
        status.approval.records[0]
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
    let change_set = status.approval.records.last().unwrap().change_set.clone();
    assert_eq!(
        status.approval.records.last().unwrap().decision,
        Decision::TimedOut
    );
    assert!(status.message.unwrap().contains("approval timed out"));
    assert!(!change_set_exists(&name, &change_set).await, "deleted");
}

/// In the deployed mode: the function binaries under the emulator's Step
/// Functions, which calls the approval function through the Lambda
/// integration with a task token and then waits; `stacksync approve`
/// answers it with `SendTaskSuccess`, and the execution goes on to deploy.
/// The installation's approvers for the approval tests, and two callers:
/// one of them, one not.
const APPROVERS: &str = "arn:aws:iam::123456789012:role/approvers";

fn alice() -> Principal {
    Principal::new(
        "alice",
        "arn:aws:sts::123456789012:assumed-role/approvers/alice",
    )
}

fn mallory() -> Principal {
    Principal::new(
        "mallory",
        "arn:aws:sts::123456789012:assumed-role/developers/mallory",
    )
}

/// The installation's approval function behind its IAM-authorised URL (a
/// stand-in on loopback that checks signatures as Lambda does, against
/// alice's and mallory's keys), over the harness's registry and bucket.
async fn approval_function<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
) -> FunctionUrl {
    let emulator = Emulator::shared();
    let registry = h.steps.registry.clone();
    let handler = AnswerHandler {
        registry: registry.clone(),
        blobs: S3Store::new(emulator.s3(), h.steps.blobs.bucket()),
        tokens: TestTokens {
            registry,
            step_functions: StepFunctionsTokens::new(aws_sdk_sfn::Client::new(
                &emulator.sdk_config(),
            )),
        },
        approvers: Vec::new(),
    };
    FunctionUrl::serve(vec![alice(), mallory()], handler).await
}

/// An entry following `url` (git:// on loopback), every change set asking
/// for the approval of `APPROVERS`.
fn guarded(name: &str, url: &str) -> String {
    format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', path: t.yaml, insecure: true}}\n    \
         approval: always\n    approvers: ['{APPROVERS}']\n"
    )
}

/// The `stacksync` command of a deployed installation (the harness's
/// registry and bucket, the function binaries' state machine) as the
/// principals run it, about the stack `name`.
struct Deployed {
    table: String,
    bucket: String,
    state_machine_arn: String,
    name: String,
}

impl Deployed {
    /// `stacksync ARGS`, signed with `who`'s keys.
    async fn run(&self, who: &Principal, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
        cmd.args(args)
            .env("STACKSYNC_TABLE", &self.table)
            .env("STACKSYNC_BUCKET", &self.bucket)
            .env("STACKSYNC_STATE_MACHINE_ARN", &self.state_machine_arn)
            .env_remove("AWS_PROFILE");
        for (k, v) in Emulator::shared().env() {
            cmd.env(k, v);
        }
        for (k, v) in who.env() {
            cmd.env(k, v);
        }
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    async fn approve(&self, who: &Principal, change_set: &str) -> std::process::Output {
        self.run(who, &["approve", &self.name, "--change-set", change_set])
            .await
    }
}

/// The token of the wait `awaiting`: in the bucket, read here as an
/// administrator would.
async fn stored_token(bucket: &str, name: &str, awaiting: &AwaitingApproval) -> String {
    let token = Emulator::shared()
        .s3()
        .get_object()
        .bucket(bucket)
        .key(approval_token_key(name, &awaiting.run))
        .send()
        .await
        .unwrap()
        .body
        .collect()
        .await
        .unwrap()
        .into_bytes();
    String::from_utf8(token.to_vec()).unwrap()
}

/// The status of `name` once `done` holds of it, before `deadline`
/// (`not` says what it is not yet).
async fn status_once<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    name: &str,
    deadline: Instant,
    not: &str,
    done: impl Fn(&Status) -> bool,
) -> Status {
    loop {
        let status = h.entry(name).await.status;
        if done(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "{not}: {status:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The last answer recorded: `decision` by `by`, of `change_set`.
fn assert_last_answer(status: &Status, decision: Decision, by: &Principal, change_set: &str) {
    let record = status.approval.records.last().unwrap();
    assert_eq!(
        (
            record.decision,
            record.by.as_deref(),
            record.change_set.as_str()
        ),
        (decision, Some(by.arn.as_str()), change_set)
    );
}

/// Not an approver: mallory's approval is refused, recorded, and nothing runs.
async fn refused_for_mallory<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    d: &Deployed,
    first: &AwaitingApproval,
) {
    let refused = d.approve(&mallory(), &first.change_set).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    let said = stderr(&refused);
    assert!(
        said.contains("refused by the approval function")
            && said.contains(&mallory().arn)
            && said.contains(APPROVERS),
        "{said}"
    );
    let status = h.entry(&d.name).await.status;
    assert_eq!(status.phase, Phase::AwaitingApproval, "it still waits");
    let record = status.approval.records.last().unwrap();
    assert_eq!(
        (record.decision, record.by.as_deref()),
        (Decision::Refused, Some(mallory().arn.as_str()))
    );
    assert_eq!(
        stack_status(&d.name).await.as_deref(),
        Some("REVIEW_IN_PROGRESS"),
        "the change set made, nothing executed"
    );
}

/// The token answered around the function: no approval. Void: the change
/// set is made again (the same name: nothing moved) and asks again; the
/// new wait.
async fn answered_around_the_function<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    d: &Deployed,
    token: &str,
    first: &AwaitingApproval,
) -> AwaitingApproval {
    aws_sdk_sfn::Client::new(&Emulator::shared().sdk_config())
        .send_task_success()
        .task_token(token)
        .output(
            serde_json::json!({"changeSet": first.change_set, "by": mallory().arn, "at": 0})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    let second = awaiting(h, &d.name, Some(first)).await;
    let void = h.entry(&d.name).await.status.approval.records;
    assert!(
        void.iter().any(|r| r.decision == Decision::Void
            && r.change_set == first.change_set
            && r.reason
                .as_deref()
                .is_some_and(|why| why.contains("did not come through"))),
        "{void:?}"
    );
    assert_eq!(
        stack_status(&d.name).await.as_deref(),
        Some("REVIEW_IN_PROGRESS"),
        "still nothing executed"
    );
    second
}

/// The approver: the change set runs, recorded as who AWS said signed; the
/// status once `Ready`.
async fn approved_by_alice<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    d: &Deployed,
    second: &AwaitingApproval,
) -> Status {
    let approved = d.approve(&alice(), &second.change_set).await;
    assert!(approved.status.success(), "{}", stderr(&approved));
    assert!(
        stdout(&approved).contains(&alice().arn),
        "{}",
        stdout(&approved)
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = status_once(h, &d.name, deadline, "not Ready", |s| {
        s.phase == Phase::Ready
    })
    .await;
    assert_last_answer(&status, Decision::Approved, &alice(), &second.change_set);
    assert_eq!(
        stack_status(&d.name).await.as_deref(),
        Some("CREATE_COMPLETE")
    );
    status
}

/// A change the approver rejects: the run ends Failed (Rejected), by her.
async fn rejected_by_alice<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    d: &Deployed,
    repo: &GitRepo,
    second: &AwaitingApproval,
    ready: &Status,
) {
    repo.commit(&[("t.yaml", QUEUE_AND_TOPIC)], "a topic too");
    let ready_at = ready.times.last_transition_at;
    let deadline = Instant::now() + Duration::from_secs(120);
    let started = d.run(&alice(), &["reconcile", &d.name]).await;
    assert!(started.status.success(), "{}", stderr(&started));
    let third = loop {
        let status = h.entry(&d.name).await.status;
        if let Some(a) = status
            .approval
            .awaiting
            .as_ref()
            .filter(|a| a.requested_at > second.requested_at)
        {
            break a.clone();
        }
        assert!(Instant::now() < deadline, "not asked: {status:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let rejected = d
        .run(&alice(), &["reject", &d.name, "--reason", "not this week"])
        .await;
    assert!(rejected.status.success(), "{}", stderr(&rejected));
    let status = status_once(h, &d.name, deadline, "not Failed", |s| {
        s.phase == Phase::Failed && s.times.last_transition_at != ready_at
    })
    .await;
    assert_eq!(status.stall_reason, Some(StallReason::Rejected));
    assert_last_answer(&status, Decision::Rejected, &alice(), &third.change_set);
}

/// Approvals come only from approvers. A deployed run (moto's Step
/// Functions running the function binaries) waits on a task token that no
/// registry reader sees. The CLI, run as two principals, answers it through
/// the approval function's IAM-authorised URL: the one who is not an
/// approver is refused (and recorded), and nothing runs; the token answered
/// around the function (as an administrator who read it in the execution's
/// history could) voids the change set, which asks again; the approver's
/// approval runs it, recorded as the principal AWS verified.
#[tokio::test(flavor = "multi_thread")]
async fn only_an_approver_s_approval_runs_a_deployed_change_set() {
    let logs = stacksync_testkit::logs::capture();
    let emulator = Emulator::shared();
    let h = Harness::new("appr-iam").await;
    let repo = GitRepo::new("appr-iam");
    repo.commit(&[("t.yaml", QUEUE)], "template");
    let daemon = stacksync_testkit::git::GitDaemon::serve(&repo);
    let name = unique_name("apiam").replace('-', "x");
    h.apply(&guarded(&name, &daemon.url(&repo))).await;
    let url = approval_function(&h).await;
    let (table, bucket) = (
        h.steps.registry.table().to_owned(),
        h.steps.blobs.bucket().to_owned(),
    );
    let answer_url = url.url();
    let functions = emulator.deploy_functions_with(
        &table,
        &bucket,
        &[("STACKSYNC_ANSWER_URL", answer_url.as_str())],
    );
    let d = Deployed {
        table,
        bucket,
        state_machine_arn: functions.state_machine_arn.clone(),
        name: name.clone(),
    };
    let started = d.run(&alice(), &["reconcile", &name]).await;
    assert!(started.status.success(), "{}", stderr(&started));
    let first = awaiting(&h, &name, None).await;
    assert_eq!(first.answer_url.as_deref(), Some(answer_url.as_str()));

    // The token: in the bucket, read by an administrator here; shown by no
    // command a registry reader runs.
    let token = stored_token(&d.bucket, &name, &first).await;
    assert!(!token.starts_with("local:"), "a Step Functions task token");
    for args in [vec!["get", &name, "-o", "json"], vec!["status"]] {
        let out = d.run(&mallory(), &args).await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!stdout(&out).contains(&token), "{args:?} shows the token");
    }

    refused_for_mallory(&h, &d, &first).await;
    let second = answered_around_the_function(&h, &d, &token, &first).await;
    let ready = approved_by_alice(&h, &d, &second).await;
    rejected_by_alice(&h, &d, &repo, &second, &ready).await;
    let statuses: Vec<u16> = url.seen().iter().map(|s| s.status).collect();
    assert_eq!(
        statuses,
        [403, 200, 200],
        "mallory refused, alice let through twice"
    );
    // The answer function logs who answered what, never a token; the
    // registry holds none either.
    let logged = logs.text();
    assert!(logged.contains("answered"), "the answer is logged");
    assert!(!logged.contains(&token), "a log line shows the token");
    let stored = serde_json::to_string(&h.entry(&name).await).unwrap();
    assert!(!stored.contains(&token), "the registry holds the token");
    drop(functions);
}

/// The same gate, as the deployed steps run it (each its own function,
/// its calls recorded for the IAM test) in the local interpreter: the
/// change-set step executes an approved change set only after reading the
/// answer function's verified record (a token answered around it voids
/// the change set), and the answer function says so when a wait's token is
/// gone.
#[tokio::test(flavor = "multi_thread")]
async fn the_change_set_step_reads_the_approval_functions_record_before_it_executes() {
    let mut h = Harness::new("appr-rec").await;
    let repo = GitRepo::new("appr-rec");
    repo.commit(&[("t.yaml", QUEUE)], "template");
    let daemon = stacksync_testkit::git::GitDaemon::serve(&repo);
    let name = unique_name("aprec").replace('-', "x");
    h.apply(&guarded(&name, &daemon.url(&repo))).await;
    let url = approval_function(&h).await;
    h.steps.config.local = false;
    h.steps.config.answer_url = Some(url.url());
    let approve = |change_set: String| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
        cmd.args(["approve", &name, "--change-set", &change_set])
            .env("STACKSYNC_TABLE", h.steps.registry.table())
            .env("STACKSYNC_BUCKET", h.steps.blobs.bucket())
            .env_remove("AWS_PROFILE");
        for (k, v) in Emulator::shared().env() {
            cmd.env(k, v);
        }
        for (k, v) in alice().env() {
            cmd.env(k, v);
        }
        async move {
            tokio::task::spawn_blocking(move || cmd.output().unwrap())
                .await
                .unwrap()
        }
    };
    let (outcome, ()) = tokio::join!(h.reconcile(&name), async {
        use stacksync::ports::Blobs as _;
        let first = awaiting(&h, &name, None).await;
        let key = approval_token_key(&name, &first.run);
        let token = h.steps.blobs.get(&key, 16 * 1024).await.unwrap();
        // The token answered around the answer function: void, asked again.
        let forged = stacksync::registry::Answer::Success {
            output: serde_json::json!({"changeSet": first.change_set, "at": 0}),
        };
        use stacksync::registry::Answers as _;
        h.steps
            .registry
            .answer(&String::from_utf8_lossy(&token), &forged, 0)
            .await
            .unwrap();
        let second = awaiting(&h, &name, Some(&first)).await;
        // Its token gone (a bucket's lifecycle, say): said, nothing answered.
        let key = approval_token_key(&name, &second.run);
        let token = h.steps.blobs.get(&key, 16 * 1024).await.unwrap();
        Emulator::shared()
            .s3()
            .delete_object()
            .bucket(h.steps.blobs.bucket())
            .key(&key)
            .send()
            .await
            .unwrap();
        let out = approve(second.change_set.clone()).await;
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("keeps no task token"),
            "{}",
            stderr(&out)
        );
        h.steps.blobs.put(&key, token, "text/plain").await.unwrap();
        let out = approve(second.change_set.clone()).await;
        assert!(out.status.success(), "{}", stderr(&out));
    });
    assert!(ok(&outcome), "{outcome:?}");
    let status = h.entry(&name).await.status;
    assert_eq!(status.phase, Phase::Ready);
    assert_eq!(
        status.approval.records.last().unwrap().by.as_deref(),
        Some(alice().arn.as_str())
    );
}
