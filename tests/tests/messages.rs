//! Issue "Every message true": what a run says, and what it leaves, when a
//! call keeps failing, run in-process (the local runner's state machine)
//! against the emulator, whose CloudFormation does not implement
//! `UpdateTerminationProtection` (a bare HTTP 500): the failure is that
//! call's, said with its operation and status, after the step's own
//! retries; not a loop through the poll budget blamed on the wait.
#![allow(clippy::unwrap_used)]
// tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use stacksync::asl::Outcome;
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::backend::Backend;
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const QUEUE: &[u8] = b"Resources:
  Queue:
    Type: AWS::SQS::Queue
Outputs:
  QueueUrl: {Value: !Ref Queue}
";

fn stacks(name: &str, url: &str, extra: &str) -> String {
    format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', path: stacks/queue.yaml}}\n{extra}"
    )
}

/// The change sets left on a stack that were never executed.
async fn unexecuted_change_sets(stack: &str) -> Vec<String> {
    Backend::Moto
        .change_sets(stack)
        .await
        .into_iter()
        .filter(|s| {
            !matches!(
                s.execution_status().map(|e| e.as_str()),
                Some("EXECUTE_COMPLETE" | "EXECUTE_IN_PROGRESS" | "EXECUTE_FAILED")
            )
        })
        .map(|s| {
            format!(
                "{} {:?} {:?}",
                s.change_set_name().unwrap_or("?"),
                s.status(),
                s.status_reason()
            )
        })
        .collect()
}

fn failed_states(h: &Harness<impl stacksync::ports::CloudFormationFactory>) -> usize {
    h.take_states().iter().filter(|s| *s == "ChangeSet").count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_settings_call_that_keeps_failing_ends_the_run_with_its_own_error_and_no_change_set_left()
{
    let h = Harness::new("tp").await;
    let repo = GitRepo::new("tp");
    let daemon = GitDaemon::serve(&repo);
    repo.commit(&[("stacks/queue.yaml", QUEUE)], "queue");
    let name = unique_name("tp").replace('-', "x");
    let url = daemon.url(&repo);
    h.apply(&stacks(&name, &url, "")).await;
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
    h.take_states();

    // Only termination protection changes: an empty change set, then a call
    // the emulator answers with a bare HTTP 500, every time.
    h.apply(&stacks(
        &name,
        &url,
        "    terminationProtection: true\n    maxPolls: 5\n",
    ))
    .await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
    let rounds = failed_states(&h);
    let status = h.entry(&name).await.status;
    let message = status.message.clone().unwrap_or_default();
    assert_eq!(
        (status.phase, status.stall_reason),
        (Phase::Failed, Some(StallReason::RetriesExhausted)),
        "{message}"
    );
    assert!(
        message.starts_with(
            "UpdateTerminationProtection: HTTP 500 Internal Server Error, with no error code or message"
        ),
        "{message}"
    );
    assert_eq!(
        rounds, 1,
        "one change set, not a round per retry: {message}"
    );
    assert_eq!(
        unexecuted_change_sets(&name).await,
        Vec::<String>::new(),
        "the failed run deletes the change set it made"
    );
    assert_eq!(status.run.retrying, None, "the retry ended with the run");
}

/// A new stack whose protection cannot be set: made, then failed on that
/// call, and the status says the stack is there (not `-`).
#[tokio::test(flavor = "multi_thread")]
async fn a_new_stack_whose_settings_fail_is_failed_with_that_call_and_its_status_seen() {
    let h = Harness::new("tpnew").await;
    let repo = GitRepo::new("tpnew");
    let daemon = GitDaemon::serve(&repo);
    repo.commit(&[("stacks/queue.yaml", QUEUE)], "queue");
    let name = unique_name("tpnew").replace('-', "x");
    h.apply(&stacks(
        &name,
        &daemon.url(&repo),
        "    terminationProtection: true\n    maxPolls: 5\n",
    ))
    .await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
    let status = h.entry(&name).await.status;
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("UpdateTerminationProtection: HTTP 500"),
        "{message}"
    );
    assert_eq!(
        status.stack.status.as_deref(),
        Some("CREATE_COMPLETE"),
        "the stack exists: {message}"
    );
    assert!(status.stack.at.is_some());
}

/// Issue "Every message true" (11): a run whose final write was made but
/// whose answer was lost (the step's process killed at its end: a Task
/// error no Retry covers) ends as its status says, not `ReconcileFailed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_last_answer_was_lost_ends_as_its_status_says() {
    use stacksync_testkit::crash::{Kill, Killing};
    let h = Harness::new("lost").await;
    let repo = GitRepo::new("lost");
    let daemon = GitDaemon::serve(&repo);
    repo.commit(&[("stacks/queue.yaml", QUEUE)], "queue");
    let name = unique_name("lost").replace('-', "x");
    h.apply(&stacks(&name, &daemon.url(&repo), "")).await;
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));

    // In sync: UploadTemplate (the second Task) writes the final status;
    // its answer is lost.
    let functions = h.functions();
    let killing = Killing::new(
        &functions,
        Kill {
            task: 1,
            after: None,
            finalizer: false,
        },
    );
    let (_, outcome) = h.reconcile_by(&killing, &name).await;
    let killed = killing.killed.lock().unwrap().clone();
    assert_eq!(
        killed.map(|(step, finished)| (step.ends_with(":template-upload"), finished)),
        Some((true, true))
    );
    let status = h.entry(&name).await.status;
    assert_eq!(status.phase, Phase::Ready, "{:?}", status.message);
    assert!(
        matches!(outcome, Outcome::Succeeded(_)),
        "the status is Ready, the execution must agree: {outcome:?}"
    );
}

/// Issue "Every message true" (8): a stack whose upstream's create failed
/// waits `Pending`, naming it, and makes no stack; it does not run and fail.
#[tokio::test(flavor = "multi_thread")]
async fn a_dependent_of_a_failed_create_waits_pending_naming_it() {
    const FAILS: &[u8] = b"Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties: {QueueName: not-a-fifo-name, FifoQueue: true}
Outputs:
  QueueUrl: {Value: !Ref Queue}
";
    const READS: &[u8] = b"Parameters:
  Up: {Type: String}
Resources:
  Topic:
    Type: AWS::SNS::Topic
    Properties: {DisplayName: !Ref Up}
";
    let h = Harness::new("dep").await;
    let repo = GitRepo::new("dep");
    let daemon = GitDaemon::serve(&repo);
    repo.commit(&[("up.yaml", FAILS), ("down.yaml", READS)], "two");
    let up = unique_name("up").replace('-', "x");
    let down = unique_name("down").replace('-', "x");
    let url = daemon.url(&repo);
    h.apply(&format!(
        "stacks:\n  - name: {up}\n    source: {{git: '{url}', path: up.yaml}}\n  \
         - name: {down}\n    source: {{git: '{url}', path: down.yaml}}\n    \
         parameters: {{Up: {{fromStack: {up}, output: QueueUrl}}}}\n"
    ))
    .await;
    assert!(matches!(h.reconcile(&up).await, Outcome::Failed(_)));
    assert_eq!(h.entry(&up).await.status.phase, Phase::Failed);

    let outcome = h.reconcile(&down).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let status = h.entry(&down).await.status;
    assert_eq!(status.phase, Phase::Pending, "{:?}", status.message);
    assert_eq!(
        status.message.as_deref(),
        Some(format!("waiting for {up} (Failed): this stack runs once it is Ready").as_str())
    );
    assert_eq!(
        Emulator::shared().stack_status(&down).await,
        None,
        "no stack made"
    );
}
